// Egress by domain (#20) in the agent's logic: EGRESS/EGRESSES/ASK/PAIR, limits, tightening,
// the journal, authorization of resolver uids, against the in-memory SetBackend. The same
// against the real kernel: tests/egress (netns).
#include <netinet/in.h>  // glibc's in.h before the kernel's (linux/netfilter.h includes it)

#include <linux/netfilter.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>

#include <gtest/gtest.h>

#include "agent.h"
#include "agent/memory_sets.h"

namespace pvs::agent {
namespace {

using test::MemorySets;

const SetRef kAllowed{NFPROTO_INET, "sandbox", "internet_allowed"};
const SetRef kListed{NFPROTO_INET, "sandbox", "egress_listed"};
const SetRef kPairs{NFPROTO_INET, "sandbox", "egress_pairs"};
const SetRef kPortMac{NFPROTO_BRIDGE, "sandbox_l2", "port_mac"};
const SetRef kPortIp4{NFPROTO_BRIDGE, "sandbox_l2", "port_ip4"};
const SetRef kRefused{NFPROTO_INET, "sandbox", "egress_refused"};
const SetRef kRefusedLast{NFPROTO_INET, "sandbox", "egress_refused_last"};
const SetRef kRefusedRate{NFPROTO_INET, "sandbox", "egress_refused_rate"};
constexpr std::uint64_t kHourMs = 3600000;

// What a refusal rule would have put in egress_refused: `packets` refusals, the first `ago_ms`
// ago.
ListedElement refused(std::string_view source, std::string_view destination, std::uint16_t port,
                      std::uint64_t packets, std::uint64_t ago_ms) {
  return {refused_key({*Ipv4Address::parse(source), *Ipv4Address::parse(destination), 6, port}),
          kHourMs - ago_ms, packets};
}

// The sources of a set's elements: the first 4 bytes of each key.
std::multiset<std::string> sources_in(const MemorySets& sets, const SetRef& set) {
  std::multiset<std::string> out;
  for (const auto& e : sets.find(set)->elements)
    out.insert(decode_ipv4_key(ElementKey(e.key.data(), 4))->to_string());
  return out;
}

std::set<std::string> listed(const MemorySets& sets) {
  std::set<std::string> out;
  for (const auto& e : sets.find(kListed)->elements)
    out.insert(decode_ipv4_key(e.key)->to_string());
  return out;
}

// "src>dst:port" of every pair, with the timeouts in `timeouts` when given.
std::set<std::string> pairs(const MemorySets& sets,
                            std::vector<std::uint64_t>* timeouts = nullptr) {
  std::set<std::string> out;
  for (const auto& e : sets.find(kPairs)->elements) {
    auto p = decode_pair_key(e.key);
    out.insert(p->source.to_string() + ">" + p->destination.to_string() + ":" +
               std::to_string(p->port));
    if (timeouts) timeouts->push_back(e.expires_in_ms.value_or(0));
  }
  return out;
}

class AgentEgress : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/pvs-agent-egress-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<Agent> start_agent(MemorySets** sets_out, AgentConfig config = {},
                                     std::unique_ptr<MemorySets> sets = nullptr) {
    if (!sets) {
      sets = std::make_unique<MemorySets>();
      sets->declare(kAllowed, {});
      sets->declare(kListed, {.has_timeout = false, .key_len = 4, .elements = {}});
      sets->declare(kPairs, {.has_timeout = true, .key_len = 12, .elements = {}});
      sets->declare(kPortMac, {.has_timeout = false, .key_len = 24, .elements = {}});
      sets->declare(kPortIp4, {.has_timeout = false, .key_len = 20, .elements = {}});
    }
    *sets_out = sets.get();
    config.sandbox_cidr = *Cidr::parse("10.99.0.0/16");
    config.gateway = *Ipv4Address::parse("10.99.0.1");
    config.state_file = dir_ + "/agent-state";
    config.resolver_uids = {4242};
    auto agent = std::make_unique<Agent>(config, std::move(sets));
    auto started = agent->start();
    EXPECT_TRUE(started) << started.error().message;
    return agent;
  }
  std::string dir_;
  Peer peer_{1, 0, 0};
  Peer resolver_{2, 4242, 4242};
};

TEST_F(AgentEgress, ListsAskAndPairs) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  EXPECT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=80,443 names=pypi.org,*.github.com"),
            "OK");
  EXPECT_EQ(listed(*sets), (std::set<std::string>{"10.99.0.7"}));
  EXPECT_EQ(agent->handle(peer_, "EGRESSES"), "OK 1 10.99.0.7=80,443/pypi.org,*.github.com");
  EXPECT_EQ(agent->handle(resolver_, "ASK 10.99.0.7 pypi.org"),
            "OK allow ports=80,443 entry=pypi.org");
  EXPECT_EQ(agent->handle(resolver_, "ASK 10.99.0.7 api.github.com"),
            "OK allow ports=80,443 entry=*.github.com");
  EXPECT_EQ(agent->handle(resolver_, "ASK 10.99.0.7 github.com"), "OK deny");
  EXPECT_EQ(agent->handle(resolver_, "ASK 10.99.0.7 example.org"), "OK deny");
  EXPECT_EQ(agent->handle(resolver_, "ASK 10.99.0.8 pypi.org"), "OK deny");

  EXPECT_EQ(agent->handle(resolver_, "PAIR 10.99.0.7 pypi.org 198.51.100.1,198.51.100.2 ttl=5"),
            "OK 4");
  std::vector<std::uint64_t> timeouts;
  EXPECT_EQ(pairs(*sets, &timeouts),
            (std::set<std::string>{"10.99.0.7>198.51.100.1:80", "10.99.0.7>198.51.100.1:443",
                                   "10.99.0.7>198.51.100.2:80", "10.99.0.7>198.51.100.2:443"}));
  // ttl 5 is raised to the floor (30 s).
  for (auto t : timeouts) EXPECT_NEAR(static_cast<double>(t), 30000.0, 100.0);
  EXPECT_EQ(agent->handle(resolver_, "PAIR 10.99.0.7 x.github.com 198.51.100.3 ttl=999999"),
            "OK 2");
  timeouts.clear();
  pairs(*sets, &timeouts);
  EXPECT_NEAR(static_cast<double>(*std::max_element(timeouts.begin(), timeouts.end())), 86400000.0,
              100.0);  // capped

  // Refusals: unlisted name, non-public destination, unlisted source, the gateway.
  EXPECT_EQ(agent->handle(resolver_, "PAIR 10.99.0.7 example.org 198.51.100.1 ttl=5").substr(0, 7),
            "ERR 403");
  EXPECT_EQ(agent->handle(resolver_, "PAIR 10.99.0.7 pypi.org 10.99.0.9 ttl=5").substr(0, 7),
            "ERR 403");
  EXPECT_EQ(agent->handle(resolver_, "PAIR 10.99.0.7 pypi.org 192.168.1.1 ttl=5").substr(0, 7),
            "ERR 403");
  EXPECT_EQ(agent->handle(resolver_, "PAIR 10.99.0.7 pypi.org 127.0.0.1 ttl=5").substr(0, 7),
            "ERR 403");
  EXPECT_EQ(agent->handle(resolver_, "PAIR 10.99.0.8 pypi.org 198.51.100.1 ttl=5").substr(0, 7),
            "ERR 403");
  EXPECT_EQ(agent->handle(peer_, "EGRESS 10.99.0.1 ports=80 names=a.b").substr(0, 7), "ERR 403");
  EXPECT_EQ(pairs(*sets).size(), 6u);
  auto status = agent->handle(peer_, "STATUS");
  EXPECT_NE(status.find(" egress_sources=1 pairs=6 "), std::string::npos) << status;
}

