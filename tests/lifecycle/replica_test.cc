// Template replicas (ManagerConfig::template_replicas) against pvesim over HTTPS (model backend,
// real agent and ruleset): replicas made at start and found again after a restart, N clones at
// once (held open by pvesim's task gate, so the overlap is made, not timed), rebuilt when the
// template changes, replicas = 1 as before, and bad values refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "manager_testing.h"
#include "model_stack_fixture.h"
#include "pvesandbox/manager.h"
#include "pvesandbox/proxmox_client.h"
#include "pvesandbox/sandbox_metadata.h"
#include "sim.h"
#include "support/stack_fixture.h"

namespace pvs {
namespace {

using std::chrono::milliseconds;

class ReplicaTest : public ModelStackTest {
 protected:
  ManagerConfig config(int replicas) {
    auto c = stack_->manager_config();
    c.template_replicas = replicas;
    return c;
  }
  std::unique_ptr<Manager> open(ManagerConfig c) {
    auto m = lifecycle::open_manager(std::move(c), {});
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
  }
  // Templates in the controller's VMID range (the replicas), by VMID.
  std::vector<int> replica_templates() {
    auto list = client_->list_containers("pve");
    EXPECT_TRUE(list);
    std::vector<int> out;
    for (auto& ct : *list)
      if (ct.is_template && ct.vmid >= 10000) out.push_back(ct.vmid);
    std::sort(out.begin(), out.end());
    return out;
  }
  // Waits (up to 20 s) until pvesim runs `n` clones at once; their sources.
  std::multiset<std::string> running_clones(std::size_t n) {
    std::vector<std::string> now;
    for (int i = 0; i < 2000; ++i) {
      now = stack_->sim().running_tasks("vzclone");
      if (now.size() >= n) break;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return {now.begin(), now.end()};
  }
  std::uint64_t clones() { return stack_->sim().count("POST", "/nodes/{node}/lxc/{vmid}/clone"); }
};

TEST_F(ReplicaTest, MadeAtStartAsLabelledTemplatesAndFoundAgainAfterARestart) {
  std::vector<int> made;
  {
    auto m = open(config(3));
    ASSERT_TRUE(m);
    auto t = m->templates();
    ASSERT_EQ(t.size(), 1u);
    EXPECT_EQ(t[0].template_vmid, 9000);
    EXPECT_EQ(t[0].node, "pve");
    EXPECT_EQ(t[0].wanted, 3);
    EXPECT_EQ(t[0].error, "");
    made = t[0].replicas;
    ASSERT_EQ(made.size(), 2u);
    EXPECT_EQ(replica_templates(), made);
    for (int vmid : made) {
      auto conf = client_->config("pve", vmid);
      ASSERT_TRUE(conf);
      auto md = decode_description(conf->at("description"));
      ASSERT_TRUE(md) << md.error().message;
      EXPECT_EQ(md->labels.at("pve-sandbox/replica-of"), "9000");
      EXPECT_EQ(md->labels.at("pve-sandbox/template-digest"), t[0].digest);
      EXPECT_EQ(conf->at("rootfs").rfind("local-lvm:base-" + std::to_string(vmid) + "-disk-0", 0),
                0u)
          << conf->at("rootfs");
    }
    EXPECT_TRUE(stack_->containers().empty());  // nothing but templates
  }
  auto before = clones();
  auto m = open(config(3));
  ASSERT_TRUE(m);
  auto t = m->templates();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].replicas, made);  // recognised: none made, none destroyed
  EXPECT_EQ(clones(), before);
  EXPECT_EQ(t[0].rebuilt, 0u);
  // Fewer wanted: the surplus goes.
  m.reset();
  m = open(config(2));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->templates()[0].replicas.size(), 1u);
  EXPECT_EQ(replica_templates().size(), 1u);
}

