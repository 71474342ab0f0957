// The Manager over a cluster of in-memory nodes (fake_peers.h): placement (spread, pinned,
// selector, capacity, drain), a node offline before and during a create, an agent down on one
// node, templates on shared storage, recovery across nodes after a restart, and the config
// checks. The same behaviours against pvesim's multi-node cluster with real agents are in the
// netns tests.
#include <gtest/gtest.h>

#include "fake_peers.h"
#include "manager_testing.h"
#include "shared_peers.h"

namespace pvs {
namespace {

const std::vector<std::string> kNodes = {"pve1", "pve2", "pve3"};

class ClusterUnitTest : public ::testing::Test {
 protected:
  ClusterUnitTest() : pve_(9001) {
    // A template per node on local storage; 9000 on shared storage, on pve1.
    pve_.add_template("pve1", 9000, "8G", true);
    for (std::size_t i = 0; i < kNodes.size(); ++i) {
      pve_.add_template(kNodes[i], 9001 + static_cast<int>(i));
      NodeConfig n;
      n.name = kNodes[i];
      n.sandbox_cidr = *Cidr::parse("10.9" + std::to_string(i) + ".0.0/24");
      n.gateway = *Ipv4Address::parse("10.9" + std::to_string(i) + ".0.1");
      n.template_vmid = 9001 + static_cast<int>(i);
      config_.nodes.push_back(n);
    }
    config_.template_vmid = 9000;
    config_.vmid_min = 100;
    config_.vmid_max = 199;
    config_.wait_for_ssh = false;
    config_.background = false;
  }

  void open() {
    m_.reset();
    lifecycle::TestPeers peers;
    peers.proxmox = std::make_unique<test::SharedProxmox>(&pve_);
    for (std::size_t i = 0; i < kNodes.size(); ++i)
      peers.agents[kNodes[i]] = std::make_unique<test::SharedAgent>(&agents_[i]);
    peers.fault_hook = [this](std::string_view step) { return hook ? hook(step) : Status{}; };
    auto m = lifecycle::open_manager(config_, std::move(peers));
    ASSERT_TRUE(m) << m.error().message;
    m_ = std::move(*m);
  }

  Result<std::shared_ptr<Sandbox>> create(std::string node = "", Labels selector = {}) {
    CreateOptions o;
    o.node = std::move(node);
    o.node_selector = std::move(selector);
    o.internet = true;
    return m_->create(o);
  }

  std::map<std::string, int> per_node() {
    std::map<std::string, int> out;
    for (auto& [vmid, c] : pve_.containers()) ++out[pve_.node_of(vmid)];
    return out;
  }

  test::FakeProxmox pve_;
  test::FakeAgent agents_[3];
  ManagerConfig config_;
  std::function<Status(std::string_view)> hook;
  std::unique_ptr<Manager> m_;
};

TEST_F(ClusterUnitTest, CreatesSpreadAndEachNodeHoldsItsOwn) {
  open();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(create()) << i;
  EXPECT_EQ(per_node(), (std::map<std::string, int>{{"pve1", 2}, {"pve2", 2}, {"pve3", 2}}));
  for (auto& info : m_->list()) {
    int i = info.node == "pve1" ? 0 : info.node == "pve2" ? 1 : 2;
    EXPECT_TRUE(config_.nodes[i].sandbox_cidr.contains(*info.address)) << info.node;
    EXPECT_TRUE(agents_[i].set().count(*info.address)) << info.node;
    EXPECT_EQ(pve_.node_of(info.vmid), info.node);
  }
  auto nodes = m_->nodes();
  ASSERT_EQ(nodes.size(), 3u);
  for (auto& n : nodes) {
    EXPECT_TRUE(n.online && n.agent_ok && !n.drained) << n.name;
    EXPECT_EQ(n.sandboxes, 2) << n.name;
    EXPECT_EQ(n.mem_total, 64ull << 30);
  }
}

TEST_F(ClusterUnitTest, PinnedSelectorAndCapacity) {
  config_.nodes[2].labels = {{"gpu", "yes"}};
  config_.nodes[1].max_sandboxes = 1;
  open();
  auto pinned = create("pve2");
  ASSERT_TRUE(pinned) << pinned.error().message;
  EXPECT_EQ((*pinned)->info().node, "pve2");
  auto full = create("pve2");
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(full.error().message.find("pve2: full (1 of 1 sandboxes)"), std::string::npos)
      << full.error().message;
  auto unknown = create("pve9");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) {
    auto gpu = create("", {{"gpu", "yes"}});
    ASSERT_TRUE(gpu) << gpu.error().message;
    EXPECT_EQ((*gpu)->info().node, "pve3");
  }
  auto none = create("", {{"gpu", "no"}});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(none.error().message.find("pve1: label gpu=no missing"), std::string::npos);
}

TEST_F(ClusterUnitTest, AnOfflineNodeGetsNoCreatesAndItsSandboxesAreKept) {
  open();
  auto on2 = create("pve2");
  ASSERT_TRUE(on2) << on2.error().message;
  pve_.set_offline("pve2", true);
  EXPECT_FALSE(m_->reconcile());  // says which node is down
  auto listed = m_->list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].status, "unreachable");
  for (int i = 0; i < 4; ++i) {
    auto sb = create();
    ASSERT_TRUE(sb) << sb.error().message;
    EXPECT_NE((*sb)->info().node, "pve2");
  }
  auto pinned = create("pve2");
  ASSERT_FALSE(pinned);
  EXPECT_NE(pinned.error().message.find("pve2: offline"), std::string::npos);
  auto n2 = m_->nodes()[1];
  EXPECT_FALSE(n2.online);
  EXPECT_FALSE(n2.error.empty());
  pve_.set_offline("pve2", false);
  ASSERT_TRUE(m_->reconcile());
  EXPECT_EQ((*on2)->info().status, "running");
  EXPECT_TRUE(m_->nodes()[1].online);
  EXPECT_EQ(per_node()["pve2"], 1);
}

