// sandboxctl's admin commands (admin token): nodes, node drain|undrain NAME, audit.
#include <iostream>

#include <Poco/JSON/Array.h>

#include "pvesandbox/common/text.h"
#include "sandboxctl.h"

namespace pvs::cli {
namespace {

// "12.0/31.3 GiB" from bytes; "-" when Proxmox did not say.
std::string memory_text(const Poco::JSON::Object::Ptr& o) {
  double total = o->optValue<double>("memory_total_bytes", 0);
  double used = o->optValue<double>("memory_used_bytes", 0);
  if (total <= 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f/%.1f GiB", used / (1 << 30), total / (1 << 30));
  return buf;
}

std::string health_text(const Poco::JSON::Object::Ptr& o) {
  if (!o->optValue<bool>("online", false)) return "offline";
  if (!o->optValue<bool>("agent_ok", false)) return "agent-down";
  if (!o->optValue<bool>("recovered", true)) return "recovering";
  return o->optValue<bool>("drained", false) ? "drained" : "ok";
}

std::string pools_text(const Poco::JSON::Object::Ptr& o) {
  auto pools = o->getArray("pools");
  std::string text;
  for (std::size_t i = 0; pools && i < pools->size(); ++i) {
    auto p = pools->getObject(static_cast<unsigned>(i));
    text +=
        (text.empty() ? "" : ",") + str(p, "name") + ":" + str(p, "ready") + "/" + str(p, "size");
  }
  return text.empty() ? "-" : text;
}

}  // namespace

int cmd_nodes(Client& c, Args& a) {
  a.done();
  auto r = c.request("GET", "/v1/nodes");
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto list = parse_object(r.body)->getArray("nodes");
  std::vector<std::vector<std::string>> rows{{"NODE", "STATE", "SANDBOXES", "CREATING", "MAX",
                                              "MEMORY", "FREE_IPS", "POOLS", "LABELS", "ERROR"}};
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    auto o = list->getObject(static_cast<unsigned>(i));
    std::string max = str(o, "max_sandboxes");
    rows.push_back({str(o, "name"), health_text(o), str(o, "sandboxes"), str(o, "creating"),
                    max == "0" ? "-" : max, memory_text(o), str(o, "free_addresses"), pools_text(o),
                    labels_text(o), o->isNull("error") ? "" : str(o, "error")});
  }
  print_table(rows);
  return 0;
}

int cmd_node(Client& c, Args& a) {
  std::string verb = a.next("drain|undrain");
  if (verb != "drain" && verb != "undrain") throw UsageError("node: drain or undrain, not " + verb);
  std::string name = a.next("NODE");
  a.done();
  auto r = c.request("POST", "/v1/nodes/" + url_encode(name) + "/" + verb);
  check(r);
  if (c.options().json) {
    print_json(r.body);
  } else {
    std::cout << terminal_safe(name + ": " + health_text(parse_object(r.body))) << "\n";
  }
  return 0;
}

// audit [--limit N] [--action A] [--sandbox ID]: the audit log's tail, oldest first.
int cmd_audit(Client& c, Args& a) {
  std::string query = a.query("audit", {"--limit", "--action", "--sandbox"});
  auto r = c.request("GET", "/v1/audit" + query);
  check(r);
  if (c.options().json) {
    print_json(r.body);
    return 0;
  }
  auto reply = parse_object(r.body);
  auto list = reply->getArray("records");
  std::vector<std::vector<std::string>> rows{
      {"TIME", "TOKEN", "ACTION", "SANDBOX", "STATUS", "RESULT", "MS", "REMOTE"}};
  for (std::size_t i = 0; list && i < list->size(); ++i) {
    auto o = list->getObject(static_cast<unsigned>(i));
    std::string sandbox = str(o, "sandbox");
    rows.push_back({str(o, "time"), str(o, "token").empty() ? "-" : str(o, "token"),
                    str(o, "action"), sandbox.empty() ? "-" : sandbox, str(o, "status"),
                    str(o, "result"), str(o, "duration_ms"), str(o, "remote")});
  }
  print_table(rows);
  if (reply->optValue<bool>("truncated", false))
    std::cerr << "sandboxctl: older records were not scanned (the log's scan bound)\n";
  return 0;
}

}  // namespace pvs::cli