// #32, finding 5: the agent, the boundary, refuses a wildcard at a public suffix itself.
TEST_F(AgentEgress, RefusesWildcardsAtAPublicSuffix) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  for (const char* name : {"*.co.uk", "*.nip.io", "*.github.io"}) {
    auto reply =
        agent->handle(peer_, std::string("EGRESS 10.99.0.7 ports=443 names=pypi.org,") + name);
    EXPECT_EQ(reply.substr(0, 8), "ERR 400 ") << reply;
    EXPECT_NE(reply.find(std::string(name) + ": "), std::string::npos) << reply;
  }
  EXPECT_TRUE(listed(*sets).empty());
  EXPECT_EQ(agent->handle(peer_, "EGRESSES"), "OK 0");
  EXPECT_EQ(
      agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=*.example.com,*.pythonhosted.org"),
      "OK");
}

TEST_F(AgentEgress, ResolverUidsMaySendOnlyTheirVerbs) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  EXPECT_EQ(agent->handle(resolver_, "HELLO 1").substr(0, 2), "OK");
  EXPECT_EQ(agent->handle(resolver_, "STATUS").substr(0, 2), "OK");
  for (const char* line : {"EGRESS 10.99.0.7 ports=80 names=a.b", "EGRESS 10.99.0.7 off",
                           "EGRESSES", "ALLOW 10.99.0.7", "REVOKE 10.99.0.7", "SYNC", "LIST",
                           "BINDINGS", "UNBIND veth100i0", "EGRESSLOG 10.99.0.7"}) {
    EXPECT_EQ(agent->handle(resolver_, line).substr(0, 7), "ERR 403") << line;
  }
  EXPECT_TRUE(listed(*sets).empty());
  EXPECT_TRUE(agent->desired().grants.empty());
}

