#include "policy/policy.h"

#include <fnmatch.h>
#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <utility>

namespace pvs::service {
namespace {

constexpr std::array<std::pair<PolicyAction, std::string_view>, 9> kActions{{
    {PolicyAction::kExec, "exec"},
    {PolicyAction::kTerminalInput, "terminal.input"},
    {PolicyAction::kTerminalOpen, "terminal.open"},
    {PolicyAction::kTerminalAttach, "terminal.attach"},
    {PolicyAction::kFilesWrite, "files.write"},
    {PolicyAction::kFilesEdit, "files.edit"},
    {PolicyAction::kInternet, "internet"},
    {PolicyAction::kSandboxCreate, "sandbox.create"},
    {PolicyAction::kPorts, "ports"},
}};

RE2::Options pattern_options() {
  RE2::Options o;
  o.set_log_errors(false);
  o.set_max_mem(1 << 20);  // a pattern's program stays small
  return o;
}

struct Rule {
  PolicyRuleSpec spec;
  std::unique_ptr<RE2> command;  // null: any text
  std::unique_ptr<RE2> names;    // null: any egress names
  std::unique_ptr<RE2> env;      // null: any env names
  std::unique_ptr<RE2> content;  // null: any content

  // The rule's decision on `r`, or nullopt when some condition does not hold.
  std::optional<PolicyDecision> judge(const PolicyRequest& r) const {
    if (!matches(r)) return std::nullopt;
    if (!content) return PolicyDecision{spec.verdict, spec.where, spec.message};
    if (!r.content) return std::nullopt;
    if (r.content_cut || r.content->size() > spec.content_max_bytes) {
      if (!spec.oversize) return std::nullopt;
      return PolicyDecision{*spec.oversize, spec.where,
                            "content larger than " + std::to_string(spec.content_max_bytes) +
                                " bytes, not searched" +
                                (spec.message.empty() ? "" : ": " + spec.message)};
    }
    re2::StringPiece text(r.content->data(), r.content->size());
    if (!RE2::PartialMatch(text, *content)) return std::nullopt;
    return PolicyDecision{spec.verdict, spec.where, spec.message};
  }

  // Whether the path glob holds for `path` (no glob: any path).
  bool path_holds(const std::string& path) const {
    return spec.path.empty() || ::fnmatch(spec.path.c_str(), path.c_str(), 0) == 0;
  }

