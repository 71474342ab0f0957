// controller.yaml's `policy:` section into a compiled Policy (policy.h), every rule checked
// where it is written: a bad pattern names the file, the line, the rule and what is wrong.
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "core/config/config_parts.h"
#include "policy/policy.h"

namespace pvs::service {
namespace {

Verdict verdict_of(const std::string& name) {
  return name == "deny" ? Verdict::kDeny : name == "approve" ? Verdict::kApprove : Verdict::kAllow;
}

// content, content_max_bytes, oversize: conditions on what a call writes (docs/policy.md).
void parse_content(yaml::Map& r, PolicyRuleSpec& rule) {
  r.string("content", &rule.content);
  if (auto e = policy_pattern_error(rule.content); r.ok() && !rule.content.empty() && e)
    r.fail("content", *e);
  for (PolicyAction a : rule.actions) {
    if (r.ok() && !rule.content.empty() && a != PolicyAction::kFilesWrite &&
        a != PolicyAction::kFilesEdit && a != PolicyAction::kExec)
      r.fail("content", "judges files.write, files.edit and exec (its stdin), not " +
                            std::string(to_string(a)));
  }
  r.integer("content_max_bytes", &rule.content_max_bytes, 1,
            static_cast<long long>(kMaxContentMaxBytes));
  std::string oversize = "approve";
  if (r.has("oversize")) r.one_of("oversize", &oversize, {"allow", "deny", "approve", "skip"});
  rule.oversize = oversize == "skip" ? std::nullopt : std::optional(verdict_of(oversize));
  for (const char* key : {"content_max_bytes", "oversize"}) {
    if (r.ok() && r.has(key) && rule.content.empty()) r.fail(key, "applies to a rule with content");
  }
}

// One item of `ports`: "5432" or "8000-8999", each port in 1-65535; why not, or nullopt.
std::optional<std::string> parse_port_range(const std::string& item, std::pair<int, int>* out) {
  auto number = [](std::string_view digits, int* port) {
    if (digits.empty() || digits.size() > 5 ||
        digits.find_first_not_of("0123456789") != std::string_view::npos)
      return false;
    *port = std::stoi(std::string(digits));
    return true;
  };
  const std::size_t dash = item.find('-');
  std::string_view text(item);
  if (!number(text.substr(0, dash), &out->first) ||
      !number(dash == std::string::npos ? text : text.substr(dash + 1), &out->second))
    return yaml::quoted_value(item) + " is not a port (5432) or a range of ports (\"8000-8999\")";
  if (std::min(out->first, out->second) < 1 || std::max(out->first, out->second) > 65535)
    return yaml::quoted_value(item) + ": ports are 1-65535";
  if (out->first > out->second)
    return yaml::quoted_value(item) + ": the range's first port is above its last";
  return std::nullopt;
}

// ports: [5432, "8000-8999"]: the sandbox ports a `ports` rule holds for.
void parse_ports(yaml::Map& r, PolicyRuleSpec& rule) {
  if (!r.has("ports")) return;
  std::vector<std::string> items;
  r.string_list("ports", &items, "a list of ports and ranges, e.g. [5432, \"8000-8999\"]");
  if (r.ok() && items.empty()) r.fail("ports", "names no port (leave it out for any port)");
  for (const auto& item : items) {
    std::pair<int, int> range;
    if (auto e = parse_port_range(item, &range); r.ok() && e) r.fail("ports", *e);
    rule.ports.push_back(range);
  }
  if (auto e = policy_ports_error(rule); r.ok() && e) r.fail("ports", *e);
}

PolicyRuleSpec parse_rule(yaml::Map& r, const std::string& where, const ServiceConfig& c) {
  PolicyRuleSpec rule;
  rule.where = where;
  std::vector<std::string> actions;
  if (r.has("action") == r.has("actions"))
    r.fail("action", "set action (one) or actions (a list), exactly one of them");
  if (r.has("action")) {
    std::string one;
    r.string("action", &one);
    actions = {one};
  }
  r.string_list("actions", &actions);
  for (const auto& a : actions) {
    auto parsed = parse_policy_action(a);
    if (!parsed)
      r.fail(r.has("action") ? "action" : "actions",
             yaml::quoted_value(a) +
                 " is not an action (exec, terminal.input, terminal.open, terminal.attach, "
                 "files.write, files.edit, internet, sandbox.create, ports)");
    else
      rule.actions.insert(*parsed);
  }
  r.string("command", &rule.command);
  if (auto e = policy_pattern_error(rule.command); r.ok() && !rule.command.empty() && e)
    r.fail("command", *e);
  r.string("path", &rule.path);
  r.string("env_names", &rule.env_names);
  if (auto e = policy_pattern_error(rule.env_names); r.ok() && !rule.env_names.empty() && e)
    r.fail("env_names", *e);
  if (r.ok() && !rule.path.empty() && rule.path[0] != '/' && rule.path[0] != '*')
    r.fail("path", "must be an absolute path glob, e.g. /etc/*, or start with *, e.g. *.py");
  if (auto e = policy_glob_error(rule.path); r.ok() && e) r.fail("path", *e);
  parse_content(r, rule);
  parse_ports(r, rule);
  r.integer("cpus_above", &rule.cpus_above, 0, 1024);
  r.integer("memory_mb_above", &rule.memory_mb_above, 0, 1 << 30);
  r.integer("disk_gb_above", &rule.disk_gb_above, 0, 1 << 20);
  if (r.has("internet")) {
    bool on = false;
    r.boolean("internet", &on);
    rule.internet = on;
  }
  if (r.has("egress")) r.one_of("egress", &rule.egress, {"off", "on", "allowlist"});
  r.string("egress_names", &rule.egress_names);
  if (auto e = policy_pattern_error(rule.egress_names); r.ok() && !rule.egress_names.empty() && e)
    r.fail("egress_names", *e);
  r.string("egress_list", &rule.egress_list);
  if (r.ok() && !rule.egress_list.empty() && !c.egress.lists.count(rule.egress_list))
    r.fail("egress_list",
           "no list named " + yaml::quoted_value(rule.egress_list) + " in egress.lists");
  std::string verdict;
  r.one_of("decision", &verdict, {"allow", "deny", "approve"});
  rule.verdict = verdict == "deny"      ? Verdict::kDeny
                 : verdict == "approve" ? Verdict::kApprove
                                        : Verdict::kAllow;
  r.string("message", &rule.message);
  if (r.ok() && rule.message.size() > 512) r.fail("message", "at most 512 characters");
  return rule;
}

std::vector<PolicyRuleSpec> parse_rules(yaml::Map& s, std::string_view name,
                                        const std::string& where, const ServiceConfig& c) {
  std::vector<PolicyRuleSpec> rules;
  for (yaml::Map r : s.maps(name)) {
    rules.push_back(parse_rule(r, where + "[" + std::to_string(rules.size()) + "]", c));
    (void)r.finish();
  }
  return rules;
}

}  // namespace

void parse_policy(yaml::Map s, ServiceConfig& c) {
  PolicySpec spec;
  std::string fallback = "allow";
  s.one_of("fallback", &fallback, {"allow", "deny", "approve"});
  spec.fallback = fallback == "deny"      ? Verdict::kDeny
                  : fallback == "approve" ? Verdict::kApprove
                                          : Verdict::kAllow;
  s.integer("approval_timeout_seconds", &c.approval_timeout_seconds, 1, 7 * 24 * 3600);
  s.integer("approval_wait_seconds", &c.approval_wait_seconds, 0, 3600);
  s.integer("approval_use_seconds", &c.approval_use_seconds, 1, 7 * 24 * 3600);
  s.integer("max_pending_approvals", &c.max_pending_approvals, 1, 100000);
  spec.default_rules = parse_rules(s, "default", "policy.default", c);
  std::set<std::string> known;
  for (const auto& t : c.tokens) known.insert(t.name);
  for (yaml::Map t : s.maps("tokens")) {
    std::string name;
    t.string("token", &name, yaml::Need::kRequired);
    if (t.ok() && !known.count(name))
      t.fail("token", "no token named " + yaml::quoted_value(name) + " in auth.tokens");
    if (t.ok() && spec.token_rules.count(name)) t.fail("token", "has rules twice");
    spec.token_rules[name] = parse_rules(t, "rules", "policy.tokens." + name, c);
    (void)t.finish();
  }
  (void)s.finish();
  if (!s.ok()) return;
  auto policy = Policy::compile(std::move(spec));
  if (!policy) return s.fail("default", policy.error().message);
  c.policy = std::move(*policy);
}

}  // namespace pvs::service