TEST_F(AgentEgress, TighteningCutsPairsNoLongerCoveredAndOffCutsAll) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=80,443 names=a.example,*.b.example"),
            "OK");
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.8 ports=443 names=a.example"), "OK");
  ASSERT_EQ(agent->handle(peer_, "PAIR 10.99.0.7 a.example 198.51.100.1 ttl=60"), "OK 2");
  ASSERT_EQ(agent->handle(peer_, "PAIR 10.99.0.7 x.b.example 198.51.100.2 ttl=60"), "OK 2");
  // One address serving both names: it stays while either is listed.
  ASSERT_EQ(agent->handle(peer_, "PAIR 10.99.0.7 y.b.example 198.51.100.1 ttl=60"), "OK 2");
  ASSERT_EQ(agent->handle(peer_, "PAIR 10.99.0.8 a.example 198.51.100.1 ttl=60"), "OK 1");
  // Widening (a name and a port added) cuts nothing.
  ASSERT_EQ(agent->handle(
                peer_, "EGRESS 10.99.0.7 ports=80,443,8080 names=a.example,*.b.example,c.example"),
            "OK");
  EXPECT_EQ(pairs(*sets).size(), 5u);
  // Port 80 removed: its pairs go.
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=a.example,*.b.example"), "OK");
  EXPECT_EQ(pairs(*sets),
            (std::set<std::string>{"10.99.0.7>198.51.100.1:443", "10.99.0.7>198.51.100.2:443",
                                   "10.99.0.8>198.51.100.1:443"}));
  // a.example removed: 198.51.100.1 stays (y.b.example), then *.b.example removed too.
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=*.b.example"), "OK");
  EXPECT_EQ(pairs(*sets).size(), 3u);
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=c.example"), "OK");
  EXPECT_EQ(pairs(*sets), (std::set<std::string>{"10.99.0.8>198.51.100.1:443"}));
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.8 off"), "OK");
  EXPECT_TRUE(pairs(*sets).empty());
  EXPECT_EQ(listed(*sets), (std::set<std::string>{"10.99.0.7"}));
  EXPECT_EQ(agent->handle(peer_, "EGRESS 10.99.0.8 off"), "OK");  // idempotent
}

TEST_F(AgentEgress, PairLimitsPerSourceAndInTotal) {
  MemorySets* sets = nullptr;
  AgentConfig config;
  config.max_pairs_per_source = 4;
  config.max_pairs = 8;
  auto agent = start_agent(&sets, config);
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=80,443 names=*.a.example"), "OK");
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.8 ports=80,443 names=*.a.example"), "OK");
  EXPECT_EQ(agent->handle(peer_, "PAIR 10.99.0.7 x.a.example 198.51.100.1,198.51.100.2 ttl=1"),
            "OK 4");
  // Refreshing what is there costs nothing; anything new is over the source's limit.
  EXPECT_EQ(agent->handle(peer_, "PAIR 10.99.0.7 y.a.example 198.51.100.1 ttl=1"), "OK 2");
  EXPECT_EQ(agent->handle(peer_, "PAIR 10.99.0.7 z.a.example 198.51.100.3 ttl=1").substr(0, 7),
            "ERR 413");
  EXPECT_EQ(agent->handle(peer_, "PAIR 10.99.0.8 x.a.example 198.51.100.1,198.51.100.2 ttl=1"),
            "OK 4");
  // A third source listed later: its share (8 / 3) is free by count, the set is full.
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.9 ports=80 names=*.a.example"), "OK");
  EXPECT_EQ(agent->handle(peer_, "PAIR 10.99.0.9 x.a.example 198.51.100.1 ttl=1").substr(0, 7),
            "ERR 413");  // the set's limit
  EXPECT_EQ(pairs(*sets).size(), 8u);
}

