// The commands on sandboxes: create, list, show, internet, ttl, snapshots, destroy; pool and
// health.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "pvesandbox/common/text.h"
#include "sandboxctl.h"

namespace pvs::cli {
namespace {

int simple_sandbox_call(Client& c, const std::string& method, const std::string& path,
                        const std::string& body, std::initializer_list<long> ok) {
  auto r = c.request(method, path, body);
  check(r, ok);
  if (c.options().json) {
    print_json(r.body);
  } else if (!r.body.empty() && r.body[0] == '{') {
    auto o = parse_object(r.body);
    if (o->has("id")) print_sandbox(o);
  }
  return 0;
}

}  // namespace

int cmd_create(Client& c, Args& a) {
  std::ostringstream body;
  body << "{";
  bool first = true;
  auto field = [&](const std::string& k, const std::string& raw_json) {
    body << (first ? "" : ",") << json_string(k) << ":" << raw_json;
    first = false;
  };
  std::map<std::string, std::string> labels, selector;
  std::string volumes;  // --volume: the items of "volumes"
  Args egress;          // --allow/--ports/--list, for allowlist_json
  auto integer = [&](const std::string& flag) {
    std::string v = a.next(flag);
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos) {
      throw UsageError(flag + " needs a number");
    }
    return v;
  };
  while (a.more()) {
    std::string f = a.next("flag");
    if (f == "--cpus")
      field("cpus", integer(f));
    else if (f == "--memory")
      field("memory_mb", integer(f));
    else if (f == "--disk")
      field("disk_gb", integer(f));
    else if (f == "--ttl")
      field("ttl_seconds", integer(f));
    else if (f == "--on-expiry")
      field("on_expiry", json_string(a.next(f)));
    else if (f == "--auto-resume")
      field("auto_resume", "true");
    else if (f == "--internet")
      field("internet", "true");
    else if (f == "--allow" || f == "--ports" || f == "--list") {
      egress.v.push_back(f);
      egress.v.push_back(a.next(f));
    } else if (f == "--hostname")
      field("hostname", json_string(a.next(f)));
    else if (f == "--profile")
      field("profile", json_string(a.next(f)));
    else if (f == "--template")
      field("template", json_string(a.next(f)));
    else if (f == "--node")
      field("node", json_string(a.next(f)));
    else if (f == "--volume")
      volumes += (volumes.empty() ? "" : ",") + volume_mount_json(a.next(f));
    else if (f == "--label" || f == "--node-selector") {
      std::string kv = a.next(f);
      auto eq = kv.find('=');
      if (eq == std::string::npos) throw UsageError(f + " needs KEY=VALUE");
      (f == "--label" ? labels : selector)[kv.substr(0, eq)] = kv.substr(eq + 1);
    } else {
      throw UsageError("create: unknown option " + f);
    }
  }
  auto object = [](const std::map<std::string, std::string>& m) {
    std::string l = "{";
    for (const auto& [k, v] : m)
      l += (l.size() > 1 ? "," : "") + json_string(k) + ":" + json_string(v);
    return l + "}";
  };
  if (egress.more()) {
    if (body.str().find("\"internet\":true") != std::string::npos)
      throw UsageError("create: --internet, or --allow/--list, not both");
    field("internet", allowlist_json(egress));
  }
  if (!volumes.empty()) field("volumes", "[" + volumes + "]");
  if (!selector.empty()) field("node_selector", object(selector));
  if (!labels.empty()) {
    field("labels", object(labels));
  }
  body << "}";
  auto r = c.request("POST", "/v1/sandboxes", body.str());
  check(r, {201});
  if (c.options().json) {
    print_json(r.body);
  } else {
    print_sandbox(parse_object(r.body));
  }
  return 0;
}

int cmd_list(Client& c, Args& a) {
  std::string query = a.query("list", {"--label"});
  auto r = c.request("GET", "/v1/sandboxes" + query);
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto list = parse_object(r.body)->getArray("sandboxes");
  std::vector<std::vector<std::string>> rows{
      {"ID", "NODE", "HOSTNAME", "ADDRESS", "STATE", "INTERNET", "EXPIRES", "LABELS"}};
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    auto o = list->getObject(static_cast<unsigned>(i));
    rows.push_back({str(o, "id"), str(o, "node"), str(o, "hostname"), str(o, "address"),
                    str(o, "state"), internet_text(o), str(o, "expires_at"), labels_text(o)});
  }
  print_table(rows);
  return 0;
}

