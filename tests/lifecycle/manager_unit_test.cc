// The Manager's logic over in-memory peers (fake_peers.h): rollback, the quarantine and
// reconcile, without root, namespaces or a Proxmox simulator.
#include <gtest/gtest.h>

#include "fake_peers.h"
#include "manager_testing.h"

namespace pvs {
namespace {

class ManagerUnitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ManagerConfig c;
    c.node = "pve";
    c.template_vmid = 9000;
    c.vmid_min = 100;
    c.vmid_max = 199;
    c.sandbox_cidr = *Cidr::parse("10.99.0.0/24");
    c.gateway = *Ipv4Address::parse("10.99.0.1");
    c.wait_for_ssh = false;
    c.background = false;
    lifecycle::TestPeers peers;
    auto pve = std::make_unique<test::FakeProxmox>(c.template_vmid);
    auto agent = std::make_unique<test::FakeAgent>();
    pve_ = pve.get();
    agent_ = agent.get();
    peers.proxmox = std::move(pve);
    peers.agent = std::move(agent);
    auto m = lifecycle::open_manager(c, std::move(peers));
    ASSERT_TRUE(m) << m.error().message;
    m_ = std::move(*m);
  }

  std::string address_of(const std::shared_ptr<Sandbox>& sb) {
    return sb->info().address->to_string();
  }

  std::unique_ptr<Manager> m_;
  test::FakeProxmox* pve_ = nullptr;  // owned by m_
  test::FakeAgent* agent_ = nullptr;
};

TEST_F(ManagerUnitTest, CreateGrantsAndDestroyLeavesNothing) {
  CreateOptions o;
  o.internet = true;
  auto sb = m_->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ(pve_->containers().size(), 1u);
  EXPECT_EQ(agent_->set().size(), 1u);
  ASSERT_TRUE((*sb)->destroy());
  EXPECT_TRUE(pve_->containers().empty());
  EXPECT_TRUE(agent_->set().empty());
  EXPECT_EQ(m_->stats().live, 0u);
}

TEST_F(ManagerUnitTest, AFailedStartRollsBackAndFreesTheAddress) {
  pve_->fail_start = true;
  auto failed = m_->create({});
  ASSERT_FALSE(failed);
  EXPECT_TRUE(pve_->containers().empty());
  EXPECT_EQ(pve_->calls("destroy"), 1);
  pve_->fail_start = false;
  auto sb = m_->create({});
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ(address_of(*sb), "10.99.0.2");  // the rolled-back address is free again
}

// An ALLOW that failed and a REVOKE that failed too: the agent may hold the address, so it is
// quarantined in the address pool (the next create gets another one) until a SYNC proves the
// set no longer has it.
TEST_F(ManagerUnitTest, AFailedAllowWhoseRevokeFailsQuarantinesTheAddressUntilASync) {
  agent_->fail_allow = agent_->fail_revoke = true;
  CreateOptions o;
  o.internet = true;
  ASSERT_FALSE(m_->create(o));
  EXPECT_EQ(m_->stats().quarantined_addresses, 1u);
  agent_->fail_allow = agent_->fail_revoke = false;
  auto next = m_->create({});
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(address_of(*next), "10.99.0.3");
  ASSERT_TRUE(m_->reconcile());
  EXPECT_EQ(m_->stats().quarantined_addresses, 0u);
  auto again = m_->create({});
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(address_of(*again), "10.99.0.2");
}

TEST_F(ManagerUnitTest, ReconcileGrantsAgainWhatTheAgentLost) {
  CreateOptions o;
  o.internet = true;
  auto sb = m_->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  ASSERT_TRUE(agent_->sync({}));  // the agent restarted with an empty set
  EXPECT_TRUE(agent_->set().empty());
  ASSERT_TRUE(m_->reconcile());
  EXPECT_EQ(agent_->set().size(), 1u);
  EXPECT_EQ(agent_->set().begin()->to_string(), address_of(*sb));
}

TEST_F(ManagerUnitTest, DiskSmallerThanTheTemplateNeverClones) {
  CreateOptions o;
  o.disk_gb = 2;
  auto r = m_->create(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(pve_->calls("clone"), 0);
}

}  // namespace
}  // namespace pvs