// #32: max_pairs is shared by the listed sources: one source (or the sandboxes of one tenant)
// holds at most its share, so it cannot fill the set and leave the others SERVFAIL.
TEST_F(AgentEgress, ASourceHoldsAtMostItsShareOfMaxPairs) {
  MemorySets* sets = nullptr;
  AgentConfig config;
  config.max_pairs_per_source = 100;
  config.max_pairs = 8;
  auto agent = start_agent(&sets, config);
  for (const char* s : {"10.99.0.7", "10.99.0.8", "10.99.0.9", "10.99.0.10"}) {
    ASSERT_EQ(agent->handle(peer_, std::string("EGRESS ") + s + " ports=80 names=*.a.example"),
              "OK");
  }
  EXPECT_EQ(agent->handle(peer_, "PAIR 10.99.0.7 x.a.example 198.51.100.1,198.51.100.2 ttl=1"),
            "OK 2");
  std::string over = agent->handle(peer_, "PAIR 10.99.0.7 y.a.example 198.51.100.3 ttl=1");
  EXPECT_EQ(over.substr(0, 7), "ERR 413") << over;
  EXPECT_NE(over.find("share"), std::string::npos) << over;
  for (const char* s : {"10.99.0.8", "10.99.0.9", "10.99.0.10"}) {
    EXPECT_EQ(agent->handle(
                  peer_, std::string("PAIR ") + s + " x.a.example 198.51.100.1,198.51.100.2 ttl=1"),
              "OK 2")
        << s;
  }
  // A source that leaves allowlist mode frees its share for the others (8 / 3, rounded up).
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.10 off"), "OK");
  EXPECT_EQ(agent->handle(peer_, "PAIR 10.99.0.7 y.a.example 198.51.100.3 ttl=1"), "OK 1");
}

TEST_F(AgentEgress, ListsSurviveARestartAndPairsOfUnlistedSourcesAreDropped) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=a.example"), "OK");
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.8 ports=443 names=a.example"), "OK");
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.9 ports=443 names=b.example"), "OK");
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.9 ports=443,80 names=b.example"), "OK");
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.8 off"), "OK");
  ASSERT_EQ(agent->handle(peer_, "PAIR 10.99.0.7 a.example 198.51.100.1 ttl=60"), "OK 1");
  ASSERT_TRUE(agent->persist());
  // The kernel keeps its sets across the agent's restart; a stray pair of an unlisted source
  // appears meanwhile.
  auto kernel = std::make_unique<MemorySets>(*sets);
  agent.reset();
  Batch stray;
  stray.add(kPairs, {RawElement{pair_key({*Ipv4Address::parse("10.99.0.8"),
                                          *Ipv4Address::parse("198.51.100.1"), 443}),
                                60000}});
  ASSERT_TRUE(kernel->commit(stray));
  agent = start_agent(&sets, {}, std::move(kernel));
  EXPECT_EQ(agent->handle(peer_, "EGRESSES"),
            "OK 2 10.99.0.7=443/a.example 10.99.0.9=443,80/b.example");
  EXPECT_EQ(listed(*sets), (std::set<std::string>{"10.99.0.7", "10.99.0.9"}));
  EXPECT_EQ(pairs(*sets), (std::set<std::string>{"10.99.0.7>198.51.100.1:443"}));
  // Re-asserting the same list keeps the pair (its name is unknown after the restart) ...
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=a.example"), "OK");
  EXPECT_EQ(pairs(*sets).size(), 1u);
  // ... a narrowing change cuts it (fails closed).
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=c.example"), "OK");
  EXPECT_TRUE(pairs(*sets).empty());
  // An externally flushed egress_listed is drift and is re-applied.
  sets->flush_externally(kListed);
  agent->tick();
  EXPECT_EQ(listed(*sets), (std::set<std::string>{"10.99.0.7", "10.99.0.9"}));
}

