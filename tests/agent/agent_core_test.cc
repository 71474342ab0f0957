// The netlink backend and the Agent logic against the real kernel, in a namespace per test.
// These run in-process: the test thread enters the namespace while the netlink socket opens.
#include <netinet/in.h>  // glibc's in.h before the kernel's (linux/netfilter.h includes it)

#include <linux/netfilter.h>

#include <chrono>
#include <set>

#include <map>

#include <gtest/gtest.h>

#include "agent.h"
#include "agent/agent_test_util.h"
#include "nft_backend.h"

namespace pvs::agent {
namespace {

using test::EnterNs;
using test::NetNs;
using test::TempDir;

const SetRef kCoreAllowed{NFPROTO_INET, "sandbox", "internet_allowed"};
const SetRef kPlain{NFPROTO_INET, "sandbox", "plain"};

Ipv4Address ip(const char* text) {
  return *Ipv4Address::parse(text);
}

std::set<Ipv4Address> addresses(NftBackend& backend, const SetRef& set) {
  auto list = backend.list(set);
  EXPECT_TRUE(list.has_value()) << (list ? "" : list.error().message);
  std::set<Ipv4Address> out;
  if (list) {
    for (const auto& e : *list) out.insert(*decode_ipv4_key(e.key));
  }
  return out;
}

class BackendTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ns_.load_contract();
    EnterNs enter(ns_);
    NftBackend::Options options;
    options.use_destroy = GetParam();
    auto opened = NftBackend::open(options);
    ASSERT_TRUE(opened) << opened.error().message;
    backend_ = std::move(*opened);
  }
  NetNs ns_;
  std::unique_ptr<NftBackend> backend_;
};

TEST(BackendProbe, DetectsDestroyOnThisKernel) {
  NetNs ns;
  EnterNs enter(ns);
  auto backend = NftBackend::open();
  ASSERT_TRUE(backend) << backend.error().message;
  // The CI kernel is 6.18: NFT_MSG_DESTROYSETELEM exists (>= 6.3).
  EXPECT_TRUE((*backend)->destroy_supported());
}

TEST_P(BackendTest, AddListDestroyFlush) {
  Batch add;
  add.add(kCoreAllowed,
          {{ipv4_key(ip("10.99.0.5")), std::nullopt}, {ipv4_key(ip("10.99.0.6")), 60000}});
  ASSERT_TRUE(backend_->commit(add));
  auto list = backend_->list(kCoreAllowed);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  for (const auto& e : *list) {
    if (*decode_ipv4_key(e.key) == ip("10.99.0.6")) {
      ASSERT_TRUE(e.expires_in_ms);
      EXPECT_GT(*e.expires_in_ms, 55000u);
    } else {
      EXPECT_FALSE(e.expires_in_ms);
    }
  }
  // Destroying a present and an absent element in one batch succeeds.
  Batch destroy;
  destroy.destroy(kCoreAllowed, {{ipv4_key(ip("10.99.0.5")), std::nullopt},
                                 {ipv4_key(ip("10.99.0.77")), std::nullopt}});
  ASSERT_TRUE(backend_->commit(destroy));
  EXPECT_EQ(addresses(*backend_, kCoreAllowed), std::set<Ipv4Address>{ip("10.99.0.6")});
  Batch flush;
  flush.flush(kCoreAllowed);
  ASSERT_TRUE(backend_->commit(flush));
  EXPECT_TRUE(addresses(*backend_, kCoreAllowed).empty());
  EXPECT_EQ(ns_.output("nft list set inet sandbox internet_allowed").find("elements"),
            std::string::npos);
}

TEST_P(BackendTest, DestroyPlusAddRefreshesTheLease) {
  Batch first;
  first.add(kCoreAllowed, {{ipv4_key(ip("10.99.0.8")), 5000}});
  ASSERT_TRUE(backend_->commit(first));
  Batch refresh;
  refresh.destroy(kCoreAllowed, {{ipv4_key(ip("10.99.0.8")), std::nullopt}});
  refresh.add(kCoreAllowed, {{ipv4_key(ip("10.99.0.8")), 900000}});
  ASSERT_TRUE(backend_->commit(refresh));
  auto list = backend_->list(kCoreAllowed);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 1u);
  ASSERT_TRUE((*list)[0].expires_in_ms);
  EXPECT_GT(*(*list)[0].expires_in_ms, 800000u);
}

