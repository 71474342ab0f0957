// The agent's logic (policy, verbs, desired state, drift, restart) against an in-memory
// SetBackend: no root, no namespace. The same behaviour against the real kernel is in
// agent_core_test.cc and agent_server_test.cc.
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

const SetRef kLogicAllowed{NFPROTO_INET, "sandbox", "internet_allowed"};
const SetRef kLogicPortMac{NFPROTO_BRIDGE, "sandbox_l2", "port_mac"};
const SetRef kLogicPortIp4{NFPROTO_BRIDGE, "sandbox_l2", "port_ip4"};

std::set<std::string> granted(const MemorySets& sets) {
  std::set<std::string> out;
  for (const auto& e : sets.find(kLogicAllowed)->elements)
    out.insert(decode_ipv4_key(e.key)->to_string());
  return out;
}

class AgentLogic : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/pvs-agent-logic-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // A fresh "kernel" with the contract's sets, and an agent on it reading dir_'s state file.
  std::unique_ptr<Agent> start_agent(MemorySets** sets_out) {
    auto sets = std::make_unique<MemorySets>();
    sets->declare(kLogicAllowed, {});
    sets->declare(kLogicPortMac, {.has_timeout = false, .key_len = 24, .elements = {}});
    sets->declare(kLogicPortIp4, {.has_timeout = false, .key_len = 20, .elements = {}});
    *sets_out = sets.get();
    AgentConfig config;
    config.sandbox_cidr = *Cidr::parse("10.99.0.0/16");
    config.gateway = *Ipv4Address::parse("10.99.0.1");
    config.state_file = dir_ + "/agent-state";
    auto agent = std::make_unique<Agent>(config, std::move(sets));
    auto started = agent->start();
    EXPECT_TRUE(started) << started.error().message;
    return agent;
  }
  std::string dir_;
  Peer peer_{1, 0, 0};
};

TEST_F(AgentLogic, AllowRevokeAndPolicyRefusalsChangeOnlyWhatTheyMay) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  EXPECT_EQ(agent->handle(peer_, "ALLOW 10.99.0.5"), "OK");
  EXPECT_EQ(agent->handle(peer_, "ALLOW 10.99.0.6 ttl=60"), "OK");
  EXPECT_EQ(granted(*sets), (std::set<std::string>{"10.99.0.5", "10.99.0.6"}));
  EXPECT_EQ(agent->handle(peer_, "REVOKE 10.99.0.5"), "OK");
  EXPECT_EQ(granted(*sets), (std::set<std::string>{"10.99.0.6"}));
  // The gateway and addresses outside sandbox_cidr are refused before the kernel is touched.
  std::size_t commits = sets->commits();
  EXPECT_EQ(agent->handle(peer_, "ALLOW 10.99.0.1").substr(0, 7), "ERR 403");
  EXPECT_EQ(agent->handle(peer_, "ALLOW 192.168.1.1").substr(0, 7), "ERR 403");
  EXPECT_EQ(sets->commits(), commits);
}

TEST_F(AgentLogic, AFailedCommitIsAnErrorAndNotPartOfTheDesiredState) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  sets->fail_next_commit(ErrorCode::kIo, "netlink send: No buffer space available");
  EXPECT_EQ(agent->handle(peer_, "ALLOW 10.99.0.5").substr(0, 4), "ERR ");
  EXPECT_FALSE(agent->desired().grants.contains(*Ipv4Address::parse("10.99.0.5")));
  EXPECT_TRUE(granted(*sets).empty());
}

TEST_F(AgentLogic, DriftIsRepairedAtTheNextTick) {
  MemorySets* sets = nullptr;
  auto agent = start_agent(&sets);
  ASSERT_EQ(agent->handle(peer_, "ALLOW 10.99.0.5"), "OK");
  agent->tick();  // records the verified generation
  auto before = agent->reapply_count();
  sets->flush_externally(kLogicAllowed);  // someone ran `nft flush set`
  agent->tick();
  EXPECT_EQ(agent->reapply_count(), before + 1);
  EXPECT_EQ(granted(*sets), (std::set<std::string>{"10.99.0.5"}));
}

TEST_F(AgentLogic, ARestartReappliesTheSavedStateToAnEmptyKernel) {
  {
    MemorySets* sets = nullptr;
    auto agent = start_agent(&sets);
    ASSERT_EQ(agent->handle(peer_, "ALLOW 10.99.0.5"), "OK");
    ASSERT_EQ(agent->handle(peer_, "ALLOW 10.99.0.7"), "OK");
    ASSERT_EQ(agent->handle(peer_, "REVOKE 10.99.0.7"), "OK");
    ASSERT_TRUE(agent->persist());
  }
  MemorySets* fresh = nullptr;
  auto agent = start_agent(&fresh);
  EXPECT_EQ(granted(*fresh), (std::set<std::string>{"10.99.0.5"}));
}

}  // namespace
}  // namespace pvs::agent