// The resolver's egress log: kept per listed source, its last 256 lines, for EGRESSLOG; a
// source without a list keeps none, and switching its list off drops its log.
TEST_F(AgentEgress, KeepsTheResolversEgressLogPerListedSource) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=pypi.org,*.github.com"), "OK");
  std::string refused = "ELOG 10.99.0.7 files.pythonhosted.org refuse n=1234 at=5 entry=- to=-";
  std::string allowed =
      "ELOG 10.99.0.7 api.github.com allow n=2 at=5 entry=*.github.com "
      "to=140.82.121.6";
  EXPECT_EQ(agent->handle(resolver_, refused), "OK");
  EXPECT_EQ(agent->handle(resolver_, allowed), "OK");
  EXPECT_EQ(agent->handle(resolver_, "ELOG 10.99.0.8 a.org refuse n=1 at=5 entry=- to=-"), "OK");
  EXPECT_EQ(
      agent->handle(resolver_, "ELOG 10.99.0.7 a.org refuse n=0 at=5 entry=- to=-").substr(0, 7),
      "ERR 400");
  std::string log = agent->handle(peer_, "EGRESSLOG 10.99.0.7");
  EXPECT_EQ(log,
            "OK 2 files.pythonhosted.org/refuse/1234/5/-/- "
            "api.github.com/allow/2/5/*.github.com/140.82.121.6");
  auto parsed = proto::parse_egress_log_payload(*Ipv4Address::parse("10.99.0.7"), log.substr(3));
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ((*parsed)[0].count, 1234u);
  EXPECT_EQ(agent->handle(peer_, "EGRESSLOG 10.99.0.8"), "OK 0");  // no list: nothing kept
  for (int i = 0; i < 300; ++i) {
    ASSERT_EQ(agent->handle(resolver_, "ELOG 10.99.0.7 n" + std::to_string(i) +
                                           ".org refuse n=1 at=6 entry=- to=-"),
              "OK");
  }
  log = agent->handle(peer_, "EGRESSLOG 10.99.0.7");
  EXPECT_EQ(log.substr(0, 7), "OK 256 ");
  EXPECT_NE(log.find(" n299.org/"), std::string::npos);
  EXPECT_EQ(log.find(" n43.org/"), std::string::npos);  // the oldest went first
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 off"), "OK");
  EXPECT_EQ(agent->handle(peer_, "EGRESSLOG 10.99.0.7"), "OK 0");
}

TEST_F(AgentEgress, MergesTheWindowsFirstDecisionWithItsRestAndCountsDecisions) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=pypi.org"), "OK");
  for (const char* line : {"ELOG 10.99.0.7 b.org refuse n=1 at=7 entry=- to=-",
                           "ELOG 10.99.0.7 pypi.org allow n=1 at=7 entry=pypi.org to=1.2.3.4",
                           "ELOG 10.99.0.7 b.org refuse n=4 at=7 entry=- to=-",
                           "ELOG 10.99.0.7 pypi.org allow n=2 at=7 entry=pypi.org to=1.2.3.5",
                           "ELOG 10.99.0.7 b.org refuse n=1 at=8 entry=- to=-",
                           "ELOG 10.99.0.9 c.org refuse n=3 at=8 entry=- to=-"}) {
    ASSERT_EQ(agent->handle(resolver_, line), "OK") << line;
  }
  EXPECT_EQ(agent->handle(peer_, "EGRESSLOG 10.99.0.7"),
            "OK 3 b.org/refuse/5/7/-/- pypi.org/allow/3/7/pypi.org/1.2.3.5 b.org/refuse/1/8/-/-");
  auto status = proto::parse_status_payload(agent->handle(peer_, "STATUS").substr(3));
  ASSERT_TRUE(status);
  // Every decision the resolver reported counts, kept in the log or not (10.99.0.9 has no list).
  EXPECT_EQ(proto::find_field(*status, "egress_decisions_allowed"), "3");
  EXPECT_EQ(proto::find_field(*status, "egress_decisions_refused"), "9");
}

