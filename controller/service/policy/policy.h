// Policy: what a token may do, decided per call by ordered rules (docs/policy.md).
//
//   auto policy = pvs::service::Policy::compile(spec);        // from controller.yaml `policy:`
//   auto d = policy->decide("alice", {.action = PolicyAction::kExec, .text = "rm -rf /"});
//   if (d.verdict == Verdict::kDeny) refuse(d.message);        // d.rule: "policy.default[0]"
//
// A token with rules of its own (`policy.tokens.<name>`) is judged by those, every other token
// by `policy.default`; the first rule whose every condition holds decides; none: `fallback`.
// Regular expressions are RE2 (linear time in the input, so a crafted command line cannot make
// a rule slow), searched anywhere in the text unless anchored. Paths match shell globs
// (fnmatch without FNM_PATHNAME: `*` also crosses `/`, so `/etc/*` is everything below /etc).
// One Policy serves REST, MCP and terminals: the same decision for the same call.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs::service {

enum class PolicyAction {
  kExec,
  kTerminalInput,
  kTerminalOpen,    // opening a terminal (text: its command, "" for the login shell)
  kTerminalAttach,  // a terminal's WebSocket (text: "interactive" or "watch")
  kFilesWrite,
  kFilesEdit,
  kInternet,
  kSandboxCreate,
  kPorts  // a request proxied to a sandbox's port (text: "GET /path", path: its decoded path)
};
std::string_view to_string(PolicyAction action);  // "exec", "terminal.input", "files.write", ...
std::optional<PolicyAction> parse_policy_action(std::string_view name);

enum class Verdict { kAllow, kDeny, kApprove };
std::string_view to_string(Verdict verdict);  // "allow", "deny", "approve"
// How strict a verdict is: allow 0, approve 1, deny 2. Where one call is several actions at
// once (a terminal's open, an E2B pty or move), the strictest decision counts.
int strictness(Verdict verdict);

// What a call asks, as the rules see it.
struct PolicyRequest {
  PolicyAction action = PolicyAction::kExec;
  std::string text;  // exec: the command line; terminal.input: the input line; ports: "GET /p"
  std::string path;  // files.write, files.edit; ports: the request's path (decoded, no query)
  int port = 0;      // ports: the sandbox's port the request is proxied to
  // exec, terminal.open: the names of the environment asked for (values are never judged).
  std::vector<std::string> env_names;
  int cpus = 0, memory_mb = 0, disk_gb = 0;  // sandbox.create
  // sandbox.create and internet: the egress asked for (off, on or an allowlist of names);
  // `internet` is true for on and for an allowlist.
  bool internet = false;
  std::string egress = "off";               // "off", "on" or "allowlist"
  std::vector<std::string> egress_names;    // an allowlist's names
  std::string egress_list;                  // the named list it came from, if any
  std::vector<std::uint16_t> egress_ports;  // an allowlist's ports
  // internet: names the sandbox was refused that the new egress allows (its egress log), most
  // refused first. Not judged and not in the digest: shown to the person an approval asks.
  std::vector<std::string> refused_names;
  // files.write and files.edit: what the file will hold; exec: its stdin. nullopt: not looked
  // at, and a rule with `content` does not hold. The caller keeps the bytes alive.
  std::optional<std::string_view> content;
  bool content_cut = false;  // `content` is only the first bytes: the rest was not read
  // Every field the handler acts on, as canonical JSON (policy/canonical.h): what an approval
  // binds (its digest) and shows a person. Empty: the fields above are the whole call.
  std::string canonical;
};

struct PolicyDecision {
  Verdict verdict = Verdict::kAllow;
  std::string rule;     // "policy.default[2]"; "policy.fallback" when no rule matched
  std::string message;  // the rule's message, for the caller (deny, approve)
};

inline constexpr std::uint64_t kDefaultContentMaxBytes = 1 << 20;
inline constexpr std::uint64_t kMaxContentMaxBytes = 16 << 20;

// One rule as configured; every condition set must hold.
struct PolicyRuleSpec {
  std::string where;  // "policy.default[2]": in messages, decisions and the audit log
  std::set<PolicyAction> actions;
  std::string command;    // RE2 pattern on PolicyRequest::text; empty: any
  std::string path;       // glob on PolicyRequest::path; empty: any
  std::string env_names;  // RE2 on each env name asked for: some name must match; empty: any
  int cpus_above = -1, memory_mb_above = -1, disk_gb_above = -1;  // -1: any
  std::optional<bool> internet;  // true: on or an allowlist; false: off
  std::string egress;            // "off", "on" or "allowlist"; empty: any
  std::string egress_names;      // RE2 on each asked name: some name must match; empty: any
  std::string egress_list;       // the named list asked for; empty: any
  // ports: the sandbox ports (inclusive ranges, a single port being [p, p]); empty: any.
  std::vector<std::pair<int, int>> ports;
  // RE2 searched in PolicyRequest::content, multi-line (`^`/`$` at each line); empty: any.
  std::string content;
  // Content longer than this is not searched: the rule decides `oversize` instead (nullopt:
  // the rule does not hold, and later rules decide).
  std::uint64_t content_max_bytes = kDefaultContentMaxBytes;
  std::optional<Verdict> oversize = Verdict::kApprove;
  Verdict verdict = Verdict::kAllow;
  std::string message;
};

struct PolicySpec {
  std::vector<PolicyRuleSpec> default_rules;
  std::map<std::string, std::vector<PolicyRuleSpec>> token_rules;  // by token name
  Verdict fallback = Verdict::kAllow;
};

// Why `pattern` is not a valid RE2 pattern, or nullopt.
std::optional<std::string> policy_pattern_error(const std::string& pattern);
// Why `glob` is not a valid path glob (an unclosed `[`, a trailing `\`), or nullopt.
std::optional<std::string> policy_glob_error(const std::string& glob);
// Why a rule's `ports` is wrong (a range outside 1-65535 or upside down, or a rule for an action
// other than `ports`), or nullopt.
std::optional<std::string> policy_ports_error(const PolicyRuleSpec& rule);

class Policy {
 public:
  Policy();  // no rules: everything allowed
  // kInvalidArgument naming the rule (`where`) for a bad pattern or a rule without actions.
  static Result<Policy> compile(PolicySpec spec);

  PolicyDecision decide(std::string_view token, const PolicyRequest& request) const;
  bool empty() const;  // no rule anywhere and fallback allow
  // Whether `action` can be anything but allowed for `token`: one of its rules names the action,
  // or the fallback is not allow.
  bool judges(std::string_view token, PolicyAction action) const;
  std::size_t rule_count() const;
  // How many bytes of content a rule for `token` could search in `action` on `path` (the
  // largest content_max_bytes of the rules with `content` whose path glob matches); 0: none.
  // A caller that streams content reads that many bytes, plus one, before asking.
  std::uint64_t content_bound(std::string_view token, PolicyAction action,
                              const std::string& path) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;  // immutable: copies share it
};

// Typed or piped lines judged as terminal.input, one at a time: the first denied line decides
// (and is what `asked.text` shows); else any line that needs a person makes it an approval
// showing those lines; else allowed, showing them all. `decision.rule` names the deciding rule.
struct LinesDecision {
  PolicyRequest asked;
  PolicyDecision decision;
};
LinesDecision decide_lines(const Policy& policy, std::string_view token,
                           const std::vector<std::string>& lines);

}  // namespace pvs::service
