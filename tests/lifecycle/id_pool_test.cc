#include "id_pool.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace pvs {
namespace {

TEST(IdPool, HandsOutLowestFreeAndReuses) {
  IdPool pool(100, 104);
  EXPECT_EQ(*pool.acquire(), 100u);
  EXPECT_EQ(*pool.acquire(), 101u);
  pool.release(100);
  EXPECT_EQ(*pool.acquire(), 100u);
  EXPECT_EQ(*pool.acquire(), 102u);
  EXPECT_EQ(pool.used(), 3u);  // 100, 101, 102
}

TEST(IdPool, ExhaustionIsAnError) {
  IdPool pool(7, 8);
  ASSERT_TRUE(pool.acquire());
  ASSERT_TRUE(pool.acquire());
  auto r = pool.acquire();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(r.error().message.find("7-8"), std::string::npos);
}

TEST(IdPool, MarkUsedSkipsTakenNumbers) {
  IdPool pool(100, 110);
  pool.mark_used(100);
  pool.mark_used(101);
  pool.mark_used(5000);  // outside: ignored
  EXPECT_EQ(*pool.acquire(), 102u);
  EXPECT_EQ(pool.used(), 3u);
  pool.mark_used(101);  // twice: still counted once
  EXPECT_EQ(pool.used(), 3u);
}

TEST(IdPool, QuarantinedNumbersAreNeverReusedUntilReleased) {
  IdPool pool(1, 3);
  auto a = *pool.acquire();
  pool.quarantine(a);
  pool.release(a);  // a plain release must not free a quarantined number
  EXPECT_EQ(pool.state(a), IdPool::State::kQuarantined);
  EXPECT_EQ(*pool.acquire(), 2u);
  EXPECT_EQ(*pool.acquire(), 3u);
  EXPECT_FALSE(pool.acquire());
  pool.release_quarantined(a);
  EXPECT_EQ(*pool.acquire(), a);
  EXPECT_EQ(pool.quarantined(), 0u);
}

TEST(IdPool, ConcurrentAcquiresAreUnique) {
  IdPool pool(1000, 1000 + 8 * 500 - 1);
  std::vector<std::vector<std::uint32_t>> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) got[t].push_back(*pool.acquire());
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::uint32_t> all;
  for (auto& v : got) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 4000u);
  EXPECT_FALSE(pool.acquire());
}

Cidr cidr(std::string_view text) {
  return Cidr::parse(text).value();
}
Ipv4Address ip(std::string_view text) {
  return Ipv4Address::parse(text).value();
}

TEST(AddressPool, NeverHandsOutNetworkBroadcastGatewayOrReserved) {
  auto pool = AddressPool::create(cidr("10.99.0.0/29"), ip("10.99.0.1"), {cidr("10.99.0.4/31")});
  ASSERT_TRUE(pool) << pool.error().message;
  std::vector<std::string> got;
  while (auto a = (*pool)->acquire()) got.push_back(a->to_string());
  EXPECT_EQ(got, (std::vector<std::string>{"10.99.0.2", "10.99.0.3", "10.99.0.6"}));
  EXPECT_EQ((*pool)->used(), 3u);
}

TEST(AddressPool, RecoveryAndQuarantine) {
  auto pool = AddressPool::create(cidr("10.99.0.0/16"), ip("10.99.0.1")).value();
  pool->mark_used(ip("10.99.0.2"));
  auto a = *pool->acquire();
  EXPECT_EQ(a.to_string(), "10.99.0.3");
  pool->quarantine(a);
  pool->release(a);
  EXPECT_EQ(pool->acquire()->to_string(), "10.99.0.4");
  pool->release_quarantined(a);
  EXPECT_EQ(pool->acquire()->to_string(), "10.99.0.3");
}

TEST(AddressPool, RejectsBadNetworks) {
  EXPECT_FALSE(AddressPool::create(cidr("10.99.0.0/16"), ip("10.98.0.1")));
  EXPECT_FALSE(AddressPool::create(cidr("10.99.0.0/16"), ip("10.99.0.0")));
  EXPECT_FALSE(AddressPool::create(cidr("10.99.0.0/16"), ip("10.99.255.255")));
  EXPECT_FALSE(AddressPool::create(cidr("10.99.0.0/31"), ip("10.99.0.1")));
  EXPECT_FALSE(AddressPool::create(cidr("10.0.0.0/7"), ip("10.0.0.1")));
}

}  // namespace
}  // namespace pvs