TEST_F(AgentEgress, ReportsRefusedConnectionsPerSourceBoundedAndCountsThem) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  EXPECT_EQ(agent->handle(peer_, "EGRESSREFUSED 10.99.0.7").substr(0, 7), "ERR 409");
  sets->declare(kRefused,
                {.has_timeout = true, .key_len = 16, .timeout_ms = kHourMs, .elements = {}});
  sets->declare(kRefusedLast,
                {.has_timeout = true, .key_len = 16, .timeout_ms = kHourMs, .elements = {}});
  EXPECT_EQ(agent->handle(peer_, "EGRESSREFUSED 10.99.0.7"), "OK 0");
  // 40 destinations of 10.99.0.7, the i-th first refused i + 1 s ago (count i + 1); one of
  // 10.99.0.8; the last refusal of port 1000 was 500 ms ago.
  for (std::uint16_t i = 0; i < 40; ++i)
    sets->put_externally(kRefused,
                         refused("10.99.0.7", "203.0.113.9", 1000 + i, i + 1, (i + 1) * 1000u));
  sets->put_externally(kRefused, refused("10.99.0.8", "203.0.113.9", 80, 7, 0));
  auto last = refused("10.99.0.7", "203.0.113.9", 1005, 0, 500);
  last.packets.reset();
  sets->put_externally(kRefusedLast, last);
  auto reply = agent->handle(peer_, "EGRESSREFUSED 10.99.0.7");
  ASSERT_EQ(reply.substr(0, 3), "OK ");
  auto items = proto::parse_egress_refused_payload(reply.substr(3));
  ASSERT_TRUE(items) << items.error().message;
  ASSERT_EQ(items->size(), proto::kMaxRefusedPerReply + 1);
  // The most recent last refusal first: port 1005 (500 ms ago), then 1000, 1001, ...
  EXPECT_EQ((*items)[0].port, 1005);
  EXPECT_EQ((*items)[0].count, 6u);
  EXPECT_GE((*items)[0].last_ms - (*items)[0].first_ms, 5000);
  EXPECT_EQ((*items)[1].port, 1000);
  EXPECT_EQ((*items)[1].first_ms, (*items)[1].last_ms);
  const auto& rest = items->back();
  EXPECT_TRUE(rest.others);
  EXPECT_EQ(rest.count, 33u + 34 + 35 + 36 + 37 + 38 + 39 + 40);  // ports 1032-1039
  EXPECT_EQ(agent->handle(peer_, "EGRESSREFUSED 10.99.0.8").substr(0, 23),
            "OK 1 203.0.113.9:80/tcp");
  // A source's others (destination 0.0.0.0: the ruleset's count of new destinations beyond
  // the source's bound) are in the rest item, after its destinations.
  sets->put_externally(kRefused, refused("10.99.0.8", "0.0.0.0", 0, 5, 2000));
  auto eight = proto::parse_egress_refused_payload(
      agent->handle(peer_, "EGRESSREFUSED 10.99.0.8").substr(3));
  ASSERT_TRUE(eight) << eight.error().message;
  ASSERT_EQ(eight->size(), 2u);
  EXPECT_EQ((*eight)[0].port, 80);
  EXPECT_FALSE((*eight)[0].others);
  EXPECT_TRUE((*eight)[1].others);
  EXPECT_EQ((*eight)[1].count, 5u);
  // STATUS adds what the counters grew by since they were last read; a re-created element
  // (its counter went down) counts whole.
  auto total = [&] {
    auto status = proto::parse_status_payload(agent->handle(peer_, "STATUS").substr(3));
    return std::string(proto::find_field(*status, "egress_connections_refused").value_or(""));
  };
  EXPECT_EQ(total(), std::to_string(40 * 41 / 2 + 7 + 5));
  sets->put_externally(kRefused, refused("10.99.0.8", "203.0.113.9", 80, 10, 0));
  EXPECT_EQ(total(), std::to_string(40 * 41 / 2 + 10 + 5));
  sets->put_externally(kRefused, refused("10.99.0.8", "203.0.113.9", 80, 2, 0));
  EXPECT_EQ(total(), std::to_string(40 * 41 / 2 + 12 + 5));
}

