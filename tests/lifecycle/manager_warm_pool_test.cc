// Manager's warm pool against pvesim's model backend with the real agent and ruleset: creates
// served from the pool, refills, a failed create from it, SIGKILL and restart, validation.
#include "manager_model_fixture.h"

namespace pvs {
namespace {

using std::chrono::seconds;

// ---- warm pool -------------------------------------------------------------------------------

// Waits (up to 10 s) until the pool's refill thread has `n` clones ready.
bool pool_reaches(Manager& m, std::uint64_t n) {
  for (int i = 0; i < 200; ++i) {
    if (m.stats().pooled == n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST_F(ManagerModelTest, WarmPoolServesCreatesRefillsAndSurvivesARestart) {
  auto c = stack_->manager_config();
  c.warm_pool = 2;
  auto m = open(c);
  ASSERT_TRUE(m);
  ASSERT_TRUE(pool_reaches(*m, 2));
  auto pooled = stack_->containers();
  ASSERT_EQ(pooled.size(), 2U);
  for (int vmid : pooled) {
    auto st = client_->status("pve", vmid);
    ASSERT_TRUE(st);
    EXPECT_EQ(st->status, "stopped");
  }

  // A create takes a pooled clone and makes it its own, in Proxmox too.
  CreateOptions o;
  o.internet = true;
  o.hostname = "from-pool";
  auto sb = m->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  auto info = (*sb)->info();
  EXPECT_NE(std::find(pooled.begin(), pooled.end(), info.vmid), pooled.end());
  EXPECT_EQ(m->stats().pool_hits, 1U);
  EXPECT_EQ(m->stats().pool_misses, 0U);
  auto conf = client_->config("pve", info.vmid);
  ASSERT_TRUE(conf);
  auto md = decode_description(conf->at("description"));
  ASSERT_TRUE(md);
  EXPECT_EQ(md->id, info.id);
  EXPECT_EQ(md->phase, SandboxMetadata::Phase::kReady);
  EXPECT_EQ(conf->at("hostname"), "from-pool");
  EXPECT_NE(conf->at("net0").find("ip=" + info.address->to_string()), std::string::npos);
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{info.address->to_string()});

  // Refilled in the background.
  ASSERT_TRUE(pool_reaches(*m, 2));
  EXPECT_EQ(stack_->containers().size(), 3U);
  ASSERT_TRUE((*sb)->destroy());

  // A restart keeps the pooled clones (they are not orphans) and uses them.
  auto before = stack_->containers();
  m.reset();
  m = open(c);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->stats().pooled, 2U);
  EXPECT_EQ(m->stats().orphans_destroyed, 0U);
  EXPECT_EQ(stack_->containers(), before);

  // A clone of another template is not kept: destroyed by the reconciler, then replaced.
  int stale = before.front();
  auto sconf = client_->config("pve", stale);
  ASSERT_TRUE(sconf);
  auto smd = decode_description(sconf->at("description"));
  ASSERT_TRUE(smd);
  smd->labels["pve-sandbox/template"] = "8999";
  ASSERT_TRUE(client_->update_config("pve", stale, {{"description", encode_description(*smd)}}));
  (void)m->reconcile();
  EXPECT_EQ(m->stats().orphans_destroyed, 1U);
  ASSERT_TRUE(pool_reaches(*m, 2));
  m.reset();

  // Pool switched off: the pooled clones go.
  c.warm_pool = 0;
  m = open(c);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->stats().pooled, 0U);
  expect_clean();
}

TEST_F(ManagerModelTest, AFailedCreateFromThePoolDestroysTheClaimedClone) {
  for (std::string step : {"configure", "bind", "ready"}) {
    SCOPED_TRACE(step);
    std::string failing;
    auto c = stack_->manager_config();
    c.warm_pool = 1;
    auto m = open(c, test::fail_step(failing));
    ASSERT_TRUE(m);
    ASSERT_TRUE(pool_reaches(*m, 1));
    failing = step;
    CreateOptions o;
    o.internet = true;
    auto sb = m->create(o);
    ASSERT_FALSE(sb);
    failing.clear();
    EXPECT_EQ(m->stats().pool_hits, 1U);
    ASSERT_TRUE(pool_reaches(*m, 1));
    // What is left is exactly one pooled clone: the claimed one is gone, no binding, no grant.
    auto cts = stack_->containers();
    ASSERT_EQ(cts.size(), 1U);
    auto conf = client_->config("pve", cts.front());
    ASSERT_TRUE(conf);
    auto md = decode_description(conf->at("description"));
    ASSERT_TRUE(md);
    EXPECT_EQ(md->phase, SandboxMetadata::Phase::kPooled);
    EXPECT_TRUE(stack_->internet_set().empty());
    EXPECT_TRUE(stack_->bound_ports().empty());
    m.reset();
    c.warm_pool = 0;
    m = open(c);  // clears the pool for the next round
    expect_clean();
  }
}

// SIGKILL a controller with a warm pool at random points (clones for the pool, claims, creates,
// destroys from four threads), then restart: what Proxmox holds is exactly the live sandboxes
// and the pooled clones, and the agent exactly the live sandboxes' grants and bindings.
TEST_F(ManagerModelTest, SigkillWithAWarmPoolThenRestartLeavesOnlyLiveAndPooled) {
  stack_->sim().set_task_ms("vzclone", 60);
  stack_->sim().set_task_ms("vzstart", 40);
  stack_->sim().set_task_ms("vzstop", 20);
  stack_->sim().set_task_ms("vzdestroy", 20);
  constexpr int kPool = 3;
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  auto c = stack_->manager_config();
  c.warm_pool = kPool;
  std::size_t begun = 0, created = 0;
  for (int round = 0; round < 12; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    test::DriverRun run;
    run.driver = PVS_LIFECYCLE_DRIVER;
    run.out_file = stack_->dir() + "/pool-driver." + std::to_string(round);
    run.seed = static_cast<unsigned>(rng());
    run.warm_pool = kPool;
    run.finished = round == 0 ? 1 : 0;  // one create finishes on any machine
    run.run_for = std::chrono::milliseconds(300 + rng() % 1000);
    for (auto& line : stack_->run_driver_until_killed(run)) {
      if (line.rfind("begin ", 0) == 0) ++begun;
      if (line.rfind("create sb-", 0) == 0) ++created;
    }

    auto m = open(c);
    ASSERT_TRUE(m);
    // Orphans whose task the dead driver began wait for it; the pool refills meanwhile.
    std::string why;
    for (int i = 0; i < 80; ++i) {
      (void)m->reconcile();
      why.clear();
      auto live = m->list();
      std::set<int> live_vmids;
      std::set<std::string> internet, ports;
      for (auto& sb : live) {
        live_vmids.insert(sb.vmid);
        if (sb.internet) internet.insert(sb.address->to_string());
        ports.insert("veth" + std::to_string(sb.vmid) + "i0/" + sb.address->to_string());
      }
      std::size_t pooled = 0;
      for (int vmid : stack_->containers()) {
        if (live_vmids.count(vmid)) continue;
        auto conf = client_->config("pve", vmid);
        auto md =
            conf ? decode_description(conf->count("description") ? conf->at("description") : "")
                 : Result<SandboxMetadata>(fail(ErrorCode::kNotFound, "gone"));
        if (md && md->phase == SandboxMetadata::Phase::kPooled && !conf->count("lock"))
          ++pooled;
        else
          why += " stray container " + std::to_string(vmid);
      }
      if (pooled != m->stats().pooled) why += " pooled containers != the manager's pool";
      if (stack_->internet_set() != internet) why += " internet set differs";
      if (stack_->bound_ports() != ports) why += " bindings differ";
      if (why.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_EQ(why, "");
    m.reset();
  }
  std::printf("12 kills; creates/destroys begun %zu, sandboxes created %zu\n", begun, created);
  EXPECT_GE(created, 1U);
  c.warm_pool = 0;
  auto m = open(c);
  ASSERT_TRUE(m);
  for (auto& info : m->list()) EXPECT_TRUE(m->destroy_by_id(info.id));
  expect_clean();
}

TEST_F(ManagerModelTest, WarmPoolSizeIsValidated) {
  auto c = stack_->manager_config();
  c.warm_pool = -1;
  EXPECT_FALSE(Manager::open(c));
  c.warm_pool = static_cast<int>(c.vmid_max - c.vmid_min) + 2;
  EXPECT_FALSE(Manager::open(c));
}

}  // namespace
}  // namespace pvs