  bool matches(const PolicyRequest& r) const {
    if (!spec.actions.count(r.action)) return false;
    if (command && !RE2::PartialMatch(r.text, *command)) return false;
    if (!path_holds(r.path)) return false;
    if (env && std::none_of(r.env_names.begin(), r.env_names.end(),
                            [&](const std::string& n) { return RE2::PartialMatch(n, *env); }))
      return false;
    if (!spec.ports.empty() &&
        std::none_of(spec.ports.begin(), spec.ports.end(),
                     [&](const auto& p) { return r.port >= p.first && r.port <= p.second; }))
      return false;
    if (spec.cpus_above >= 0 && r.cpus <= spec.cpus_above) return false;
    if (spec.memory_mb_above >= 0 && r.memory_mb <= spec.memory_mb_above) return false;
    if (spec.disk_gb_above >= 0 && r.disk_gb <= spec.disk_gb_above) return false;
    if (spec.internet && *spec.internet != r.internet) return false;
    if (!spec.egress.empty() && spec.egress != r.egress) return false;
    if (!spec.egress_list.empty() && spec.egress_list != r.egress_list) return false;
    if (names && std::none_of(r.egress_names.begin(), r.egress_names.end(),
                              [&](const std::string& n) { return RE2::PartialMatch(n, *names); }))
      return false;
    return true;
  }
};

const std::set<PolicyAction> kContentActions{PolicyAction::kFilesWrite, PolicyAction::kFilesEdit,
                                             PolicyAction::kExec};

// Content is text of many lines: `^` and `$` match at each line.
std::string content_pattern(const std::string& pattern) {
  return "(?m)" + pattern;
}

Result<std::vector<Rule>> compile_rules(std::vector<PolicyRuleSpec> specs) {
  std::vector<Rule> rules;
  for (auto& spec : specs) {
    if (spec.actions.empty())
      return fail(ErrorCode::kInvalidArgument, spec.where + ".action: names no action");
    Rule rule;
    if (!spec.command.empty()) {
      if (auto e = policy_pattern_error(spec.command))
        return fail(ErrorCode::kInvalidArgument, spec.where + ".command: " + *e);
      rule.command = std::make_unique<RE2>(spec.command, pattern_options());
    }
    if (!spec.env_names.empty()) {
      if (auto e = policy_pattern_error(spec.env_names))
        return fail(ErrorCode::kInvalidArgument, spec.where + ".env_names: " + *e);
      rule.env = std::make_unique<RE2>(spec.env_names, pattern_options());
    }
    if (!spec.egress_names.empty()) {
      if (auto e = policy_pattern_error(spec.egress_names))
        return fail(ErrorCode::kInvalidArgument, spec.where + ".egress_names: " + *e);
      rule.names = std::make_unique<RE2>(spec.egress_names, pattern_options());
    }
    if (!spec.content.empty()) {
      if (auto e = policy_pattern_error(spec.content))
        return fail(ErrorCode::kInvalidArgument, spec.where + ".content: " + *e);
      rule.content = std::make_unique<RE2>(content_pattern(spec.content), pattern_options());
      for (PolicyAction a : spec.actions) {
        if (!kContentActions.contains(a))
          return fail(ErrorCode::kInvalidArgument,
                      spec.where +
                          ".content: judges files.write, files.edit and exec (stdin), "
                          "not " +
                          std::string(to_string(a)));
      }
    }
    if (auto e = policy_glob_error(spec.path))
      return fail(ErrorCode::kInvalidArgument, spec.where + ".path: " + *e);
    if (auto e = policy_ports_error(spec))
      return fail(ErrorCode::kInvalidArgument, spec.where + ".ports: " + *e);
    rule.spec = std::move(spec);
    rules.push_back(std::move(rule));
  }
  return rules;
}

}  // namespace

struct Policy::Impl {
  std::vector<Rule> default_rules;
  std::map<std::string, std::vector<Rule>, std::less<>> token_rules;
  Verdict fallback = Verdict::kAllow;
};

std::string_view to_string(PolicyAction action) {
  for (const auto& [a, name] : kActions) {
    if (a == action) return name;
  }
  return "?";
}

std::optional<PolicyAction> parse_policy_action(std::string_view name) {
  for (const auto& [a, n] : kActions) {
    if (n == name) return a;
  }
  return std::nullopt;
}

std::string_view to_string(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAllow: return "allow";
    case Verdict::kDeny: return "deny";
    case Verdict::kApprove: return "approve";
  }
  return "?";
}

int strictness(Verdict verdict) {
  return verdict == Verdict::kDeny ? 2 : verdict == Verdict::kApprove ? 1 : 0;
}

std::optional<std::string> policy_pattern_error(const std::string& pattern) {
  RE2 re(pattern, pattern_options());
  if (re.ok()) return std::nullopt;
  return "not a valid regular expression (RE2 syntax): " + re.error();
}

std::optional<std::string> policy_glob_error(const std::string& glob) {
  for (std::size_t i = 0; i < glob.size(); ++i) {
    if (glob[i] == '\\') {
      if (++i == glob.size()) return "not a valid glob: ends in a lone backslash";
    } else if (glob[i] == '[') {
      // fnmatch takes a `]` right after `[` or `[!` as a member, not the end.
      std::size_t j = i + 1;
      if (j < glob.size() && (glob[j] == '!' || glob[j] == '^')) ++j;
      if (j < glob.size() && glob[j] == ']') ++j;
      j = glob.find(']', j);
      if (j == std::string::npos)
        return "not a valid glob: the [ at offset " + std::to_string(i) + " is never closed";
      i = j;
    }
  }
  return std::nullopt;
}