int cmd_show(Client& c, Args& a) {
  std::string id = a.next("ID");
  a.done();
  auto r = c.request("GET", "/v1/sandboxes/" + url_encode(id));
  check(r);
  if (c.options().json) {
    print_json(r.body);
  } else {
    print_sandbox(parse_object(r.body));
  }
  return 0;
}

// pause ID | resume ID [--ttl SECONDS]: the sandbox as show prints it.
int cmd_pause_resume(Client& c, Args& a, bool resume) {
  std::string id = a.next("ID");
  std::string body = "{}";
  if (resume && a.more()) {
    std::string f = a.next("flag");
    if (f != "--ttl") throw UsageError("resume: unknown option " + f);
    std::string v = a.next(f);
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("--ttl needs a number");
    body = "{\"ttl_seconds\":" + v + "}";
  }
  a.done();
  auto r =
      c.request("POST", "/v1/sandboxes/" + url_encode(id) + (resume ? "/resume" : "/pause"), body);
  check(r);
  if (c.options().json)
    print_json(r.body);
  else
    print_sandbox(parse_object(r.body));
  return 0;
}
int cmd_pause(Client& c, Args& a) {
  return cmd_pause_resume(c, a, false);
}
int cmd_resume(Client& c, Args& a) {
  return cmd_pause_resume(c, a, true);
}

int cmd_ports(Client& c, Args& a) {
  std::string id = a.next("ID");
  a.done();
  auto r = c.request("GET", "/v1/sandboxes/" + url_encode(id) + "/ports");
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto list = parse_object(r.body)->getArray("ports");
  std::vector<std::vector<std::string>> rows{{"PORT", "ADDRESSES", "PREVIEW"}};
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    auto o = list->getObject(static_cast<unsigned>(i));
    std::string addrs;
    auto a2 = o->getArray("addresses");
    for (std::size_t j = 0; a2 && j < a2->size(); ++j)
      addrs += (j ? "," : "") + a2->getElement<std::string>(static_cast<unsigned>(j));
    rows.push_back(
        {std::to_string(o->getValue<int>("port")), addrs, c.options().url + str(o, "url")});
  }
  print_table(rows);
  return 0;
}

// usage ID [--since S] [--until U]: a line per sample, oldest first, the live one marked "now".
int cmd_usage(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string query = a.query("usage", {"--since", "--until"});
  auto r = c.request("GET", "/v1/sandboxes/" + url_encode(id) + "/usage" + query);
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto mib = [](const Poco::JSON::Object::Ptr& o, const char* k) {
    return std::to_string(o->getValue<Poco::Int64>(k) >> 20);
  };
  auto list = parse_object(r.body)->getArray("samples");
  std::vector<std::vector<std::string>> rows{{"TIME", "CPU%", "CPUS", "MEM_MIB", "DISK_MIB"}};
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    auto o = list->getObject(static_cast<unsigned>(i));
    char cpu[32];
    std::snprintf(cpu, sizeof cpu, "%.1f", o->getValue<double>("cpu") * 100);
    rows.push_back({str(o, "time") + (o->getValue<bool>("live") ? " (now)" : ""), cpu,
                    str(o, "cpus"), mib(o, "mem") + "/" + mib(o, "maxmem"),
                    mib(o, "disk") + "/" + mib(o, "maxdisk")});
  }
  print_table(rows);
  return 0;
}

// preview ID PORT [--expires SECONDS]: a link to the port a browser opens without the token.
int cmd_preview(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string port = a.next("PORT");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError("preview: PORT is a number, 1-65535");
  std::string body = "{\"port\":" + port;
  if (a.more()) {
    std::string f = a.next("flag");
    if (f != "--expires") throw UsageError("preview: unknown option " + f);
    std::string v = a.next(f);
    if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("--expires needs a number of seconds");
    body += ",\"expires_in_seconds\":" + v;
  }
  a.done();
  auto r = c.request("POST", "/v1/sandboxes/" + url_encode(id) + "/previews", body + "}");
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto o = parse_object(r.body);
  // The client keeps the URL without a trailing '/'.
  std::cout << c.options().url << str(o, "path") << "\n"
            << "(no token needed; anyone with the link reaches port " << port << " until "
            << str(o, "expires_at") << ")\n";
  return 0;
}