// Three sources (the template and two replicas): with every clone task held open, three run
// at once, one per source; the other creates wait in the sources' queues and all succeed.
TEST_F(ReplicaTest, ClonesRunAtOnceOnePerSource) {
  auto m = open(config(3));
  ASSERT_TRUE(m);
  auto t = m->templates();
  ASSERT_EQ(t[0].replicas.size(), 2u);
  stack_->sim().hold_tasks("vzclone", true);
  constexpr int kCreates = 5;
  std::vector<Result<std::shared_ptr<Sandbox>>> results(kCreates, fail(ErrorCode::kInternal, ""));
  std::vector<std::thread> threads;
  for (int i = 0; i < kCreates; ++i)
    threads.emplace_back([&, i] { results[static_cast<std::size_t>(i)] = m->create({}); });
  auto running = running_clones(3);
  std::multiset<std::string> sources = {"9000", std::to_string(t[0].replicas[0]),
                                        std::to_string(t[0].replicas[1])};
  EXPECT_EQ(running, sources);
  // All five are in flight: three cloning, two queued behind them.
  int in_flight = 0;
  for (int i = 0; i < 2000 && in_flight < kCreates; ++i) {
    in_flight = 0;
    auto now = m->templates();
    for (int n : now[0].in_flight) in_flight += n;
    if (in_flight < kCreates) std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(in_flight, kCreates);
  EXPECT_EQ(stack_->sim().running_tasks("vzclone").size(), 3u);  // never a fourth at once
  stack_->sim().hold_tasks("vzclone", false);
  for (auto& th : threads) th.join();
  for (auto& r : results) ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(stack_->containers().size(), static_cast<std::size_t>(kCreates));
  for (auto& r : results) EXPECT_TRUE((*r)->destroy());
}

TEST_F(ReplicaTest, ChangedTemplateRebuildsItsReplicas) {
  auto m = open(config(2));
  ASSERT_TRUE(m);
  auto old = m->templates()[0];
  ASSERT_EQ(old.replicas.size(), 1u);
  // The template changes: its replica no longer matches and is replaced.
  ASSERT_TRUE(client_->update_config("pve", 9000, {{"memory", "1024"}}));
  ASSERT_TRUE(m->reconcile());
  auto now = m->templates()[0];
  ASSERT_EQ(now.replicas.size(), 1u);  // (its VMID may be the old one's, released)
  EXPECT_NE(now.digest, old.digest);
  EXPECT_EQ(now.rebuilt, 1u);
  EXPECT_EQ(replica_templates(), now.replicas);
  auto conf = client_->config("pve", now.replicas[0]);
  ASSERT_TRUE(conf);
  EXPECT_EQ(conf->at("memory"), "1024");
  // A replica changed behind the controller's back is replaced too.
  ASSERT_TRUE(client_->update_config("pve", now.replicas[0], {{"cores", "3"}}));
  ASSERT_TRUE(m->reconcile());
  auto again = m->templates()[0];
  ASSERT_EQ(again.replicas.size(), 1u);
  EXPECT_EQ(again.rebuilt, 2u);
  conf = client_->config("pve", again.replicas[0]);
  ASSERT_TRUE(conf);
  auto primary = client_->config("pve", 9000);
  ASSERT_TRUE(primary);
  EXPECT_EQ(conf->count("cores"), primary->count("cores"));  // not the 3 written by hand
  if (conf->count("cores")) {
    EXPECT_EQ(conf->at("cores"), primary->at("cores"));
  }
  auto sb = m->create({});
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_TRUE((*sb)->destroy());
}

// A replica destroyed behind the controller's back: the clone sent to it finds it gone, takes
// another source, and the next reconcile makes the replica again.
TEST_F(ReplicaTest, AVanishedReplicaIsSkippedAndMadeAgain) {
  auto m = open(config(2));
  ASSERT_TRUE(m);
  int replica = m->templates()[0].replicas.at(0);
  pve::DestroyOptions d;
  d.purge = true;
  auto del = client_->destroy("pve", replica, d);
  ASSERT_TRUE(del) << del.error().to_string();
  ASSERT_TRUE(client_->wait_task(*del));
  // The first create holds the template (its clone held open), so the second goes to the
  // replica, finds it gone and queues for the template.
  stack_->sim().hold_tasks("vzclone", true);
  std::vector<Result<std::shared_ptr<Sandbox>>> results(2, fail(ErrorCode::kInternal, ""));
  std::thread first([&] { results[0] = m->create({}); });
  EXPECT_EQ(running_clones(1), std::multiset<std::string>{"9000"});
  std::thread second([&] { results[1] = m->create({}); });
  for (int i = 0; i < 2000 && !m->templates()[0].replicas.empty(); ++i)
    std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(m->templates()[0].replicas.empty());
  stack_->sim().hold_tasks("vzclone", false);
  first.join();
  second.join();
  for (auto& r : results) ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(m->reconcile());
  EXPECT_EQ(m->templates()[0].replicas.size(), 1u);
  for (auto& r : results) EXPECT_TRUE((*r)->destroy());
}

TEST_F(ReplicaTest, OneReplicaClonesTheTemplateAsBefore) {
  auto m = open(config(1));
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->templates().empty());
  EXPECT_TRUE(replica_templates().empty());
  stack_->sim().hold_tasks("vzclone", true);
  std::vector<Result<std::shared_ptr<Sandbox>>> results(3, fail(ErrorCode::kInternal, ""));
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] { results[static_cast<std::size_t>(i)] = m->create({}); });
  EXPECT_EQ(running_clones(1), std::multiset<std::string>{"9000"});
  stack_->sim().hold_tasks("vzclone", false);
  for (auto& th : threads) th.join();
  for (auto& r : results) ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(clones(), 3u);  // one each, serial: none hit the lock
  for (auto& r : results) EXPECT_TRUE((*r)->destroy());
}

TEST_F(ReplicaTest, BadValuesAreRefusedWithTheirName) {
  for (int bad : {0, 17, -1}) {
    auto m = lifecycle::open_manager(config(bad), {});
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(m.error().message, "template_replicas must be 1..16");
  }
  auto c = config(1);
  NodeConfig n;
  n.name = "pve";
  n.sandbox_cidr = c.sandbox_cidr;
  n.gateway = c.gateway;
  n.agent = c.agent;
  n.template_replicas = 20;
  c.nodes = {n};
  auto m = lifecycle::open_manager(c, {});
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message,
            "nodes: pve: template_replicas must be 1..16 (0: the controller-wide value)");
  c = config(1);
  HotPoolProfile p;
  p.name = "small";
  p.template_replicas = 17;
  c.hot_pools = {p};
  m = lifecycle::open_manager(c, {});
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().message,
            "hot_pools: small: template_replicas must be 1..16 (0: no wish of its own)");
}

// A hot pool refills from the replicas too: a profile's own template_replicas.
TEST_F(ReplicaTest, HotPoolProfileWantsItsOwnReplicas) {
  auto c = config(1);
  HotPoolProfile p;
  p.name = "small";
  p.size = 2;
  p.memory_mb = 256;
  p.template_replicas = 2;
  c.hot_pools = {p};
  auto m = open(c);
  ASSERT_TRUE(m);
  auto t = m->templates();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].wanted, 2);
  EXPECT_EQ(t[0].replicas.size(), 1u);
}

}  // namespace
}  // namespace pvs
