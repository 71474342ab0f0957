// The resolver's egress log (docs/agent.md "Egress log") on a real pve-sandbox-resolver process
// against the fake agent (names starting with "no" refused, the rest listed as themselves) and the
// fake upstream on loopback: every decision reaches the agent as ELOG lines, exactly; a flood
// of refused names stays within the per-source bound and another source is answered meanwhile;
// a window's first decision of a name arrives before the window ends. Windows are an hour long
// and flushed by SIGUSR1, so what one window holds is by construction.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "egress_log.h"
#include "resolver_fixture.h"

namespace pvs::resolver::testing {
namespace {

using namespace std::chrono_literals;

class EgressLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pvs-egress-log-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
    agent_ = std::make_unique<FakeAgent>(dir_ + "/agent.sock");
    resolver_ = std::make_unique<ResolverProcess>(
        dir_, *agent_, upstream_,
        "egress_log: true\negress_log_window_ms: 3600000\negress_log_max_names: 8\n"
        "");
    ASSERT_TRUE(resolver_->started()) << resolver_binary();
  }
  void TearDown() override {
    resolver_.reset();
    agent_.reset();
    std::filesystem::remove_all(dir_);
  }
  // Waits (up to 10 s: a failure bound) until the agent holds `decisions` decisions of
  // `source`; the lines of that source as the agent keeps them: the lines of one name, decision
  // and window merged (at most 3 arrive: the first decision, the first with addresses when
  // the first had none, then the rest). With `flush`,
  // SIGUSR1 ends the open windows first.
  std::vector<proto::EgressLogLine> received(const std::string& source, std::uint64_t decisions,
                                             bool flush = true) {
    if (flush) ::kill(resolver_->pid(), SIGUSR1);
    std::vector<proto::EgressLogLine> mine;
    for (int i = 0; i < 200; ++i) {
      mine.clear();
      std::uint64_t sum = 0;
      std::map<std::tuple<std::string, bool, std::int64_t>, int> arrived;
      for (auto& l : agent_->log()) {
        if (l.source.to_string() != source) continue;
        sum += l.count;
        auto key = std::make_tuple(l.name, l.allowed, l.window_ms);
        EXPECT_LE(++arrived[key], 3) << l.name;
        auto same = std::find_if(mine.begin(), mine.end(), [&](const auto& m) {
          return std::make_tuple(m.name, m.allowed, m.window_ms) == key;
        });
        if (same == mine.end()) {
          mine.push_back(l);
        } else {
          same->count += l.count;
          if (!l.to.empty()) same->to = l.to;
        }
      }
      if (sum >= decisions) break;
      std::this_thread::sleep_for(50ms);
    }
    return mine;
  }
  std::vector<proto::EgressLogLine> flushed(const std::string& source, std::uint64_t decisions) {
    return received(source, decisions, true);
  }

  std::string dir_;
  FakeUpstream upstream_;
  std::unique_ptr<FakeAgent> agent_;
  std::unique_ptr<ResolverProcess> resolver_;
};

TEST_F(EgressLogTest, ListedAndUnlistedNamesAppearExactly) {
  std::uint16_t port = resolver_->port();
  for (const char* name : {"ok1.test", "nope.test", "ok1.test", "ok2.test"}) {
    auto a = udp_query("127.0.0.5", port, name);
    ASSERT_TRUE(a) << name;
    EXPECT_EQ(a->rcode,
              std::string(name) == "nope.test" ? dns::Rcode::kRefused : dns::Rcode::kNoError);
  }
  auto lines = flushed("127.0.0.5", 4);
  std::map<std::string, proto::EgressLogLine> by_name;
  for (const auto& l : lines) EXPECT_TRUE(by_name.emplace(l.name, l).second) << l.name;
  ASSERT_EQ(by_name.size(), 3u);
  auto ok1 = by_name.at("ok1.test");
  EXPECT_TRUE(ok1.allowed);
  EXPECT_EQ(ok1.count, 2u);
  EXPECT_EQ(ok1.entry, "ok1.test");
  ASSERT_EQ(ok1.to.size(), 1u);
  EXPECT_EQ(ok1.to[0].to_string(), "198.51.100.1");
  EXPECT_EQ(by_name.at("ok2.test").count, 1u);
  auto nope = by_name.at("nope.test");
  EXPECT_FALSE(nope.allowed);
  EXPECT_EQ(nope.count, 1u);
  EXPECT_EQ(nope.entry, "");
  EXPECT_TRUE(nope.to.empty());
}

TEST_F(EgressLogTest, AFloodOfRefusedNamesStaysWithinItsBoundAndOthersAreAnswered) {
  std::uint16_t port = resolver_->port();
  constexpr int kFlood = 200;
  for (int i = 0; i < kFlood; ++i) {
    auto a = udp_query("127.0.0.6", port, "no" + std::to_string(i) + ".test");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->rcode, dns::Rcode::kRefused);
    if (i == kFlood / 2) {  // another source, mid-flood: answered, and logged on its own
      auto other = udp_query("127.0.0.7", port, "ok.test");
      ASSERT_TRUE(other);
      EXPECT_EQ(other->rcode, dns::Rcode::kNoError);
    }
  }
  auto flood = flushed("127.0.0.6", kFlood);
  // One window: 8 names (the bound) and one line for the other 192, every decision counted.
  ASSERT_EQ(flood.size(), 9u);
  std::uint64_t sum = 0;
  std::set<std::string> names;
  for (const auto& l : flood) {
    EXPECT_FALSE(l.allowed);
    sum += l.count;
    names.insert(l.name);
  }
  EXPECT_EQ(sum, static_cast<std::uint64_t>(kFlood));
  EXPECT_TRUE(names.contains("*"));
  auto other = flushed("127.0.0.7", 1);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].name, "ok.test");
  EXPECT_TRUE(other[0].allowed);
}

