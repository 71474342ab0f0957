// Approvals: calls a policy rule sent to a person, waiting for a decision (docs/policy.md).
//
//   Approvals approvals({.timeout = 300s, .max_pending = 1000});
//   auto a = approvals.open({.token = "alice", .action = "exec", .summary = "apt-get install x"});
//   auto done = approvals.wait(a->id, 30s);       // approve()/deny() by a person, or the deadline
//   if (done.state == Approval::State::kApproved) run_the_call();
//
// An approval is pending until a person decides or its deadline passes (then it is expired,
// which counts as denied). A call that stopped waiting before the decision can be repeated
// with the approval's id once it is approved: consume() checks it is the same call (token and
// digest of the request) and lets it through once. Everything lives in memory: ids carry the
// controller's instance, so after a restart an older id is reported denied, with the reason.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs::service {

struct ApprovalRequest {
  std::string token;    // who asked
  std::string action;   // "exec", "internet", ... (PolicyAction's name)
  std::string sandbox;  // empty for sandbox.create
  std::string summary;  // what a person reads: the command line, the path, "internet on", ...
  std::string rule;     // the policy rule that asked for approval
  std::string message;  // that rule's message
  std::string digest;   // of the whole request: a repeated call must match it
  std::string fields;   // the whole request as canonical JSON (policy/canonical.h), or empty
  // internet: the names the sandbox was refused that the call would allow (PolicyRequest's).
  std::vector<std::string> refused_names;
};

struct Approval {
  enum class State { kPending, kApproved, kDenied, kExpired };
  std::string id;  // "ap-<instance>-<n>"
  ApprovalRequest request;
  State state = State::kPending;
  std::int64_t created_ms = 0, deadline_ms = 0, decided_ms = 0;  // unix ms
  std::int64_t use_by_ms = 0;  // approved: unused after this, consume() refuses (expired unused)
  std::string decided_by;      // a token name; "deadline" or "restart" otherwise
  std::string reason;          // given by the person (deny), or why it was denied
  bool consumed = false;       // a repeated call used it
};
std::string to_string(Approval::State state);  // "pending", "approved", "denied", "expired"

class Approvals {
 public:
  struct Options {
    std::chrono::seconds timeout{300};     // pending -> expired
    std::chrono::seconds use_within{300};  // approved -> must be used by then
    std::size_t max_pending = 1000;
    std::size_t keep_decided = 10000;  // decided approvals kept for polling, newest first
  };
  explicit Approvals(Options options);

  // kUnavailable when max_pending are pending.
  Result<Approval> open(ApprovalRequest request);
  // Until the approval is decided or `max_wait` passed; the approval as it is then
  // (kPending if still undecided). An unknown id: kNotFound.
  Result<Approval> wait(const std::string& id, std::chrono::milliseconds max_wait);
  // A person decides. kNotFound; kConflict if it is no longer pending; kPermissionDenied if
  // `who` is the token that asked (nobody decides their own approval).
  Result<Approval> decide(const std::string& id, bool approve, const std::string& who,
                          const std::string& reason);
  Result<Approval> get(const std::string& id);
  std::vector<Approval> list(bool pending_only);
  // A repeated call with an approved id: same token and digest, once. kPermissionDenied with
  // the reason otherwise (pending, denied, expired, expired unused, used, another call).
  Status consume(const std::string& id, const std::string& token, const std::string& digest);
  std::size_t pending();
  // An approved, unused approval of this token for the same call (digest), used now; for a
  // caller that cannot name it (an MCP tool called again with the same arguments).
  std::optional<Approval> take_approved(const std::string& token, const std::string& digest);

 private:
  // Expires the pending approvals whose deadline passed (the front of deadlines_ only) and
  // forgets the oldest decided ones beyond keep_decided.
  void expire_locked(std::int64_t now_ms);
  Approval* find_locked(const std::string& id);
  std::size_t pending_locked() const { return deadlines_.size(); }
  // A pending approval was decided (or expired): out of the queue, into decided_.
  void settle_locked(const Approval& a);

  Options options_;
  std::string instance_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t next_ = 1;
  std::map<std::string, Approval> all_;  // by id
  // The pending approvals by deadline (unix ms -> id): expiring looks at the front only.
  std::multimap<std::int64_t, std::string> deadlines_;
  std::set<std::string> decided_;  // ids of decided approvals; ids grow with time
};

}  // namespace pvs::service
