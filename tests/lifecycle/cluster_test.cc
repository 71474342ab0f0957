// The Manager on a simulated three-node cluster with real parts per node: its own namespace,
// bridge, hardened ruleset (SSH allowed only from the controller's address) and agent; real
// sshds in the sandboxes, reached from the controller's namespace through each node's forward
// chain. Placement, an agent down, a node offline, drain, restart recovery, and a SIGKILL
// storm across nodes (model backend) that must leave Proxmox == live sandboxes per node and
// each agent's set == its node's sandboxes with internet.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "sim.h"
#include "support/stack_fixture.h"

namespace pvs {
namespace {

int node_index(const std::string& name) {
  return std::stoi(name.substr(3));  // "pve2" -> 2
}

TEST(ClusterE2eTest, SandboxesOnThreeNodesEachBehindItsOwnAgentAndRuleset) {
  test::StackOptions so;
  so.nodes = 3;
  test::Stack stack(so);
  auto c = stack.manager_config();
  auto m = Manager::open(c);
  ASSERT_TRUE(m) << m.error().message;

  // Spread: one per node; each runs a command over SSH through its node.
  std::vector<std::shared_ptr<Sandbox>> sbs;
  for (int i = 0; i < 3; ++i) {
    CreateOptions o;
    o.internet = i == 0;
    auto sb = (*m)->create(o);
    ASSERT_TRUE(sb) << sb.error().message;
    sbs.push_back(*sb);
  }
  std::set<std::string> nodes;
  for (auto& sb : sbs) {
    auto info = sb->info();
    nodes.insert(info.node);
    auto r = sb->exec("ip -4 -o addr show");  // runs in the sandbox, on its node's network
    ASSERT_TRUE(r) << info.node << ": " << r.error().message;
    EXPECT_NE(r->out.find(info.address->to_string() + "/16"), std::string::npos) << r->out;
    EXPECT_EQ(stack.containers(node_index(info.node)), std::vector<int>{info.vmid});
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"pve1", "pve2", "pve3"}));
  auto first = sbs[0]->info();
  EXPECT_EQ(stack.internet_set(node_index(first.node)),
            std::set<std::string>{first.address->to_string()});

  // An agent down: its node gets nothing new, internet changes there fail with 503, and the
  // reconciler repairs the set once it is back.
  auto on2 = sbs[0];
  for (auto& sb : sbs)
    if (sb->info().node == "pve2") on2 = sb;
  stack.stop_agent(2);
  EXPECT_FALSE((*m)->reconcile());
  auto grant = on2->set_internet(true);
  ASSERT_FALSE(grant);
  EXPECT_EQ(grant.error().code, ErrorCode::kUnavailable);
  CreateOptions anywhere;
  auto placed = (*m)->create(anywhere);
  ASSERT_TRUE(placed) << placed.error().message;
  EXPECT_NE((*placed)->info().node, "pve2");
  stack.start_agent(2);
  ASSERT_TRUE((*m)->reconcile());
  ASSERT_TRUE(on2->set_internet(true));
  EXPECT_EQ(stack.internet_set(2), std::set<std::string>{on2->info().address->to_string()});

  // A node offline: its sandboxes are kept as "unreachable", creates go elsewhere.
  stack.sim().set_node_offline("pve3", true);
  EXPECT_FALSE((*m)->reconcile());
  for (auto& info : (*m)->list()) {
    if (info.node == "pve3") {
      EXPECT_EQ(info.status, "unreachable");
    }
  }
  CreateOptions pinned;
  pinned.node = "pve3";
  auto refused = (*m)->create(pinned);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  stack.sim().set_node_offline("pve3", false);
  ASSERT_TRUE((*m)->reconcile());

  // Drain, then a restart recovers every node.
  ASSERT_TRUE((*m)->drain("pve1", true));
  auto not1 = (*m)->create(anywhere);
  ASSERT_TRUE(not1) << not1.error().message;
  EXPECT_NE((*not1)->info().node, "pve1");
  auto before = (*m)->list();
  sbs.clear();
  placed->reset();
  not1->reset();
  m->reset();
  auto again = Manager::open(c);
  ASSERT_TRUE(again) << again.error().message;
  auto after = (*again)->list();
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].node, before[i].node);
    auto sb = (*again)->attach(after[i].id);
    ASSERT_TRUE(sb);
    auto r = (*sb)->exec("true");
    EXPECT_TRUE(r && r->exit_code == 0) << after[i].node;
  }
  for (auto& info : after) ASSERT_TRUE((*again)->destroy_by_id(info.id));
  EXPECT_TRUE(stack.containers().empty());
  EXPECT_TRUE(stack.ct_namespaces().empty());
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(stack.internet_set(i).empty()) << i;
    EXPECT_TRUE(stack.bound_ports(i).empty()) << i;
  }
}

TEST(ClusterE2eTest, SigkillStormAcrossNodesLeavesEachNodeConsistent) {
  test::StackOptions so;
  so.nodes = 3;
  so.backend = "model";
  test::Stack stack(so);
  auto c = stack.manager_config();
  for (unsigned seed = 1; seed <= 2; ++seed) {
    test::DriverRun run;
    run.driver = PVS_LIFECYCLE_DRIVER;
    run.out_file = stack.dir() + "/driver-" + std::to_string(seed) + ".log";
    run.seed = seed;
    run.threads = 6;
    run.run_for = std::chrono::milliseconds(1500);
    (void)stack.run_driver_until_killed(run);
    auto m = Manager::open(c);
    ASSERT_TRUE(m) << m.error().message;
    std::string why;
    for (int attempt = 0; attempt < 60; ++attempt) {
      (void)(*m)->reconcile();
      why.clear();
      auto live = (*m)->list();
      for (int i = 1; i <= 3; ++i) {
        std::set<int> want, have;
        std::set<std::string> internet;
        for (auto& sb : live) {
          if (sb.node != test::Stack::node_name(i)) continue;
          want.insert(sb.vmid);
          if (sb.internet) internet.insert(sb.address->to_string());
        }
        for (int vmid : stack.containers(i)) have.insert(vmid);
        if (have != want) why += " pve" + std::to_string(i) + ": containers differ";
        if (stack.internet_set(i) != internet) why += " pve" + std::to_string(i) + ": set";
      }
      if (why.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_EQ(why, "") << "seed " << seed;
  }
}

}  // namespace
}  // namespace pvs