TEST_P(BackendTest, FailedMessageAbortsTheWholeBatch) {
  Batch batch;
  batch.add(kCoreAllowed, {{ipv4_key(ip("10.99.0.9")), std::nullopt}});
  batch.add(SetRef{NFPROTO_INET, "sandbox", "no_such_set"},
            {{ipv4_key(ip("10.99.0.10")), std::nullopt}});
  auto result = backend_->commit(batch);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::kNotFound) << result.error().message;
  // The good message was acknowledged, but nothing was committed.
  EXPECT_TRUE(addresses(*backend_, kCoreAllowed).empty());
  EXPECT_EQ(backend_->stats().failed_batches, 1u);
  // And the socket is in a clean state for the next request.
  Batch ok;
  ok.add(kCoreAllowed, {{ipv4_key(ip("10.99.0.9")), std::nullopt}});
  EXPECT_TRUE(backend_->commit(ok));
}

TEST_P(BackendTest, TimeoutOnASetWithoutTimeoutsIsRejected) {
  Batch batch;
  batch.add(kPlain, {{ipv4_key(ip("10.99.0.9")), 1000}});
  auto result = backend_->commit(batch);
  ASSERT_FALSE(result);
  EXPECT_TRUE(addresses(*backend_, kPlain).empty());
}

TEST_P(BackendTest, InfoAndGeneration) {
  auto info = backend_->info(kCoreAllowed);
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->table_present && info->set_present && info->has_timeout);
  EXPECT_EQ(info->key_len, 4u);
  auto plain = backend_->info(kPlain);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->has_timeout);
  auto missing = backend_->info(SetRef{NFPROTO_INET, "nope", "x"});
  ASSERT_TRUE(missing);
  EXPECT_FALSE(missing->table_present);
  auto gen1 = backend_->generation();
  ASSERT_TRUE(gen1);
  ns_.run("nft add element inet sandbox plain { 10.99.3.3 }");
  auto gen2 = backend_->generation();
  ASSERT_TRUE(gen2);
  EXPECT_NE(*gen1, *gen2);
}

TEST_P(BackendTest, BridgeKeysMatchWhatNftWrites) {
  ns_.run("nft add element bridge sandbox_l2 port_mac { \"veth100i0\" . bc:24:11:2a:3b:4c }");
  ns_.run("nft add element bridge sandbox_l2 port_ip4 { \"veth100i0\" . 10.99.0.7 }");
  auto macs = backend_->list(SetRef{NFPROTO_BRIDGE, "sandbox_l2", "port_mac"});
  ASSERT_TRUE(macs);
  ASSERT_EQ(macs->size(), 1u);
  auto mac = *MacAddress::parse("bc:24:11:2a:3b:4c");
  EXPECT_EQ((*macs)[0].key, port_mac_key("veth100i0", mac));
  auto ips = backend_->list(SetRef{NFPROTO_BRIDGE, "sandbox_l2", "port_ip4"});
  ASSERT_TRUE(ips);
  ASSERT_EQ(ips->size(), 1u);
  EXPECT_EQ((*ips)[0].key, port_ip4_key("veth100i0", ip("10.99.0.7")));
}

TEST_P(BackendTest, TenThousandElementReplaceIsOneAtomicBatch) {
  std::vector<RawElement> elements;
  for (std::uint32_t i = 0; i < 10000; ++i) {
    elements.push_back({ipv4_key(Ipv4Address(0x0a630000u + 2 + i)), 3600000});
  }
  Batch batch;
  batch.flush(kCoreAllowed);
  batch.add(kCoreAllowed, elements);
  auto before = backend_->stats().messages;
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(backend_->commit(batch));
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
  std::printf("10,000-element replace: %.2f ms, %llu messages\n", ms.count(),
              static_cast<unsigned long long>(backend_->stats().messages - before));
  EXPECT_GT(backend_->stats().messages - before, 2u);  // split across messages
  EXPECT_EQ(addresses(*backend_, kCoreAllowed).size(), 10000u);
}

INSTANTIATE_TEST_SUITE_P(DestroyModes, BackendTest, ::testing::Values(true, false),
                         [](const auto& p) { return p.param ? "native" : "emulated"; });

// ---- Agent logic, in-process -----------------------------------------------------------------

class AgentCoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ns_.load_contract(); }
  std::unique_ptr<Agent> make_agent(const std::string& set = "internet_allowed") {
    AgentConfig config;
    config.sandbox_cidr = *Cidr::parse("10.99.0.0/16");
    config.gateway = ip("10.99.0.1");
    config.set = set;
    config.state_file = dir_.file("state");
    config.state_fsync = false;
    EnterNs enter(ns_);
    auto backend = NftBackend::open();
    EXPECT_TRUE(backend);
    auto agent = std::make_unique<Agent>(config, std::move(*backend));
    auto started = agent->start();
    EXPECT_TRUE(started) << (started ? "" : started.error().message);
    return agent;
  }
  NetNs ns_;
  TempDir dir_;
  Peer peer_{1, 0, 0};
};

