// sandboxctl's custom template commands (admin token; docs/templates.md):
//   template build FILE   the recipe parsed here (its `src` files read next to it and sent
//                         inline), the build's output printed as it streams
//   template list | rm NAME
#include <fstream>
#include <iostream>
#include <sstream>

#include <Poco/JSON/Array.h>

#include "pvesandbox/common/text.h"
#include "pvesandbox/template_recipe.h"
#include "sandboxctl.h"

namespace pvs::cli {
namespace {

// The recipe as the API takes it: its canonical JSON (contents inline) and its pool size.
std::string recipe_body(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file);
  std::stringstream text;
  text << in.rdbuf();
  auto slash = file.rfind('/');
  std::string dir = slash == std::string::npos ? "." : file.substr(0, slash);
  auto recipe = parse_recipe(text.str(), file, dir.empty() ? "/" : dir);
  if (!recipe) throw std::runtime_error(recipe.error().message);
  std::string body = recipe->canonical();
  body.pop_back();  // the closing brace: pool_size is not part of the canonical form
  return body + ",\"pool_size\":" + std::to_string(recipe->pool_size) + "}";
}

int build(Client& c, Args& a) {
  std::string file = a.next("FILE");
  a.done();
  std::string pending;
  int rc = kExitError;
  auto line = [&](const std::string& text) {
    if (text.empty()) return;
    if (c.options().json) {
      std::cout << text << "\n" << std::flush;
      if (text.find("\"template\":") != std::string::npos) rc = 0;
      return;
    }
    auto o = parse_object(text);
    if (o->has("line")) {
      std::cout << terminal_safe(o->getValue<std::string>("line")) << "\n" << std::flush;
    } else if (o->has("template")) {
      auto t = o->getObject("template");
      std::cout << "template " << terminal_safe(str(t, "name")) << ": vmid " << str(t, "vmid")
                << (o->optValue<bool>("cached", false) ? " (cached)" : "") << "\n";
      rc = 0;
    } else if (o->has("error")) {
      std::cerr << "sandboxctl: "
                << terminal_safe(o->getObject("error")->getValue<std::string>("message"),
                                 TerminalText::kLines)
                << "\n";
    }
  };
  auto r = c.request("POST", "/v1/templates", recipe_body(file), "application/json",
                     "application/x-ndjson", [&](std::string_view data) {
                       pending.append(data);
                       for (auto nl = pending.find('\n'); nl != std::string::npos;
                            nl = pending.find('\n')) {
                         line(pending.substr(0, nl));
                         pending.erase(0, nl + 1);
                       }
                     });
  check(r);
  line(pending);
  return rc;
}

int list(Client& c, Args& a) {
  a.done();
  auto r = c.request("GET", "/v1/templates");  // an operator's templates and the token's own
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto items = parse_object(r.body)->getArray("templates");
  std::vector<std::vector<std::string>> rows{
      {"NAME", "VMID", "NODE", "SERVES", "BASE", "POOL", "IN_USE", "DIGEST"}};
  for (std::size_t i = 0; items && i < items->size(); ++i) {
    auto o = items->getObject(static_cast<unsigned>(i));
    auto copies = o->getArray("copies");
    // One row per node's copy (a controller without copies in its answer: the template's).
    for (std::size_t k = 0; k < (copies && copies->size() ? copies->size() : 1); ++k) {
      auto copy = copies && copies->size() ? copies->getObject(static_cast<unsigned>(k)) : o;
      std::string serves;
      auto list = copy->getArray("serves");
      for (std::size_t n = 0; list && n < list->size(); ++n)
        serves += (n ? "," : "") + list->getElement<std::string>(static_cast<unsigned>(n));
      rows.push_back({str(o, "name"), str(copy, "vmid"), str(copy, "node"),
                      serves.empty() ? str(copy, "node") : serves, str(copy, "base_vmid"),
                      str(o, "pool_size"), str(o, "in_use"), str(o, "digest").substr(0, 16)});
    }
  }
  print_table(rows);
  return 0;
}

int remove(Client& c, Args& a) {
  std::string name = a.next("NAME");
  a.done();
  check(c.request("DELETE", "/v1/templates/" + url_encode(name)), {204});
  std::cout << terminal_safe(name) << ": deleted\n";
  return 0;
}

// A number argument of a flag.
std::string number(Args& a, const std::string& flag) {
  std::string v = a.next(flag);
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(flag + " needs a number");
  return v;
}

}  // namespace

// capture ID [NAME]: a template of the sandbox's files now (POST /v1/sandboxes/{id}/capture).
int cmd_capture(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string body = a.more() ? "{\"name\":" + json_string(a.next("NAME")) + "}" : "{}";
  a.done();
  auto r = c.request("POST", "/v1/sandboxes/" + url_encode(id) + "/capture", body);
  check(r, {201});
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto o = parse_object(r.body);
  std::cout << "template " << terminal_safe(str(o, "name")) << ": vmid " << str(o, "vmid") << " on "
            << terminal_safe(str(o, "node")) << " (create with --template "
            << terminal_safe(str(o, "name")) << ")\n";
  return 0;
}

// fork ID [--count N] [--ttl SECONDS]: N sandboxes of its files now, their ids a line each.
int cmd_fork(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string body;
  while (a.more()) {
    std::string f = a.next("flag");
    if (f == "--count")
      body += std::string(body.empty() ? "" : ",") + "\"count\":" + number(a, f);
    else if (f == "--ttl")
      body += std::string(body.empty() ? "" : ",") + "\"ttl_seconds\":" + number(a, f);
    else
      throw UsageError("fork: unknown option " + f);
  }
  auto r = c.request("POST", "/v1/sandboxes/" + url_encode(id) + "/fork", "{" + body + "}");
  check(r, {201});
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto list = parse_object(r.body)->getArray("sandboxes");
  for (std::size_t i = 0; list && i < list->size(); ++i)
    std::cout << terminal_safe(str(list->getObject(static_cast<unsigned>(i)), "id")) << "\n";
  return 0;
}

int cmd_template(Client& c, Args& a) {
  std::string verb = a.next("build|list|rm");
  if (verb == "build") return build(c, a);
  if (verb == "list") return list(c, a);
  if (verb == "rm") return remove(c, a);
  throw UsageError("template: build, list or rm, not " + verb);
}

}  // namespace pvs::cli