// #46: addresses are reused; what the ruleset recorded of one sandbox's refusals (and its spent
// bucket) goes with its list, and a new list of an unlisted address starts from nothing.
TEST_F(AgentEgress, RefusalsAndTheBucketGoWithTheList) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  for (const auto& set : {kRefused, kRefusedLast})
    sets->declare(set, {.has_timeout = true, .key_len = 16, .timeout_ms = kHourMs, .elements = {}});
  sets->declare(kRefusedRate,
                {.has_timeout = true, .key_len = 4, .timeout_ms = kHourMs, .elements = {}});
  auto record = [&](std::string_view source, std::uint16_t port, std::uint64_t packets) {
    sets->put_externally(kRefused, refused(source, "203.0.113.9", port, packets, 1000));
    auto last = refused(source, "203.0.113.9", port, 0, 0);
    last.packets.reset();
    sets->put_externally(kRefusedLast, last);
    sets->put_externally(kRefusedRate, {ipv4_key(*Ipv4Address::parse(source)), kHourMs, {}});
  };
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=80 names=pypi.org"), "OK");
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.8 ports=80 names=pypi.org"), "OK");
  record("10.99.0.7", 22, 3);
  record("10.99.0.7", 25, 2);
  record("10.99.0.8", 22, 4);
  EXPECT_EQ(agent->handle(peer_, "EGRESSREFUSED 10.99.0.7").substr(0, 5), "OK 2 ");

  // The list goes: so do the source's elements in all three sets; the other source keeps its.
  EXPECT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 off"), "OK");
  std::multiset<std::string> eight{"10.99.0.8"};
  EXPECT_EQ(sources_in(*sets, kRefused), eight);
  EXPECT_EQ(sources_in(*sets, kRefusedLast), eight);
  EXPECT_EQ(sources_in(*sets, kRefusedRate), eight);
  EXPECT_EQ(agent->handle(peer_, "EGRESSREFUSED 10.99.0.8").substr(0, 5), "OK 1 ");
  // The next sandbox on the address reads nothing of the last one.
  EXPECT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=example.org"), "OK");
  EXPECT_EQ(agent->handle(peer_, "EGRESSREFUSED 10.99.0.7"), "OK 0");
  // STATUS' total still has what the cleared elements counted.
  auto status = proto::parse_status_payload(agent->handle(peer_, "STATUS").substr(3));
  ASSERT_TRUE(status);
  EXPECT_EQ(proto::find_field(*status, "egress_connections_refused"), "9");

  // Left behind while unlisted (a clear that failed, a restart): a new list clears them
  // before it lists the source.
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.9 off"), "OK");
  record("10.99.0.9", 22, 5);
  EXPECT_EQ(agent->handle(peer_, "EGRESS 10.99.0.9 ports=80 names=pypi.org"), "OK");
  EXPECT_EQ(agent->handle(peer_, "EGRESSREFUSED 10.99.0.9"), "OK 0");
  EXPECT_EQ(sources_in(*sets, kRefusedRate), eight);
  // A clear the kernel refuses does not hold up the list (the controller's guard remains).
  ASSERT_EQ(agent->handle(peer_, "EGRESS 10.99.0.10 off"), "OK");
  record("10.99.0.10", 22, 1);
  sets->fail_next_commit(ErrorCode::kTooLarge, "set is full");
  EXPECT_EQ(agent->handle(peer_, "EGRESS 10.99.0.10 ports=80 names=pypi.org"), "OK");
  EXPECT_EQ(listed(*sets).count("10.99.0.10"), 1u);
  // A changed list is the same sandbox: its refusals stay.
  record("10.99.0.9", 25, 1);
  EXPECT_EQ(agent->handle(peer_, "EGRESS 10.99.0.9 ports=80,443 names=pypi.org"), "OK");
  EXPECT_EQ(agent->handle(peer_, "EGRESSREFUSED 10.99.0.9").substr(0, 5), "OK 1 ");
}

TEST_F(AgentEgress, MissingSetsAreAConflict) {
  auto sets = std::make_unique<MemorySets>();
  sets->declare(kAllowed, {});
  MemorySets* raw = nullptr;
  auto agent = start_agent(&raw, {}, std::move(sets));
  EXPECT_EQ(agent->handle(peer_, "EGRESS 10.99.0.7 ports=443 names=a.example").substr(0, 7),
            "ERR 409");
  EXPECT_TRUE(agent->desired().egress.empty());
}

}  // namespace
}  // namespace pvs::agent
