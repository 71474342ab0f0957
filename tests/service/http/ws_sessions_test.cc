// WsSessions: the caps per token and in all, places given back, stop() hanging sessions up.
#include "http/ws_sessions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

namespace pvs::service {
namespace {

TEST(WsSessions, CapsPerTokenAndInAllAndPlacesComeBack) {
  WsSessions s({.per_token = 2, .total = 3});
  std::string why;
  auto a1 = s.reserve("alice", &why);
  auto a2 = s.reserve("alice", &why);
  ASSERT_TRUE(a1 && a2);
  EXPECT_FALSE(s.reserve("alice", &why));
  EXPECT_NE(why.find("terminals.max_websockets_per_token"), std::string::npos) << why;
  auto b1 = s.reserve("bob", &why);
  ASSERT_TRUE(b1);
  EXPECT_FALSE(s.reserve("bob", &why));
  EXPECT_NE(why.find("terminals.max_websockets)"), std::string::npos) << why;
  EXPECT_EQ(s.active(), 3u);
  EXPECT_EQ(s.active("alice"), 2u);
  a1.reset();  // an unused ticket gives its place back
  EXPECT_EQ(s.active("alice"), 1u);
  EXPECT_TRUE(s.reserve("bob", &why));
}

TEST(WsSessions, ASessionHoldsItsPlaceUntilItEndsAndStopHangsUpTheRest) {
  WsSessions s({.per_token = 1, .total = 10});
  std::string why;
  // A session that ends by itself gives its place back when its thread is done.
  std::promise<void> release_first;
  auto first_done = release_first.get_future().share();
  s.start(
      std::move(*s.reserve("alice", &why)), [first_done] { first_done.wait(); }, [] {});
  EXPECT_FALSE(s.reserve("alice", &why)) << "the running session holds alice's place";
  release_first.set_value();
  while (s.active("alice") != 0) std::this_thread::yield();
  // Sessions that only end when hung up: stop() hangs each up and joins its thread.
  std::atomic<int> hung_up{0};
  std::vector<std::shared_ptr<std::promise<void>>> gates;
  for (const char* who : {"alice", "bob", "carol"}) {
    auto gate = std::make_shared<std::promise<void>>();
    auto until = gate->get_future().share();
    gates.push_back(gate);
    s.start(
        std::move(*s.reserve(who, &why)), [until] { until.wait(); },
        [gate, &hung_up] {
          ++hung_up;
          gate->set_value();
        });
  }
  EXPECT_EQ(s.active(), 3u);
  s.stop();
  EXPECT_EQ(hung_up.load(), 3);
  EXPECT_EQ(s.active(), 0u);
  EXPECT_FALSE(s.reserve("dave", &why));
  EXPECT_NE(why.find("stopping"), std::string::npos);
}

}  // namespace
}  // namespace pvs::service
