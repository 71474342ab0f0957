#include "policy/approvals.h"

#include <algorithm>
#include <random>

namespace pvs::service {
namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string instance_id() {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  return buf;
}

}  // namespace

std::string to_string(Approval::State state) {
  switch (state) {
    case Approval::State::kPending: return "pending";
    case Approval::State::kApproved: return "approved";
    case Approval::State::kDenied: return "denied";
    case Approval::State::kExpired: return "expired";
  }
  return "?";
}

Approvals::Approvals(Options options) : options_(options), instance_(instance_id()) {}

void Approvals::expire_locked(std::int64_t now) {
  bool changed = false;
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    Approval& a = all_.at(deadlines_.begin()->second);
    a.state = Approval::State::kExpired;
    a.decided_ms = now;
    a.decided_by = "deadline";
    a.reason = "nobody decided within " + std::to_string(options_.timeout.count()) + " s";
    settle_locked(a);
    changed = true;
  }
  // Forget the oldest decided ones beyond keep_decided.
  while (decided_.size() > options_.keep_decided) {
    all_.erase(*decided_.begin());
    decided_.erase(decided_.begin());
  }
  if (changed) cv_.notify_all();
}

void Approvals::settle_locked(const Approval& a) {
  auto [first, last] = deadlines_.equal_range(a.deadline_ms);
  for (auto it = first; it != last; ++it) {
    if (it->second == a.id) {
      deadlines_.erase(it);
      break;
    }
  }
  decided_.insert(a.id);
}

Approval* Approvals::find_locked(const std::string& id) {
  auto it = all_.find(id);
  return it == all_.end() ? nullptr : &it->second;
}

Result<Approval> Approvals::open(ApprovalRequest request) {
  std::lock_guard lock(mu_);
  auto now = now_ms();
  expire_locked(now);
  if (pending_locked() >= options_.max_pending)
    return fail(ErrorCode::kUnavailable,
                std::to_string(options_.max_pending) + " approvals are pending already");
  char seq[24];
  std::snprintf(seq, sizeof seq, "%012llu", static_cast<unsigned long long>(next_++));
  Approval a;
  a.id = "ap-" + instance_ + "-" + seq;
  a.request = std::move(request);
  a.created_ms = now;
  a.deadline_ms = now + options_.timeout.count() * 1000;
  all_[a.id] = a;
  deadlines_.emplace(a.deadline_ms, a.id);
  return a;
}

Result<Approval> Approvals::get(const std::string& id) {
  std::lock_guard lock(mu_);
  expire_locked(now_ms());
  if (auto* a = find_locked(id)) return *a;
  // An id of an earlier instance: it was pending (or decided) when the controller restarted.
  if (id.rfind("ap-", 0) == 0 && id.size() > 12 && id.compare(3, 8, instance_) != 0) {
    Approval a;
    a.id = id;
    a.state = Approval::State::kDenied;
    a.decided_by = "restart";
    a.reason = "the controller restarted; approvals pending then are denied";
    return a;
  }
  return fail(ErrorCode::kNotFound, "no approval " + id);
}

Result<Approval> Approvals::wait(const std::string& id, std::chrono::milliseconds max_wait) {
  auto until = std::chrono::steady_clock::now() + max_wait;
  std::unique_lock lock(mu_);
  for (;;) {
    expire_locked(now_ms());
    Approval* a = find_locked(id);
    if (!a) break;
    if (a->state != Approval::State::kPending) return *a;
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(std::max<std::int64_t>(0, a->deadline_ms - now_ms()));
    if (std::chrono::steady_clock::now() >= until) return *a;
    cv_.wait_until(lock, std::min(until, deadline + std::chrono::milliseconds(1)));
  }
  lock.unlock();
  return get(id);
}

Result<Approval> Approvals::decide(const std::string& id, bool approve, const std::string& who,
                                   const std::string& reason) {
  std::lock_guard lock(mu_);
  auto now = now_ms();
  expire_locked(now);
  Approval* a = find_locked(id);
  if (!a) return fail(ErrorCode::kNotFound, "no approval " + id);
  if (a->request.token == who)
    return fail(ErrorCode::kPermissionDenied,
                "approval " + id + " was asked for by token " + who +
                    ": a token may not decide its own approval; another approver must");
  if (a->state != Approval::State::kPending)
    return fail(ErrorCode::kConflict, "approval " + id + " is " + to_string(a->state) + " already");
  a->state = approve ? Approval::State::kApproved : Approval::State::kDenied;
  a->decided_ms = now;
  a->decided_by = who;
  a->reason = reason;
  if (approve) a->use_by_ms = now + options_.use_within.count() * 1000;
  settle_locked(*a);
  cv_.notify_all();
  return *a;
}

std::vector<Approval> Approvals::list(bool pending_only) {
  std::lock_guard lock(mu_);
  expire_locked(now_ms());
  std::vector<Approval> out;
  for (const auto& [id, a] : all_) {
    if (!pending_only || a.state == Approval::State::kPending) out.push_back(a);
  }
  return out;
}

Status Approvals::consume(const std::string& id, const std::string& token,
                          const std::string& digest) {
  auto a = get(id);
  if (!a) return fail(ErrorCode::kPermissionDenied, a.error().message);
  std::lock_guard lock(mu_);
  Approval* own = find_locked(id);
  if (!own)  // of an earlier instance
    return fail(ErrorCode::kPermissionDenied,
                "approval " + id + " is " + to_string(a->state) + ": " + a->reason);
  if (own->request.token != token)
    return fail(ErrorCode::kPermissionDenied, "approval " + id + " is not this token's");
  if (own->state != Approval::State::kApproved)
    return fail(ErrorCode::kPermissionDenied, "approval " + id + " is " + to_string(own->state) +
                                                  (own->reason.empty() ? "" : ": " + own->reason));
  if (own->request.digest != digest)
    return fail(ErrorCode::kPermissionDenied, "approval " + id + " was given for another call");
  if (own->consumed) return fail(ErrorCode::kPermissionDenied, "approval " + id + " was used");
  if (now_ms() > own->use_by_ms)
    return fail(ErrorCode::kPermissionDenied,
                "approval " + id + " expired unused: it had to be used within " +
                    std::to_string(options_.use_within.count()) + " s of its approval");
  own->consumed = true;
  return {};
}

std::optional<Approval> Approvals::take_approved(const std::string& token,
                                                 const std::string& digest) {
  std::lock_guard lock(mu_);
  auto now = now_ms();
  expire_locked(now);
  for (auto& [id, a] : all_) {
    if (a.state == Approval::State::kApproved && !a.consumed && now <= a.use_by_ms &&
        a.request.token == token && a.request.digest == digest) {
      a.consumed = true;
      return a;
    }
  }
  return std::nullopt;
}

std::size_t Approvals::pending() {
  std::lock_guard lock(mu_);
  expire_locked(now_ms());
  return pending_locked();
}

}  // namespace pvs::service
