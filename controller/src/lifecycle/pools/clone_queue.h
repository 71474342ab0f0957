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
    int& waiting = who == Who::kCaller ? callers_waiting_ : refills_waiting_;
    ++waiting;
    cv_.wait(l, [&] { return !held_ && (who == Who::kCaller || callers_waiting_ == 0); });
    --waiting;
    held_ = true;
  }

  void unlock() {
    {
      std::lock_guard l(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }

  // How many are inside lock() and not yet holding it. The count goes up under the same lock
  // hold that first tests for a turn, so whoever sees it has also seen that holder-to-be
  // wait (or take its turn and leave the count).
  int callers_waiting() {
    std::lock_guard l(mu_);
    return callers_waiting_;
  }
  int refills_waiting() {
    std::lock_guard l(mu_);
    return refills_waiting_;
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
  int refills_waiting_ = 0;
};

}  // namespace pvs::lifecycle
