// Polls a condition until it holds, for tests whose interleaving is made by construction: the
// limit only keeps a failure from hanging; a pass never depends on it.
//
//   EXPECT_TRUE(pvs::test::eventually([&] { return !s.is_connected(); }, 10s));
#pragma once

#include <chrono>
#include <thread>

namespace pvs::test {

// True once `done()` holds (polled every 10 ms), false if `limit` passes first.
template <typename F>
bool eventually(F done, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace pvs::test
