#include "pools/clone_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace pvs::lifecycle {
namespace {

using Who = CloneQueue::Who;

// While a clone runs, a refill queues first and a caller second: the caller clones next.
TEST(CloneQueue, AWaitingCallerGoesBeforeAWaitingRefill) {
  CloneQueue q;
  std::mutex mu;
  std::vector<std::string> order;
  auto take = [&](Who who, const char* name) {
    CloneQueue::Turn turn(q, who);
    std::lock_guard l(mu);
    order.push_back(name);
  };
  q.lock(Who::kCaller);  // the clone in progress
  std::thread refill(take, Who::kRefill, "refill");
  while (q.refills_waiting() < 1) std::this_thread::yield();  // the refill waits in lock()
  std::thread caller(take, Who::kCaller, "caller");
  while (q.callers_waiting() < 1) std::this_thread::yield();
  q.unlock();
  caller.join();
  refill.join();
  EXPECT_EQ(order, (std::vector<std::string>{"caller", "refill"}));
}

// Nobody holds it twice; refills alone still get their turns.
TEST(CloneQueue, OneHolderAtATime) {
  CloneQueue q;
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) {
        CloneQueue::Turn turn(q, i % 2 ? Who::kRefill : Who::kCaller);
        int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        --inside;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(most.load(), 1);
}

}  // namespace
}  // namespace pvs::lifecycle