TEST_F(AgentCoreTest, TtlOnASetWithoutTimeoutsIsAClearError) {
  auto agent = make_agent("plain");
  EXPECT_EQ(agent->handle(peer_, "ALLOW 10.99.0.5"), "OK");
  std::string reply = agent->handle(peer_, "ALLOW 10.99.0.6 ttl=60");
  EXPECT_TRUE(reply.starts_with("ERR 400 ttl not supported")) << reply;
  EXPECT_EQ(agent->handle(peer_, "LIST"), "OK 1 10.99.0.5");
}

TEST_F(AgentCoreTest, SyncOfTenThousandThroughTheVerbCode) {
  auto agent = make_agent();
  proto::SyncRequest sync;
  for (std::uint32_t i = 0; i < 10000; ++i) {
    sync.grants.push_back({Ipv4Address(0x0a630000u + 2 + i), std::nullopt});
  }
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(agent->handle(peer_, proto::Request(sync)), "OK 10000");
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
  std::printf("SYNC 10,000 through Agent::handle: %.2f ms\n", ms.count());
  EXPECT_EQ(agent->desired().grants.size(), 10000u);
  std::string list = agent->handle(peer_, "LIST");
  EXPECT_TRUE(list.starts_with("OK 10000 10.99.0.2 10.99.0.3 ")) << list.substr(0, 80);
}

// SYNC reuses the old map's nodes for the new grants: whatever the sizes, order and duplicates,
// the desired state is exactly the request (the first of duplicates wins), in order.
TEST_F(AgentCoreTest, SyncDesiredStateIsExactlyTheRequest) {
  auto agent = make_agent();
  auto addr = [](std::uint32_t i) { return Ipv4Address(0x0a630000u + 2 + i); };
  for (std::uint32_t size : {5u, 300u, 2u, 0u, 40u}) {
    proto::SyncRequest sync;
    std::map<Ipv4Address, bool> expected;  // address -> has a lease
    for (std::uint32_t i = 0; i < size; ++i) {
      std::uint32_t k = (i * 7919u + size) % 1000u;  // unsorted
      std::optional<std::uint32_t> ttl;
      if (k % 3 == 0) ttl = 600;
      sync.grants.push_back({addr(k), ttl});
      expected.emplace(addr(k), ttl.has_value());
      sync.grants.push_back({addr(k), std::nullopt});  // a duplicate: the first one counts
    }
    EXPECT_EQ(agent->handle(peer_, proto::Request(sync)),
              "OK " + std::to_string(sync.grants.size()));
    const auto& grants = agent->desired().grants;
    ASSERT_EQ(grants.size(), expected.size());
    auto it = grants.begin();
    for (const auto& [address, leased] : expected) {
      EXPECT_EQ(it->first, address);
      EXPECT_EQ(it->second.has_value(), leased) << address.to_string();
      ++it;
    }
  }
}

TEST_F(AgentCoreTest, MaxElementsIsEnforced) {
  auto agent = make_agent();
  proto::SyncRequest sync;
  for (std::uint32_t i = 0; i < 65537; ++i) {
    sync.grants.push_back({Ipv4Address(0x0a630000u + 2 + i), std::nullopt});
  }
  std::string reply = agent->handle(peer_, proto::Request(sync));
  EXPECT_TRUE(reply.starts_with("ERR 413")) << reply;
}

TEST_F(AgentCoreTest, FirstStartAdoptsTheKernelsElements) {
  ns_.run(
      "nft add element inet sandbox internet_allowed { 10.99.4.4, 10.99.4.5 timeout 1h, "
      "10.99.0.1, 192.168.1.1 }");
  auto agent = make_agent();
  EXPECT_EQ(agent->desired().grants.size(), 2u);
  // The gateway and the outside address are not adopted, and are gone from the kernel.
  std::string list = agent->handle(peer_, "LIST");
  EXPECT_TRUE(list.starts_with("OK 2 10.99.4.4 10.99.4.5@")) << list;
  auto state = load_state(dir_.file("state"));
  ASSERT_TRUE(state && *state);
  EXPECT_EQ((*state)->grants.size(), 2u);
}

}  // namespace
}  // namespace pvs::agent
