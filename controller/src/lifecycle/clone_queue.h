// The queue in front of a template's clones (Proxmox clones one template at a time): one holder
// at a time, and a waiting caller's create goes before every waiting pool refill, so refills
// never stand between a caller and its clone.
#pragma once

#include <condition_variable>
#include <mutex>

namespace pvs::lifecycle {

class CloneQueue {
 public:
  enum class Who { kCaller, kRefill };

  // Blocks until it is `who`'s turn.
  void lock(Who who) {
    std::unique_lock l(mu_);
    if (who == Who::kCaller) ++callers_waiting_;
    cv_.wait(l, [&] { return !held_ && (who == Who::kCaller || callers_waiting_ == 0); });
    if (who == Who::kCaller) --callers_waiting_;
    held_ = true;
  }

  void unlock() {
    {
      std::lock_guard l(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }

  int callers_waiting() {
    std::lock_guard l(mu_);
    return callers_waiting_;
  }

  // For lock_guard-like use: `CloneQueue::Turn turn(queue, who);`.
  class Turn {
   public:
    Turn(CloneQueue& q, Who who) : q_(q) { q_.lock(who); }
    ~Turn() { q_.unlock(); }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    CloneQueue& q_;
  };

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int callers_waiting_ = 0;
};

}  // namespace pvs::lifecycle