// {"allow":[...],"ports":[...]} or {"list":"..."}: NAME... [--ports P,...] | --list L.
std::string allowlist_json(Args& a) {
  std::vector<std::string> names;
  std::string ports, list;
  while (a.more()) {
    std::string w = a.next("NAME");
    if (w == "--ports")
      ports = a.next(w);
    else if (w == "--list")
      list = a.next(w);
    else if (w == "--allow")
      names.push_back(a.next(w));
    else if (!w.empty() && w[0] == '-')
      throw UsageError("internet allow: unknown option " + w);
    else
      names.push_back(w);
  }
  if (!list.empty()) {
    if (!names.empty() || !ports.empty())
      throw UsageError("internet allow: --list L, or names with --ports, not both");
    return "{\"list\":" + json_string(list) + "}";
  }
  if (names.empty()) throw UsageError("internet allow: needs a NAME (or --list L)");
  std::string out = "{\"allow\":[";
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? "," : "") + json_string(names[i]);
  out += "]";
  if (!ports.empty()) {
    if (ports.find_first_not_of("0123456789,") != std::string::npos || ports.front() == ',' ||
        ports.back() == ',' || ports.find(",,") != std::string::npos)
      throw UsageError("--ports needs numbers separated by commas, e.g. 80,443");
    out += ",\"ports\":[" + ports + "]";
  }
  return out + "}";
}

// internet ID log [--since MS] [--limit N]: the sandbox's egress log, one line per name and
// window, oldest first.
int internet_log(Client& c, const std::string& id, Args& a) {
  std::string query = a.query("internet log", {"--since", "--limit"});
  auto r = c.request("GET", "/v1/sandboxes/" + url_encode(id) + "/egress/log" + query);
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto names = parse_object(r.body)->getArray("names");
  std::vector<std::vector<std::string>> rows{
      {"WINDOW", "NAME", "DECISION", "COUNT", "ENTRY", "ADDRESSES"}};
  for (std::size_t i = 0; names && i < names->size(); ++i) {
    auto o = names->getObject(static_cast<unsigned>(i));
    std::string to;
    auto list = o->getArray("addresses");
    for (std::size_t k = 0; list && k < list->size(); ++k)
      to += (k ? "," : "") + list->getElement<std::string>(static_cast<unsigned>(k));
    rows.push_back({str(o, "window_start"), str(o, "name"), str(o, "decision"), str(o, "count"),
                    o->isNull("entry") ? "-" : str(o, "entry"), to.empty() ? "-" : to});
  }
  print_table(rows);
  auto conns = parse_object(r.body)->getArray("connections");
  if (!conns || conns->size() == 0) return 0;
  std::vector<std::vector<std::string>> refused{
      {"REFUSED CONNECTION", "PROTOCOL", "COUNT", "FIRST", "LAST"}};
  for (std::size_t i = 0; i < conns->size(); ++i) {
    auto o = conns->getObject(static_cast<unsigned>(i));
    refused.push_back({o->isNull("address") ? "(others)" : str(o, "address") + ":" + str(o, "port"),
                       str(o, "protocol"), str(o, "count"), str(o, "first_seen"),
                       str(o, "last_seen")});
  }
  std::cout << "\n";
  print_table(refused);
  return 0;
}

int cmd_internet(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string v = a.next("on|off|allow|log");
  std::string body;
  if (v == "log") return internet_log(c, id, a);
  if (v == "on" || v == "off") {
    a.done();
    body = std::string("{\"enabled\":") + (v == "on" ? "true" : "false") + "}";
  } else if (v == "allow") {
    body = allowlist_json(a);
  } else {
    throw UsageError("internet: on, off, log, or allow NAME... [--ports 80,443] | allow --list L");
  }
  return simple_sandbox_call(c, "PUT", "/v1/sandboxes/" + url_encode(id) + "/internet", body,
                             {200});
}

int cmd_ttl(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string s = a.next("SECONDS");
  a.done();
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) {
    throw UsageError("ttl: SECONDS must be a number");
  }
  return simple_sandbox_call(c, "POST", "/v1/sandboxes/" + url_encode(id) + "/ttl",
                             "{\"ttl_seconds\":" + s + "}", {200});
}

