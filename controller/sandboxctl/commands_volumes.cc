// sandboxctl's volume commands (docs/api.md "Volumes"):
//   volume create NAME [--size GB] [--node N] | list | show ID | rm ID | resize ID GB
// and create's --volume NAME:PATH[:ro] (volume_mount_json).
#include <iostream>

#include <Poco/JSON/Array.h>

#include "pvesandbox/common/text.h"
#include "sandboxctl.h"

namespace pvs::cli {
namespace {

std::string size_arg(Args& a, const std::string& what) {
  std::string v = a.next(what);
  if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(what + " needs a number of GiB");
  return v;
}

void print_volume(const Poco::JSON::Object::Ptr& o) {
  std::cout << terminal_safe(str(o, "id")) << "  " << terminal_safe(str(o, "name")) << "  "
            << str(o, "size_gb") << " GiB on " << terminal_safe(str(o, "node")) << " ("
            << terminal_safe(str(o, "storage")) << ")";
  if (o->has("mounted_by") && !o->isNull("mounted_by"))
    std::cout << ", mounted by " << terminal_safe(str(o, "mounted_by"));
  std::cout << "\n";
}

// Prints the reply (a volume) as --json asks, or one line.
int show_reply(Client& c, const Reply& r) {
  if (c.options().json)
    print_json(r.body);
  else
    print_volume(parse_object(r.body));
  return 0;
}

int volume_create(Client& c, Args& a) {
  std::string body = "{\"name\":" + json_string(a.next("NAME"));
  while (a.more()) {
    std::string f = a.next("flag");
    if (f == "--size")
      body += ",\"size_gb\":" + size_arg(a, f);
    else if (f == "--node")
      body += ",\"node\":" + json_string(a.next(f));
    else
      throw UsageError("volume create: unknown option " + f);
  }
  auto r = c.request("POST", "/v1/volumes", body + "}");
  check(r, {201});
  return show_reply(c, r);
}

int volume_list(Client& c, Args& a) {
  a.done();
  auto r = c.request("GET", "/v1/volumes");
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto items = parse_object(r.body)->getArray("volumes");
  std::vector<std::vector<std::string>> rows{
      {"ID", "NAME", "SIZE_GB", "NODE", "STORAGE", "OWNER", "MOUNTED_BY"}};
  for (std::size_t i = 0; items && i < items->size(); ++i) {
    auto o = items->getObject(static_cast<unsigned>(i));
    rows.push_back({str(o, "id"), str(o, "name"), str(o, "size_gb"), str(o, "node"),
                    str(o, "storage"), str(o, "owner"),
                    o->isNull("mounted_by") ? "-" : str(o, "mounted_by")});
  }
  print_table(rows);
  return 0;
}

}  // namespace

std::string volume_mount_json(const std::string& spec) {
  auto colon = spec.find(':');
  if (colon == std::string::npos || colon == 0)
    throw UsageError("--volume needs NAME:PATH or NAME:PATH:ro");
  std::string name = spec.substr(0, colon), path = spec.substr(colon + 1);
  bool ro = path.size() > 3 && path.ends_with(":ro");
  if (ro) path.resize(path.size() - 3);
  return "{\"volume\":" + json_string(name) + ",\"path\":" + json_string(path) +
         (ro ? ",\"read_only\":true}" : "}");
}

int cmd_volume(Client& c, Args& a) {
  std::string verb = a.next("create|list|show|rm|resize");
  if (verb == "create") return volume_create(c, a);
  if (verb == "list") return volume_list(c, a);
  if (verb != "show" && verb != "rm" && verb != "resize")
    throw UsageError("volume: create, list, show, rm or resize, not " + verb);
  std::string id = a.next("ID");
  std::string path = "/v1/volumes/" + url_encode(id);
  if (verb == "rm") {
    a.done();
    check(c.request("DELETE", path), {204});
    std::cout << terminal_safe(id) << ": deleted\n";
    return 0;
  }
  if (verb == "show") {
    a.done();
    auto r = c.request("GET", path);
    check(r);
    return show_reply(c, r);
  }
  std::string size = size_arg(a, "GB");
  a.done();
  auto r = c.request("POST", path + "/resize", "{\"size_gb\":" + size + "}");
  check(r);
  return show_reply(c, r);
}

}  // namespace pvs::cli