TEST_F(EgressLogTest, AWindowsFirstRefusalArrivesBeforeTheWindowEnds) {
  std::uint16_t port = resolver_->port();
  for (int i = 0; i < 3; ++i) {
    auto a = udp_query("127.0.0.8", port, "nothere.test");
    ASSERT_TRUE(a);
  }
  // No SIGUSR1: the window (an hour) is open; its first decision is at the agent already.
  auto now = received("127.0.0.8", 1, false);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].name, "nothere.test");
  EXPECT_FALSE(now[0].allowed);
  EXPECT_EQ(now[0].count, 1u);
  // The window's end adds the other two to the same line.
  auto all = flushed("127.0.0.8", 3);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].count, 3u);
  EXPECT_EQ(all[0].window_ms, now[0].window_ms);
}

// A client resolves a name as getaddrinfo() does: AAAA and A. The resolver decides the AAAA
// query (answered empty: IPv6 stays blocked) before the A query has been upstream, so the
// name's first line has no addresses; the first answer that has them is at the agent at once
// too, before the window ends (#46: the demo's log showed "addresses": []).
TEST_F(EgressLogTest, TheAddressesOfAnAllowedNameArriveBeforeTheWindowEnds) {
  std::uint16_t port = resolver_->port();
  auto aaaa = udp_query("127.0.0.9", port, "both.test", std::chrono::seconds(10), dns::kTypeAaaa);
  ASSERT_TRUE(aaaa);
  EXPECT_EQ(aaaa->rcode, dns::Rcode::kNoError);
  auto a = udp_query("127.0.0.9", port, "both.test");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->rcode, dns::Rcode::kNoError);
  // No SIGUSR1: the window (an hour) is open.
  auto now = received("127.0.0.9", 2, false);
  ASSERT_EQ(now.size(), 1u);
  EXPECT_EQ(now[0].name, "both.test");
  EXPECT_TRUE(now[0].allowed);
  EXPECT_EQ(now[0].count, 2u);
  ASSERT_EQ(now[0].to.size(), 1u);
  EXPECT_EQ(now[0].to[0].to_string(), "198.51.100.1");
  // Another AAAA, then the window's end: the addresses stay, every decision counted once.
  ASSERT_TRUE(udp_query("127.0.0.9", port, "both.test", std::chrono::seconds(10), dns::kTypeAaaa));
  auto all = flushed("127.0.0.9", 3);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].count, 3u);
  ASSERT_EQ(all[0].to.size(), 1u);
  EXPECT_EQ(all[0].to[0].to_string(), "198.51.100.1");
}

// The aggregation itself, without a process: the first decision of each (name, allowed) at
// once, the rest when the window ends; the bounds on names and sources.
TEST(EgressLogUnit, BoundsOnNamesAndSourcesAndWindows) {
  EgressLog log({.window_ms = 1000, .max_names_per_source = 2, .max_sources = 1});
  auto a = *Ipv4Address::parse("10.99.0.2");
  auto b = *Ipv4Address::parse("10.99.0.3");
  std::vector<proto::EgressLogLine> lines;
  auto record = [&](const EgressDecision& d, std::int64_t now) {
    auto line = log.record(d, now);
    if (line) lines.push_back(*line);
    return line.has_value();
  };
  EXPECT_TRUE(record({a, "x.test", false, "", {}}, 0));
  EXPECT_TRUE(record({a, "y.test", true, "*.y.test", {*Ipv4Address::parse("198.51.100.1")}}, 10));
  EXPECT_TRUE(record({a, "z.test", false, "", {}}, 20));  // beyond the names: the first "*"
  EXPECT_FALSE(record({a, "w.test", false, "", {}}, 25));
  EXPECT_FALSE(record({a, "x.test", false, "", {}}, 30));
  EXPECT_FALSE(record({a, "x.test", false, "", {}}, 35));
  EXPECT_FALSE(record({b, "x.test", false, "", {}}, 40));  // beyond max_sources
  EXPECT_EQ(log.dropped(), 1u);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].to.size(), 1u);
  EXPECT_EQ(lines[1].entry, "*.y.test");
  EXPECT_TRUE(log.take(999).empty());  // the window is still open
  auto rest = log.take(1000);
  // y.test had no second decision: nothing more of it.
  ASSERT_EQ(rest.size(), 2u);
  lines.insert(lines.end(), rest.begin(), rest.end());
  std::map<std::string, std::uint64_t> counts;
  for (const auto& l : lines) {
    EXPECT_EQ(l.window_ms, lines[0].window_ms);
    counts[l.name + (l.allowed ? "+" : "-")] += l.count;
  }
  EXPECT_EQ(counts,
            (std::map<std::string, std::uint64_t>{{"x.test-", 3}, {"y.test+", 1}, {"*-", 2}}));
  EXPECT_EQ(log.sources(), 0u);
  EXPECT_TRUE(record({b, "x.test", false, "", {}}, 2000));  // a new window, a new source may come
  EXPECT_TRUE(log.take(0, true).empty());
  // The wire form round-trips.
  for (const auto& l : lines) {
    auto back = proto::parse_egress_log(proto::format_egress_log(l));
    ASSERT_TRUE(back) << proto::format_egress_log(l) << ": " << back.error().message;
    EXPECT_EQ(*back, l) << proto::format_egress_log(l);
  }
}

}  // namespace
}  // namespace pvs::resolver::testing