int cmd_snapshot(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string name = a.next("NAME");
  std::string description;
  while (a.more()) {
    std::string f = a.next("flag");
    if (f != "--description") throw UsageError("snapshot: unknown option " + f);
    description = a.next(f);
  }
  auto r = c.request(
      "POST", "/v1/sandboxes/" + url_encode(id) + "/snapshots",
      "{\"name\":" + json_string(name) + ",\"description\":" + json_string(description) + "}");
  check(r, {201});
  if (c.options().json)
    print_json(r.body);
  else
    std::cout << "snapshot " << terminal_safe(name) << " taken\n";
  return 0;
}

int cmd_snapshots(Client& c, Args& a) {
  std::string id = a.next("ID");
  a.done();
  auto r = c.request("GET", "/v1/sandboxes/" + url_encode(id) + "/snapshots");
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto list = parse_object(r.body)->getArray("snapshots");
  std::vector<std::vector<std::string>> rows{{"NAME", "CREATED", "DESCRIPTION"}};
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    auto s = list->getObject(static_cast<unsigned>(i));
    rows.push_back({str(s, "name"), str(s, "created_at"), str(s, "description")});
  }
  print_table(rows);
  return 0;
}

int cmd_rollback(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string name = a.next("NAME");
  a.done();
  return simple_sandbox_call(
      c, "POST", "/v1/sandboxes/" + url_encode(id) + "/snapshots/" + url_encode(name) + "/rollback",
      "", {200});
}

int cmd_delete_snapshot(Client& c, Args& a) {
  std::string id = a.next("ID");
  std::string name = a.next("NAME");
  a.done();
  return simple_sandbox_call(
      c, "DELETE", "/v1/sandboxes/" + url_encode(id) + "/snapshots/" + url_encode(name), "", {204});
}

int cmd_destroy(Client& c, Args& a) {
  if (!a.more()) throw UsageError("destroy: missing ID");
  int rc = 0;
  while (a.more()) {
    std::string id = a.next("ID");
    auto r = c.request("DELETE", "/v1/sandboxes/" + url_encode(id));
    try {
      check(r, {204});
      if (!c.options().json) std::cout << "destroyed " << terminal_safe(id) << "\n";
    } catch (const std::exception& e) {
      std::cerr << "sandboxctl: " << terminal_safe(id + ": " + e.what()) << "\n";
      rc = kExitError;
    }
  }
  return rc;
}

int cmd_pool(Client& c, Args& a) {
  a.done();
  auto r = c.request("GET", "/v1/pools");
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto list = parse_object(r.body)->getArray("pools");
  std::vector<std::vector<std::string>> rows{{"POOL", "NODE", "KIND", "TEMPLATE", "READY", "SIZE",
                                              "FILLING", "CLAIMS", "MISSES", "REPLACED", "FAILURES",
                                              "CLAIM_MS"}};
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    auto o = list->getObject(static_cast<unsigned>(i));
    std::string ms = o->has("claim_mean_ms") ? str(o, "claim_mean_ms") : "-";
    if (ms.size() > 6) ms = ms.substr(0, 6);
    rows.push_back({str(o, "name"), str(o, "node"), str(o, "kind"), str(o, "template_vmid"),
                    str(o, "ready"), str(o, "size"), str(o, "filling"), str(o, "claims"),
                    str(o, "misses"), str(o, "replaced"), str(o, "refill_failures"), ms});
  }
  print_table(rows);
  return 0;
}

int cmd_health(Client& c, Args& a) {
  a.done();
  auto r = c.request("GET", "/v1/health");
  if (c.options().json) {
    print_json(r.body);
  } else {
    auto o = parse_object(r.body);
    std::cout << "status: " << terminal_safe(str(o, "status")) << "\n";
    for (const char* k : {"proxmox", "agent"}) {
      auto p = o->getObject(k);
      if (p) {
        std::cout << k << ": " << (p->getValue<bool>("ok") ? "ok" : "FAILING");
        if (p->has("error"))
          std::cout << " (" << terminal_safe(p->getValue<std::string>("error")) << ")";
        std::cout << "\n";
      }
    }
    if (o->has("sandboxes"))
      std::cout << "sandboxes: " << terminal_safe(str(o, "sandboxes")) << "\n";
  }
  return r.status == 200 ? 0 : kExitError;
}

}  // namespace pvs::cli
