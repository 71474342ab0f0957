// RouteTable (routes.h): when the port proxy's route asks the node's agent for its
// proxy_routes element. The agent is the recording fake (fake_peers.h); the kernel side, the
// element's timeout and the ruleset, is proven by PortsRouteTest on the real agent.
#include "routes.h"

#include <gtest/gtest.h>

#include <thread>

#include "fake_peers.h"

namespace pvs::lifecycle {
namespace {

using std::chrono::seconds;

class RouteTableTest : public ::testing::Test {
 protected:
  RouteTableTest() {
    auto fake = std::make_unique<test::FakeAgent>();
    fake_ = fake.get();
    fake_->routes = true;
    agent_ = std::make_unique<TimedAgent>(std::move(fake));
    table_ = std::make_unique<RouteTable>(*agent_);
  }
  std::vector<std::string> verbs() const { return fake_->verbs(); }

  const Ipv4Address a_ = *Ipv4Address::parse("10.99.0.7");
  test::FakeAgent* fake_ = nullptr;  // owned by agent_
  std::unique_ptr<TimedAgent> agent_;
  std::unique_ptr<RouteTable> table_;
};

TEST_F(RouteTableTest, TheFirstUserAsksAndTheLastOneEndsIt) {
  auto one = table_->acquire(a_, 8080, seconds(60));
  ASSERT_TRUE(one) << one.error().message;
  auto two = table_->acquire(a_, 8080, seconds(60));
  ASSERT_TRUE(two) << two.error().message;
  auto other = table_->acquire(a_, 9090, seconds(60));
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(verbs(),
            (std::vector<std::string>{"ROUTE 10.99.0.7:8080 60", "ROUTE 10.99.0.7:9090 60"}));
  EXPECT_EQ(table_->in_use(), 2U);
  (*one)->keep();  // within the first half of its life: nothing to ask
  one->reset();
  EXPECT_EQ(verbs().size(), 2U);
  two->reset();
  other->reset();
  EXPECT_EQ(verbs().back(), "UNROUTE 10.99.0.7:9090");
  EXPECT_EQ(verbs()[2], "UNROUTE 10.99.0.7:8080");
  EXPECT_EQ(table_->in_use(), 0U);
}

// A connection that outlives half its element's life asks again (the agent sets a new timeout);
// keep() is what every read and write of the routed stream calls.
TEST_F(RouteTableTest, KeepAsksAgainOnceHalfTheLifeHasPassed) {
  auto lease = table_->acquire(a_, 8080, seconds(2));
  ASSERT_TRUE(lease) << lease.error().message;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  (*lease)->keep();
  EXPECT_EQ(verbs(),
            (std::vector<std::string>{"ROUTE 10.99.0.7:8080 2", "ROUTE 10.99.0.7:8080 2"}));
  // A new user after half the life asks too, so the element lives half a life from it on.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  auto late = table_->acquire(a_, 8080, seconds(2));
  ASSERT_TRUE(late);
  EXPECT_EQ(verbs().size(), 3U);
  lease->reset();
  late->reset();
  EXPECT_EQ(verbs().back(), "UNROUTE 10.99.0.7:8080");
}

// The address was unbound (its sandbox destroyed; the agent dropped its elements) while a
// connection to it still holds its entry: the next lease, for the next sandbox on the address,
// asks again instead of sharing an element that is gone. Other addresses are untouched.
TEST_F(RouteTableTest, AForgottenAddressIsAskedForAgain) {
  auto old = table_->acquire(a_, 8080, seconds(60));
  auto other = table_->acquire(*Ipv4Address::parse("10.99.0.8"), 8080, seconds(60));
  ASSERT_TRUE(old && other);
  table_->forget(a_);
  auto next = table_->acquire(a_, 8080, seconds(60));
  auto still = table_->acquire(*Ipv4Address::parse("10.99.0.8"), 8080, seconds(60));
  ASSERT_TRUE(next && still);
  EXPECT_EQ(verbs(), (std::vector<std::string>{"ROUTE 10.99.0.7:8080 60", "ROUTE 10.99.0.8:8080 60",
                                               "ROUTE 10.99.0.7:8080 60"}));
  old->reset();  // the gone sandbox's connection ends: the new one keeps the element
  EXPECT_EQ(verbs().size(), 3U);
  next->reset();
  EXPECT_EQ(verbs().back(), "UNROUTE 10.99.0.7:8080");
}

// A refused first ROUTE is the caller's error (the proxy falls back to SSH) and leaves nothing;
// a refused refresh keeps the lease (the element may still live) and is asked again later.
TEST_F(RouteTableTest, RefusalsLeaveNothingBehind) {
  fake_->fail_route = true;
  auto refused = table_->acquire(a_, 8080, seconds(60));
  ASSERT_FALSE(refused);
  EXPECT_EQ(table_->in_use(), 0U);
  fake_->fail_route = false;
  auto lease = table_->acquire(a_, 8080, seconds(2));
  ASSERT_TRUE(lease) << lease.error().message;
  fake_->fail_route = true;
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  (*lease)->keep();  // refused: logged, asked again a second later
  fake_->fail_route = false;
  EXPECT_EQ(verbs().size(), 1U);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  (*lease)->keep();
  EXPECT_EQ(verbs().size(), 2U);
  EXPECT_EQ(table_->in_use(), 1U);
}

}  // namespace
}  // namespace pvs::lifecycle
