// Unit tests of the per-caller bounds: refused authentications aggregated per source, and
// per-token concurrency slots.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/observability/denied_log.h"
#include "http/token_limits.h"

namespace pvs::service {
namespace {

using namespace std::chrono_literals;

TEST(DeniedLogTest, FirstRefusalAtOnceTheRestCountedOncePerInterval) {
  DeniedLog log({.interval = 60s, .max_sources = 8});
  auto t0 = DeniedLog::Clock::time_point{} + 1h;
  auto first = log.record("10.0.0.1", t0);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->remote, "10.0.0.1");
  EXPECT_EQ(first->count, 1u);
  EXPECT_TRUE(first->first);
  for (int i = 0; i < 999; ++i) EXPECT_FALSE(log.record("10.0.0.1", t0 + 1s));
  EXPECT_TRUE(log.flush(t0 + 59s).empty());
  auto lines = log.flush(t0 + 60s);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].count, 999u);
  EXPECT_FALSE(lines[0].first);
  EXPECT_EQ(log.tracked(), 0u);
  EXPECT_TRUE(log.record("10.0.0.1", t0 + 61s));  // a new interval: on record at once again
}

TEST(DeniedLogTest, ManySourcesPoolIntoOtherAndMemoryStaysBounded) {
  DeniedLog log({.interval = 60s, .max_sources = 4});
  auto t0 = DeniedLog::Clock::time_point{} + 1h;
  int written_now = 0;
  for (int i = 0; i < 10000; ++i) {
    if (log.record("10.1." + std::to_string(i / 256) + "." + std::to_string(i % 256), t0))
      ++written_now;
  }
  EXPECT_LE(log.tracked(), 5u);
  EXPECT_EQ(written_now, 5);  // four sources and "other", each once
  std::uint64_t total = written_now;
  for (const auto& l : log.flush(t0 + 60s)) total += l.count;
  EXPECT_EQ(total, 10000u);  // every refusal is counted somewhere
}

TEST(TokenLimitsTest, SlotsPerTokenAndKindAreGivenBack) {
  TokenLimits limits({.requests = 2, .streams = 1});
  auto a = limits.acquire("ci", TokenLimits::Kind::kRequest);
  auto b = limits.acquire("ci", TokenLimits::Kind::kRequest);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(limits.acquire("ci", TokenLimits::Kind::kRequest));
  EXPECT_TRUE(limits.acquire("other", TokenLimits::Kind::kRequest));  // per token
  auto s = limits.acquire("ci", TokenLimits::Kind::kStream);
  ASSERT_TRUE(s);  // streams are counted apart
  EXPECT_FALSE(limits.acquire("ci", TokenLimits::Kind::kStream));
  EXPECT_EQ(limits.in_use("ci", TokenLimits::Kind::kRequest), 2);
  a.reset();
  EXPECT_EQ(limits.in_use("ci", TokenLimits::Kind::kRequest), 1);
  EXPECT_TRUE(limits.acquire("ci", TokenLimits::Kind::kRequest));
}

TEST(TokenLimitsTest, ZeroMeansNoLimitAndConcurrentUseBalances) {
  TokenLimits limits({.requests = 0, .streams = 3});
  std::vector<TokenLimits::Slot> many;
  for (int i = 0; i < 100; ++i) many.push_back(*limits.acquire("ci", TokenLimits::Kind::kRequest));
  many.clear();
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        auto slot = limits.acquire("ci", TokenLimits::Kind::kStream);
        if (!slot) ++refused;
        EXPECT_LE(limits.in_use("ci", TokenLimits::Kind::kStream), 3);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(limits.in_use("ci", TokenLimits::Kind::kStream), 0);
  EXPECT_EQ(limits.in_use("ci", TokenLimits::Kind::kRequest), 0);
}

}  // namespace
}  // namespace pvs::service

#include "api/sandboxes/output_cap.h"
#include "http/json.h"

namespace pvs::service {
namespace {

TEST(OutputCapTest, TheCapCountsEncodedBytesAndCutsAtACharacter) {
  std::string control(1 << 20, '\x01');  // 1 MiB that escapes to 6 MiB
  std::string out;
  std::size_t kept = append_json_string_capped(out, control, 1 << 20);
  EXPECT_LE(out.size(), 1u << 20);
  EXPECT_EQ(kept, ((1u << 20) - 2) / 6);
  EXPECT_EQ(out.front(), '"');
  EXPECT_EQ(out.back(), '"');

  std::string plain = "héllo wörld";  // fits: identical to the uncapped encoding
  std::string a, b;
  EXPECT_EQ(append_json_string_capped(a, plain, 1000), plain.size());
  append_json_string(b, plain);
  EXPECT_EQ(a, b);

  std::string cut;  // a two-byte character is never split: "h" + "é" needs 2 + 1 + 2 bytes
  EXPECT_EQ(append_json_string_capped(cut, plain, 4), 1u);
  EXPECT_EQ(cut, "\"h\"");
  std::string invalid = "\xff\xfe";  // each invalid byte becomes U+FFFD (3 bytes)
  std::string inv;
  EXPECT_EQ(append_json_string_capped(inv, invalid, 5), 1u);
  std::string empty;
  EXPECT_EQ(append_json_string_capped(empty, "abc", 0), 0u);
  EXPECT_EQ(empty, "\"\"");
}

}  // namespace
}  // namespace pvs::service
