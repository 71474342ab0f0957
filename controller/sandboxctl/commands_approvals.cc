// sandboxctl's approvals commands (docs/cli.md): list, watch, approve ID, deny ID [--reason R].
// Listing and deciding need an admin token or one with `approver: true` (a plain token lists
// its own).
#include <chrono>
#include <csignal>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include <Poco/JSON/Array.h>

#include "pvesandbox/common/text.h"
#include "sandboxctl.h"

namespace pvs::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;

Poco::JSON::Array::Ptr fetch(Client& c, bool pending_only) {
  auto r = c.request("GET", std::string("/v1/approvals") + (pending_only ? "?state=pending" : ""));
  check(r);
  auto list = parse_object(r.body)->getArray("approvals");
  return list ? list : Poco::JSON::Array::Ptr(new Poco::JSON::Array);
}

// One line a person reads: what is asked, by whom, where, and until when.
std::string line_of(const Poco::JSON::Object::Ptr& o) {
  std::string where =
      o->isNull("sandbox") || str(o, "sandbox").empty() ? "" : " in " + str(o, "sandbox");
  std::string text = str(o, "id") + " " + str(o, "state") + ": " + str(o, "token") + " " +
                     str(o, "action") + where + ": " + str(o, "summary") + " (" + str(o, "rule");
  if (o->has("message") && !str(o, "message").empty()) text += ": " + str(o, "message");
  text += "; deadline " + str(o, "deadline") + ")";
  if (auto refused = o->getArray("refused_names"); refused && refused->size() > 0) {
    text += "; it was refused:";
    for (std::size_t i = 0; i < refused->size(); ++i)
      text += " " + refused->getElement<std::string>(static_cast<unsigned>(i));
  }
  return terminal_safe(text);
}

std::string json_of(const Poco::JSON::Object::Ptr& o) {
  std::ostringstream s;
  o->stringify(s);
  return terminal_safe(s.str(), TerminalText::kJson);
}

int list(Client& c, bool all) {
  auto list = fetch(c, !all);
  if (c.options().json) {
    std::ostringstream s;
    list->stringify(s);
    print_json("{\"approvals\":" + s.str() + "}\n");
    return 0;
  }
  std::vector<std::vector<std::string>> rows{
      {"ID", "STATE", "TOKEN", "ACTION", "SANDBOX", "SUMMARY", "DEADLINE", "DECIDED_BY"}};
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto o = list->getObject(static_cast<unsigned>(i));
    std::string summary = str(o, "summary");
    if (summary.size() > 60) summary = summary.substr(0, 57) + "...";
    rows.push_back({str(o, "id"), str(o, "state"), str(o, "token"), str(o, "action"),
                    o->isNull("sandbox") ? "-" : str(o, "sandbox"), summary, str(o, "deadline"),
                    o->has("decided_by") ? str(o, "decided_by") : "-"});
  }
  print_table(rows);
  return 0;
}

// Prints each approval once when it turns up pending, and once when it is decided; until
// Ctrl-C, or after `count` new pending ones.
int watch(Client& c, std::chrono::milliseconds interval, long count) {
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  std::set<std::string> pending;
  long seen = 0;
  while (!g_stop && (count <= 0 || seen < count)) {
    auto list = fetch(c, true);
    std::set<std::string> now;
    for (std::size_t i = 0; i < list->size(); ++i) {
      auto o = list->getObject(static_cast<unsigned>(i));
      now.insert(str(o, "id"));
      if (pending.contains(str(o, "id"))) continue;
      std::cout << (c.options().json ? json_of(o) : line_of(o)) << std::endl;
      ++seen;
    }
    for (const auto& id : pending) {
      if (now.contains(id)) continue;
      auto r = c.request("GET", "/v1/approvals/" + url_encode(id));
      if (r.status != 200) continue;
      auto o = parse_object(r.body);
      std::cout << (c.options().json ? json_of(o) : line_of(o)) << std::endl;
    }
    pending = std::move(now);
    for (auto waited = std::chrono::milliseconds(0);
         !g_stop && waited < interval && (count <= 0 || seen < count);
         waited += std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

int decide(Client& c, Args& a, bool approve) {
  std::string id = a.next("APPROVAL_ID");
  std::string reason;
  while (a.more()) {
    std::string f = a.next("flag");
    if (f != "--reason") throw UsageError("approvals: unknown option " + f);
    reason = a.next(f);
  }
  auto r = c.request("POST", "/v1/approvals/" + url_encode(id) + (approve ? "/approve" : "/deny"),
                     reason.empty() ? "{}" : "{\"reason\":" + json_string(reason) + "}");
  check(r);
  if (c.options().json) {
    print_json(r.body);
  } else {
    std::cout << line_of(parse_object(r.body)) << "\n";
  }
  return 0;
}

}  // namespace

int cmd_approvals(Client& c, Args& a) {
  std::string verb = a.more() ? a.next("list|watch|approve|deny") : "list";
  if (verb == "approve" || verb == "deny") return decide(c, a, verb == "approve");
  if (verb == "list" || verb == "--all") {
    bool all = verb == "--all";
    while (a.more()) {
      std::string f = a.next("flag");
      if (f != "--all") throw UsageError("approvals list: unknown option " + f);
      all = true;
    }
    return list(c, all);
  }
  if (verb != "watch") throw UsageError("approvals: list, watch, approve or deny, not " + verb);
  long interval_ms = 1000, count = 0;
  while (a.more()) {
    std::string f = a.next("flag");
    std::string v = a.next(f);
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || v.size() > 6)
      throw UsageError(f + " needs a number");
    if (f == "--interval-ms")
      interval_ms = std::max(50L, std::stol(v));
    else if (f == "--count")
      count = std::stol(v);
    else
      throw UsageError("approvals watch: unknown option " + f);
  }
  return watch(c, std::chrono::milliseconds(interval_ms), count);
}

}  // namespace pvs::cli