std::optional<std::string> policy_ports_error(const PolicyRuleSpec& rule) {
  for (const auto& [low, high] : rule.ports) {
    if (low < 1 || high > 65535 || low > high)
      return "not a port or range of ports (1-65535, low-high): " + std::to_string(low) + "-" +
             std::to_string(high);
  }
  for (PolicyAction a : rule.ports.empty() ? std::set<PolicyAction>{} : rule.actions) {
    if (a != PolicyAction::kPorts)
      return "judges the ports action (the sandbox port a request is proxied to), not " +
             std::string(to_string(a));
  }
  return std::nullopt;
}

Policy::Policy() : impl_(std::make_shared<Impl>()) {}

Result<Policy> Policy::compile(PolicySpec spec) {
  auto impl = std::make_shared<Impl>();
  auto defaults = compile_rules(std::move(spec.default_rules));
  if (!defaults) return fail(defaults.error());
  impl->default_rules = std::move(*defaults);
  for (auto& [token, specs] : spec.token_rules) {
    auto rules = compile_rules(std::move(specs));
    if (!rules) return fail(rules.error());
    impl->token_rules.emplace(token, std::move(*rules));
  }
  impl->fallback = spec.fallback;
  Policy p;
  p.impl_ = std::move(impl);
  return p;
}

PolicyDecision Policy::decide(std::string_view token, const PolicyRequest& request) const {
  auto own = impl_->token_rules.find(token);
  const auto& rules = own != impl_->token_rules.end() ? own->second : impl_->default_rules;
  for (const Rule& rule : rules) {
    if (auto d = rule.judge(request)) return std::move(*d);
  }
  return {impl_->fallback, "policy.fallback", ""};
}

bool Policy::empty() const {
  return rule_count() == 0 && impl_->fallback == Verdict::kAllow;
}

bool Policy::judges(std::string_view token, PolicyAction action) const {
  if (impl_->fallback != Verdict::kAllow) return true;
  auto own = impl_->token_rules.find(token);
  const auto& rules = own != impl_->token_rules.end() ? own->second : impl_->default_rules;
  return std::any_of(rules.begin(), rules.end(),
                     [&](const Rule& r) { return r.spec.actions.contains(action); });
}

std::uint64_t Policy::content_bound(std::string_view token, PolicyAction action,
                                    const std::string& path) const {
  auto own = impl_->token_rules.find(token);
  const auto& rules = own != impl_->token_rules.end() ? own->second : impl_->default_rules;
  std::uint64_t bound = 0;
  for (const Rule& r : rules) {
    if (r.content && r.spec.actions.contains(action) && r.path_holds(path))
      bound = std::max(bound, r.spec.content_max_bytes);
  }
  return bound;
}

std::size_t Policy::rule_count() const {
  std::size_t n = impl_->default_rules.size();
  for (const auto& [token, rules] : impl_->token_rules) n += rules.size();
  return n;
}

LinesDecision decide_lines(const Policy& policy, std::string_view token,
                           const std::vector<std::string>& lines) {
  LinesDecision out;
  PolicyRequest one;
  one.action = out.asked.action = PolicyAction::kTerminalInput;
  PolicyDecision& decision = out.decision;  // allow, unless a line says otherwise
  std::string allowed, needs_person;
  for (const auto& line : lines) {
    one.text = line;
    PolicyDecision d = policy.decide(token, one);
    if (d.verdict == Verdict::kDeny) {
      decision = d;
      out.asked.text = line;
      return out;
    }
    std::string& into = d.verdict == Verdict::kApprove ? needs_person : allowed;
    into += (into.empty() ? "" : "\n") + line;
    if (d.verdict == Verdict::kApprove && decision.verdict == Verdict::kAllow) decision = d;
    if (decision.verdict == Verdict::kAllow) decision.rule = d.rule;
  }
  out.asked.text = decision.verdict == Verdict::kApprove ? needs_person : allowed;
  return out;
}

}  // namespace pvs::service