// The node goes away between the configure and the start: the rollback cannot destroy the
// clone, which keeps its address until the node is back and the reconciler destroyed it.
TEST_F(ClusterUnitTest, ANodeLostMidCreateLeavesNothingOnceItIsBack) {
  open();
  hook = [this](std::string_view step) {
    if (step == "start") pve_.set_offline("pve2", true);
    return Status{};
  };
  auto failed = create("pve2");
  ASSERT_FALSE(failed);
  hook = nullptr;
  EXPECT_EQ(per_node()["pve2"], 1);  // left behind, phase "creating"
  EXPECT_EQ(m_->list().size(), 0u);
  pve_.set_offline("pve2", false);
  EXPECT_TRUE(m_->reconcile());
  EXPECT_EQ(per_node()["pve2"], 0);
  EXPECT_TRUE(agents_[1].set().empty());
  auto again = create("pve2");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ((*again)->info().address->to_string(), "10.91.0.2");  // its address is free again
}

TEST_F(ClusterUnitTest, AnAgentDownTakesItsNodeOutAndReconcileRepairsIt) {
  open();
  auto on2 = create("pve2");
  ASSERT_TRUE(on2) << on2.error().message;
  agents_[1].down = true;
  EXPECT_FALSE(m_->reconcile());
  EXPECT_FALSE(m_->nodes()[1].agent_ok);
  EXPECT_FALSE(m_->health().agent_ok);
  for (int i = 0; i < 3; ++i) EXPECT_NE((*create())->info().node, "pve2");
  auto off = (*on2)->set_internet(false);
  ASSERT_FALSE(off);
  EXPECT_EQ(off.error().code, ErrorCode::kUnavailable);
  agents_[1].down = false;
  ASSERT_TRUE(m_->reconcile());
  EXPECT_TRUE(m_->nodes()[1].agent_ok);
  EXPECT_TRUE(agents_[1].set().empty());  // the failed revoke was not lost
}

TEST_F(ClusterUnitTest, DrainedNodesGetNothingNew) {
  open();
  ASSERT_TRUE(m_->drain("pve1", true));
  ASSERT_TRUE(m_->drain("pve3", true));
  EXPECT_EQ(m_->drain("nope", true).error().code, ErrorCode::kNotFound);
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*create())->info().node, "pve2");
  EXPECT_TRUE(m_->nodes()[0].drained);
  ASSERT_TRUE(m_->drain("pve1", false));
  EXPECT_EQ((*create())->info().node, "pve1");
}

TEST_F(ClusterUnitTest, ASharedTemplateIsClonedWithTargetALocalOneIsRefused) {
  config_.nodes[1].template_vmid = 0;     // the shared 9000 on pve1
  config_.nodes[2].template_vmid = 9001;  // pve1's local template: Proxmox refuses the target
  open();
  auto shared = create("pve2");
  ASSERT_TRUE(shared) << shared.error().message;
  EXPECT_EQ(pve_.node_of((*shared)->info().vmid), "pve2");
  auto local = create("pve3");
  ASSERT_FALSE(local);
  EXPECT_NE(local.error().message.find("local storage"), std::string::npos);
  EXPECT_EQ(per_node()["pve3"], 0);
}

TEST_F(ClusterUnitTest, ARestartRecoversEveryNode) {
  open();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(create());
  auto before = m_->list();
  open();
  auto after = m_->list();
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].id, before[i].id);
    EXPECT_EQ(after[i].node, before[i].node);
    EXPECT_EQ(after[i].address, before[i].address);
  }
  // A node offline at start: the controller starts, that node's sandboxes wait for it.
  pve_.set_offline("pve3", true);
  open();
  EXPECT_FALSE(m_->nodes()[2].online);
  pve_.set_offline("pve3", false);
  ASSERT_TRUE(m_->reconcile());
  EXPECT_EQ(m_->list().size(), before.size());
}

TEST_F(ClusterUnitTest, OverlappingNetworksAndDuplicateNamesAreRefused) {
  auto c = config_;
  c.nodes[2].sandbox_cidr = *Cidr::parse("10.91.0.128/25");
  auto r = cluster_nodes(c);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("pve2 (10.91.0.0/24) and pve3 (10.91.0.128/25) overlap"),
            std::string::npos)
      << r.error().message;
  c = config_;
  c.nodes[2].name = "pve1";
  EXPECT_FALSE(cluster_nodes(c));
  c = config_;
  c.nodes.clear();
  c.node = "pve";
  auto single = cluster_nodes(c);
  ASSERT_TRUE(single) << single.error().message;
  EXPECT_EQ((*single)[0].template_vmid, 9000);
}

}  // namespace
}  // namespace pvs
