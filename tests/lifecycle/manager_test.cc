// Manager/Sandbox against pvesim's model backend (no namespace per container, no SSH wait),
// with the real agent and the real ruleset in a node namespace (pvs::test::Stack): rollback of
// every create step, destroy semantics, quarantine, recovery, reaper, concurrency, faults.
#include "manager_model_fixture.h"

namespace pvs {
namespace {

using std::chrono::seconds;

TEST_F(ManagerModelTest, CreateConfiguresGrantsAndDestroyRemovesEverything) {
  auto m = open();
  ASSERT_TRUE(m);
  CreateOptions o;
  o.internet = true;
  o.cpus = 2;
  o.memory_mb = 1024;
  o.disk_gb = 10;
  o.labels = {{"team", "a"}, {"job", "42"}};
  o.owner = "tok";
  auto sb = m->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  auto info = (*sb)->info();
  EXPECT_EQ(info.vmid, 10000);
  ASSERT_TRUE(info.address);
  EXPECT_EQ(info.address->to_string(), "10.99.0.2");
  EXPECT_EQ(info.phase, SandboxMetadata::Phase::kReady);
  EXPECT_EQ(info.hostname, "sandbox-10000");
  EXPECT_EQ(info.disk_gb, 10);
  EXPECT_GT(info.expires_at, info.created_at);
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{"10.99.0.2"});
  EXPECT_EQ(stack_->bound_ports(), std::set<std::string>{"veth10000i0/10.99.0.2"});

  auto conf = client_->config("pve", 10000);
  ASSERT_TRUE(conf);
  EXPECT_EQ(conf->at("cores"), "2");
  EXPECT_EQ(conf->at("memory"), "1024");
  EXPECT_EQ(conf->at("swap"), "0");
  EXPECT_EQ(conf->at("tags"), "pve-sandbox");
  EXPECT_NE(conf->at("net0").find("ip=10.99.0.2/16,gw=10.99.0.1"), std::string::npos);
  auto md = decode_description(conf->at("description"));
  ASSERT_TRUE(md);
  EXPECT_EQ(md->id, info.id);
  EXPECT_EQ(md->phase, SandboxMetadata::Phase::kReady);
  EXPECT_TRUE(md->internet);
  EXPECT_EQ(md->owner, "tok");
  auto st = (*sb)->status();
  ASSERT_TRUE(st);
  EXPECT_EQ(st->status, "running");
  EXPECT_EQ(stack_->sim().schema_rejections(), 0u);

  EXPECT_EQ(m->list().size(), 1u);
  EXPECT_EQ(m->count_owned("tok"), 1u);
  EXPECT_EQ(m->count_owned("other"), 0u);
  EXPECT_EQ(m->list({{"team", "a"}}).size(), 1u);
  EXPECT_TRUE(m->list({{"team", "b"}}).empty());
  EXPECT_TRUE(m->attach(info.id));
  EXPECT_EQ(m->attach("sb-000000000000").error().code, ErrorCode::kNotFound);

  ASSERT_TRUE((*sb)->destroy());
  expect_clean();
  EXPECT_EQ(m->count_owned("tok"), 0u);
  EXPECT_EQ(m->attach(info.id).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE((*sb)->destroy());  // idempotent
  EXPECT_EQ(m->destroy_by_id(info.id).error().code, ErrorCode::kNotFound);
  auto s = m->stats();
  EXPECT_EQ(s.creates, 1u);
  EXPECT_EQ(s.destroys, 1u);
  EXPECT_EQ(s.live, 0u);
}

TEST_F(ManagerModelTest, InvalidOptionsAreRefusedBeforeAnythingHappens) {
  auto m = open();
  ASSERT_TRUE(m);
  CreateOptions o;
  o.hostname = "not_a_label";
  EXPECT_EQ(m->create(o).error().code, ErrorCode::kInvalidArgument);
  o = {};
  o.cpus = 99;
  EXPECT_EQ(m->create(o).error().code, ErrorCode::kInvalidArgument);
  o = {};
  o.labels = {{"BAD KEY", "x"}};
  EXPECT_EQ(m->create(o).error().code, ErrorCode::kInvalidArgument);
  o = {};
  o.ttl = seconds(365 * 24 * 3600);
  EXPECT_EQ(m->create(o).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(stack_->sim().count("POST", "/nodes/{node}/lxc/{vmid}/clone"), 0u);
}

// The template's disk is 8G: a smaller disk_gb is the caller's mistake (400 with the size),
// found before anything is cloned; the same size needs no resize (Proxmox refuses that one).
TEST_F(ManagerModelTest, DiskSmallerThanTheTemplateIsRefusedBeforeCloneAndTheSameSizeSkipsResize) {
  auto m = open();
  ASSERT_TRUE(m);
  CreateOptions o;
  o.disk_gb = 4;
  auto small = m->create(o);
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(small.error().message.find("template's disk (8 GiB)"), std::string::npos)
      << small.error().message;
  EXPECT_EQ(stack_->sim().count("POST", "/nodes/{node}/lxc/{vmid}/clone"), 0u);

  o.disk_gb = 8;
  auto same = m->create(o);
  ASSERT_TRUE(same) << same.error().message;
  EXPECT_EQ((*same)->info().disk_gb, 8);
  EXPECT_EQ(stack_->sim().count("PUT", "/nodes/{node}/lxc/{vmid}/resize"), 0u);
  ASSERT_TRUE((*same)->destroy());
  expect_clean();
}

// Every step of create fails in turn (through the hook, and through Proxmox itself): each
// rolls back completely, and the VMID and the address are free again afterwards.
TEST_F(ManagerModelTest, EveryCreateStepFailureRollsBackCompletely) {
  std::string failing;
  auto cfg = stack_->manager_config();
  auto m = open(cfg, test::fail_step(failing));
  ASSERT_TRUE(m);
  CreateOptions o;
  o.internet = true;
  o.disk_gb = 10;
  for (const std::string& step : test::kCreateSteps) {
    SCOPED_TRACE(step);
    failing = step;
    auto sb = m->create(o);
    ASSERT_FALSE(sb);
    EXPECT_NE(sb.error().message.find(step), std::string::npos) << sb.error().message;
    expect_clean();
    EXPECT_EQ(m->stats().live, 0u);
  }
  failing.clear();
  // Proxmox failures at each of its steps.
  auto& sim = stack_->sim();
  struct Case {
    std::string name;
    std::function<void()> arm;
    bool may_succeed = false;  // the client retries what provably never reached the daemon
  };
  std::vector<Case> cases = {
      {"clone 500",
       [&] {
         sim.set_faults({{"POST", "/nodes/{node}/lxc/{vmid}/clone", 500, "clone refused", 1.0, 1}});
       }},
      {"clone 595",
       [&] {
         sim.set_faults(
             {{"POST", "/nodes/{node}/lxc/{vmid}/clone", 595, "Connection timed out", 1.0, 1}});
       },
       true},
      {"clone task", [&] { sim.set_fail_task("vzclone", "disk full"); }},
      {"config PUT",
       [&] {
         sim.set_faults(
             {{"PUT", "/nodes/{node}/lxc/{vmid}/config", 500, "config refused", 1.0, 1}});
       }},
      {"resize task", [&] { sim.set_fail_task("resize", "no space"); }},
      {"start task", [&] { sim.set_fail_task("vzstart", "startup for container failed"); }},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    c.arm();
    auto sb = m->create(o);
    if (sb) {
      EXPECT_TRUE(c.may_succeed);
      EXPECT_TRUE((*sb)->destroy());
    }
    sim.set_faults({});
    sim.set_fail_task("vzclone", "");
    sim.set_fail_task("resize", "");
    sim.set_fail_task("vzstart", "");
    expect_clean();
  }
  // Everything was released: the next sandbox gets the first VMID and the first address.
  auto sb = m->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ((*sb)->info().vmid, 10000);
  EXPECT_EQ((*sb)->info().address->to_string(), "10.99.0.2");
  ASSERT_TRUE((*sb)->destroy());
  expect_clean();
  EXPECT_GE(m->stats().create_failures, 13u);
}

TEST_F(ManagerModelTest, AgentDownFailsCreateCleanlyAndReconcileRestoresTheSet) {
  auto m = open();
  ASSERT_TRUE(m);
  CreateOptions o;
  o.internet = true;
  auto keep = m->create(o);
  ASSERT_TRUE(keep);
  stack_->stop_agent();
  EXPECT_FALSE(m->create(o));
  EXPECT_EQ(stack_->containers(), std::vector<int>{10000});
  EXPECT_FALSE(m->health().agent_ok);
  // The agent comes back with an empty set (its state file is gone): reconcile restores it.
  ::unlink((stack_->dir() + "/agent-state").c_str());
  test::run_command({"nft", "flush", "set", "inet", "sandbox", "internet_allowed"});
  stack_->start_agent();
  auto reconciled = m->reconcile();
  ASSERT_TRUE(reconciled) << reconciled.error().message;
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{"10.99.0.2"});
  EXPECT_EQ(stack_->bound_ports(), std::set<std::string>{"veth10000i0/10.99.0.2"});
  auto h = m->health();
  EXPECT_TRUE(h.agent_ok) << h.agent_error;
  EXPECT_TRUE(h.proxmox_ok) << h.proxmox_error;
  ASSERT_TRUE((*keep)->destroy());
  expect_clean();
}

TEST_F(ManagerModelTest, FailedRevokeOnDestroyQuarantinesTheAddressUntilTheSetForgetsIt) {
  std::string failing;
  auto cfg = stack_->manager_config();
  auto m = open(cfg, test::fail_step(failing));
  ASSERT_TRUE(m);
  CreateOptions o;
  o.internet = true;
  auto a = m->create(o);
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)->info().address->to_string(), "10.99.0.2");
  failing = "destroy:revoke";
  ASSERT_TRUE((*a)->destroy());
  failing.clear();
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{"10.99.0.2"});  // still granted
  EXPECT_EQ(m->stats().quarantined_addresses, 1u);
  // Never reused while quarantined.
  auto b = m->create(o);
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)->info().address->to_string(), "10.99.0.3");
  // The reconciler's SYNC removes it; only then it is free again.
  ASSERT_TRUE(m->reconcile());
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{"10.99.0.3"});
  EXPECT_EQ(m->stats().quarantined_addresses, 0u);
  auto c = m->create(o);
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)->info().address->to_string(), "10.99.0.2");
  ASSERT_TRUE((*b)->destroy());
  ASSERT_TRUE((*c)->destroy());
  expect_clean();
}

TEST_F(ManagerModelTest, FailedDeleteLeavesPhaseDestroyingAndTheReconcilerFinishesIt) {
  std::string failing;
  auto cfg = stack_->manager_config();
  auto m = open(cfg, test::fail_step(failing));
  ASSERT_TRUE(m);
  CreateOptions o;
  o.internet = true;
  auto a = m->create(o);
  ASSERT_TRUE(a);
  failing = "destroy:delete";
  EXPECT_FALSE((*a)->destroy());
  failing.clear();
  // Internet is gone already (revoke first), the container is still there.
  EXPECT_TRUE(stack_->internet_set().empty());
  EXPECT_EQ(stack_->containers().size(), 1u);
  auto md = decode_description(client_->config("pve", 10000)->at("description"));
  ASSERT_TRUE(md);
  EXPECT_EQ(md->phase, SandboxMetadata::Phase::kDestroying);
  ASSERT_TRUE(m->reconcile());
  expect_clean();
  EXPECT_TRUE(m->list().empty());
}

TEST_F(ManagerModelTest, RecoveryAdoptsLiveSandboxesAndDestroysOrphans) {
  std::string live_id, quiet_id;
  {
    auto m = open();
    ASSERT_TRUE(m);
    CreateOptions o;
    o.internet = true;
    o.labels = {{"k", "v"}};
    o.owner = "tok";
    auto a = m->create(o);
    ASSERT_TRUE(a);
    live_id = (*a)->id();
    o.internet = false;
    auto b = m->create(o);
    ASSERT_TRUE(b);
    quiet_id = (*b)->id();
  }  // the manager goes away without destroying anything
  // An interrupted create, an interrupted destroy, an expired sandbox, a damaged marker and a
  // container that is not ours at all.
  auto orphan = [&](int vmid, SandboxMetadata::Phase phase, std::int64_t expires) {
    SandboxMetadata md;
    md.id = "sb-00000000" + std::to_string(vmid).substr(1);
    md.vmid = vmid;
    md.phase = phase;
    md.created_at = 1;
    md.expires_at = expires;
    md.internet = true;
    md.address = Ipv4Address(0x0a630000u + static_cast<std::uint32_t>(vmid - 10000));
    foreign_container(vmid, encode_description(md));
  };
  orphan(10100, SandboxMetadata::Phase::kCreating, 0);
  orphan(10101, SandboxMetadata::Phase::kDestroying, 0);
  orphan(10102, SandboxMetadata::Phase::kReady, 2);
  foreign_container(10103,
                    "Managed by pve-sandbox; do not edit the next line.\npve-sandbox:v1 {broken");
  foreign_container(10104, "someone else's container");
  // Stale agent state: a set entry and a binding of no live sandbox.
  test::run_command(
      {"nft", "add", "element", "inet", "sandbox", "internet_allowed", "{ 10.99.0.100 }"});
  test::run_command({"nft", "add", "element", "bridge", "sandbox_l2", "port_ip4",
                     "{ \"veth10100i0\" . 10.99.0.100 }"});

  auto m = open();
  ASSERT_TRUE(m);
  auto list = m->list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].id, live_id);
  EXPECT_EQ(list[1].id, quiet_id);
  EXPECT_EQ(list[0].labels.at("k"), "v");
  EXPECT_TRUE(list[0].internet);
  EXPECT_EQ(list[0].cpus, 1);
  EXPECT_EQ(m->list({{"k", "v"}}).size(), 2u);
  EXPECT_EQ(m->count_owned("tok"), 2u);  // recovered sandboxes count for their owner
  EXPECT_EQ(stack_->containers(), (std::vector<int>{10000, 10001, 10104}));
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{"10.99.0.2"});
  EXPECT_EQ(stack_->bound_ports(),
            (std::set<std::string>{"veth10000i0/10.99.0.2", "veth10001i0/10.99.0.3"}));
  auto s = m->stats();
  EXPECT_EQ(s.orphans_destroyed, 3u);
  EXPECT_EQ(s.expired_destroyed, 1u);
  // Recovered sandboxes are fully usable, and new ones avoid their VMIDs and addresses.
  auto a = m->attach(live_id);
  ASSERT_TRUE(a);
  ASSERT_TRUE((*a)->set_internet(false));
  EXPECT_TRUE(stack_->internet_set().empty());
  auto c = m->create({});
  ASSERT_TRUE(c);
  EXPECT_EQ((*c)->info().vmid, 10002);
  EXPECT_EQ((*c)->info().address->to_string(), "10.99.0.4");
  for (auto& info : m->list()) ASSERT_TRUE(m->destroy_by_id(info.id));
  EXPECT_EQ(stack_->containers(), std::vector<int>{10104});  // never touched
}

TEST_F(ManagerModelTest, ReaperDestroysExpiredSandboxes) {
  auto m = open();
  ASSERT_TRUE(m);
  CreateOptions o;
  o.ttl = seconds(1);
  o.internet = true;
  auto a = m->create(o);
  ASSERT_TRUE(a);
  auto keep = m->create({});
  ASSERT_TRUE(keep);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  ASSERT_TRUE((*keep)->extend_ttl(seconds(600)));
  ASSERT_TRUE(m->reconcile());
  EXPECT_EQ(stack_->containers(), std::vector<int>{10001});
  EXPECT_TRUE(stack_->internet_set().empty());
  EXPECT_EQ(m->stats().expired_destroyed, 1u);
  EXPECT_FALSE((*a)->exec("true"));
}

TEST_F(ManagerModelTest, InternetToggleSnapshotsAndTtlAreRecordedInProxmox) {
  auto m = open();
  ASSERT_TRUE(m);
  auto sb = m->create({});
  ASSERT_TRUE(sb);
  auto md = [&] { return *decode_description(client_->config("pve", 10000)->at("description")); };
  ASSERT_TRUE((*sb)->snapshot("before", "clean state"));
  ASSERT_TRUE((*sb)->set_internet(true));
  EXPECT_TRUE(md().internet);
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{"10.99.0.2"});
  auto snaps = (*sb)->snapshots();
  ASSERT_TRUE(snaps);
  ASSERT_EQ(snaps->size(), 1u);
  EXPECT_EQ((*snaps)[0].name, "before");
  ASSERT_TRUE((*sb)->rollback("before"));
  EXPECT_TRUE(md().internet);  // the snapshot's description does not win
  EXPECT_EQ(md().phase, SandboxMetadata::Phase::kReady);
  ASSERT_TRUE((*sb)->delete_snapshot("before"));
  ASSERT_TRUE((*sb)->extend_ttl(seconds(7200)));
  EXPECT_NEAR(static_cast<double>(md().expires_at), static_cast<double>(std::time(nullptr) + 7200),
              5.0);
  ASSERT_TRUE((*sb)->set_internet(false));
  EXPECT_FALSE(md().internet);
  EXPECT_TRUE(stack_->internet_set().empty());
  ASSERT_TRUE((*sb)->destroy());
  expect_clean();
}

TEST_F(ManagerModelTest, AVmidTakenBehindOurBackIsSkipped) {
  auto m = open();
  ASSERT_TRUE(m);
  foreign_container(10000, "not ours");
  auto sb = m->create({});
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ((*sb)->info().vmid, 10001);
  ASSERT_TRUE((*sb)->destroy());
  EXPECT_EQ(stack_->containers(), std::vector<int>{10000});
}

TEST_F(ManagerModelTest, SixteenConcurrentCreatesFromOneTemplateAllSucceed) {
  stack_->sim().set_task_ms("vzclone", 30);
  auto m = open();
  ASSERT_TRUE(m);
  std::vector<std::shared_ptr<Sandbox>> boxes(16);
  std::vector<std::string> errors(16);
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      CreateOptions o;
      o.internet = i % 2 == 0;
      auto sb = m->create(o);
      if (sb)
        boxes[i] = *sb;
      else
        errors[i] = sb.error().message;
    });
  for (auto& t : threads) t.join();
  std::set<int> vmids;
  std::set<std::string> addrs, internet;
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(boxes[i]) << errors[i];
    vmids.insert(boxes[i]->info().vmid);
    addrs.insert(boxes[i]->info().address->to_string());
    if (i % 2 == 0) internet.insert(boxes[i]->info().address->to_string());
  }
  EXPECT_EQ(vmids.size(), 16u);
  EXPECT_EQ(addrs.size(), 16u);
  EXPECT_EQ(stack_->internet_set(), internet);
  threads.clear();
  for (int i = 0; i < 16; ++i) threads.emplace_back([&, i] { EXPECT_TRUE(boxes[i]->destroy()); });
  for (auto& t : threads) t.join();
  expect_clean();
}

// 10% of every Proxmox request fails: every create either succeeds or leaves nothing.
TEST_F(ManagerModelTest, TenPercentFaultsOnEveryEndpoint) {
  auto m = open();
  ASSERT_TRUE(m);
  stack_->sim().set_faults({{"*", "*", 500, "injected fault", 0.10, -1}});
  int ok = 0, failed = 0;
  for (int i = 0; i < 30; ++i) {
    CreateOptions o;
    o.internet = i % 2 == 0;
    auto sb = m->create(o);
    if (sb) {
      ++ok;
    } else {
      ++failed;
    }
    // What Proxmox holds is exactly the live sandboxes.
    auto live = m->list();
    std::vector<int> want;
    for (auto& s : live) want.push_back(s.vmid);
    std::sort(want.begin(), want.end());
    stack_->sim().set_faults({});
    auto have = stack_->containers();
    std::set<std::string> want_set;
    for (auto& s : live)
      if (s.internet) want_set.insert(s.address->to_string());
    EXPECT_EQ(have, want) << "after create " << i;
    EXPECT_EQ(stack_->internet_set(), want_set) << "after create " << i;
    stack_->sim().set_faults({{"*", "*", 500, "injected fault", 0.10, -1}});
  }
  stack_->sim().set_faults({});
  EXPECT_GT(ok, 0);
  EXPECT_GT(failed, 0);
  for (auto& info : m->list()) ASSERT_TRUE(m->destroy_by_id(info.id));
  expect_clean();
}

// A controller on another machine reaches the agent through a relay command (in production
// `ssh -T relay@node` with the forced command `pve-sandbox-agent relay`); here the relay runs
// locally. Grants, bindings and reconnects work the same.
TEST_F(ManagerModelTest, AgentThroughARelayCommand) {
  auto cfg = stack_->manager_config();
  cfg.agent.socket_path = "/nonexistent/agent.sock";  // unused with a command
  cfg.agent.command = {PVS_AGENT_BIN, "relay", "--socket", stack_->agent_socket()};
  auto m = open(cfg);
  ASSERT_TRUE(m);
  CreateOptions o;
  o.internet = true;
  auto sb = m->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{"10.99.0.2"});
  EXPECT_EQ(stack_->bound_ports(), std::set<std::string>{"veth10000i0/10.99.0.2"});
  // The agent restarts: the relay's connection breaks, the next call spawns a new one.
  stack_->stop_agent();
  stack_->start_agent();
  ASSERT_TRUE((*sb)->set_internet(false));
  EXPECT_TRUE(stack_->internet_set().empty());
  ASSERT_TRUE(m->reconcile());
  auto h = m->health();
  EXPECT_TRUE(h.agent_ok) << h.agent_error;
  ASSERT_TRUE((*sb)->destroy());
  expect_clean();
  EXPECT_EQ(m->stats().agent_calls.errors, 0u);
}

// Call statistics for /metrics: every Proxmox request, task wait and agent request is counted,
// failures too, with a cumulative latency histogram.
TEST_F(ManagerModelTest, CallStatisticsCountProxmoxTasksAndAgentCalls) {
  auto m = open();
  ASSERT_TRUE(m);
  auto check_histogram = [](const CallStats& c, const char* what) {
    EXPECT_EQ(c.buckets.back(), c.count) << what;
    for (std::size_t i = 1; i < c.buckets.size(); ++i)
      EXPECT_LE(c.buckets[i - 1], c.buckets[i]) << what << " bucket " << i;
    EXPECT_LE(c.errors, c.count) << what;
    if (c.count > 0) {
      EXPECT_GT(c.sum_seconds, 0.0) << what;
    }
  };
  auto before = m->stats();  // open() reconciled: a listing and a SYNC at least
  EXPECT_GE(before.proxmox_calls.count, 1u);
  EXPECT_GE(before.agent_calls.count, 1u);
  stack_->sim().reset_counts();
  CreateOptions o;
  o.internet = true;
  auto sb = m->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  ASSERT_TRUE((*sb)->destroy());
  auto after = m->stats();
  check_histogram(after.proxmox_calls, "proxmox_calls");
  check_histogram(after.proxmox_tasks, "proxmox_tasks");
  check_histogram(after.agent_calls, "agent_calls");
  // pvesim saw exactly the manager's requests (task polls are inside the task waits).
  auto proxmox = after.proxmox_calls.count - before.proxmox_calls.count;
  auto polls = stack_->sim().count("GET", "/nodes/{node}/tasks/{upid}/status");
  EXPECT_EQ(proxmox + polls, stack_->sim().total_requests());
  // clone, start, stop, destroy.
  EXPECT_EQ(after.proxmox_tasks.count - before.proxmox_tasks.count, 4u);
  // BIND, ALLOW, REVOKE, UNBIND.
  EXPECT_EQ(after.agent_calls.count - before.agent_calls.count, 4u);
  EXPECT_EQ(after.proxmox_calls.errors, before.proxmox_calls.errors);
  EXPECT_EQ(after.agent_calls.errors, 0u);

  // Failures are counted: a refused clone, and an agent that is gone.
  stack_->sim().set_faults({{"POST", "/nodes/{node}/lxc/{vmid}/clone", 500, "injected", 1.0, 1}});
  EXPECT_FALSE(m->create({}));
  EXPECT_EQ(m->stats().proxmox_calls.errors, after.proxmox_calls.errors + 1);
  stack_->stop_agent();
  EXPECT_FALSE(m->health().agent_ok);
  EXPECT_GE(m->stats().agent_calls.errors, 1u);
  stack_->start_agent();
  check_histogram(m->stats().agent_calls, "agent_calls");
  expect_clean();
}

// Snapshot names that do not exist are kNotFound (404 for the service), not a Proxmox 500.
TEST_F(ManagerModelTest, MissingSnapshotIsNotFound) {
  auto m = open();
  ASSERT_TRUE(m);
  auto sb = m->create({});
  ASSERT_TRUE(sb) << sb.error().message;
  auto r = (*sb)->rollback("nosuch");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound) << r.error().message;
  auto d = (*sb)->delete_snapshot("nosuch");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::kNotFound) << d.error().message;
  ASSERT_TRUE((*sb)->snapshot("one"));
  auto again = (*sb)->snapshot("one");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kConflict) << again.error().message;
  ASSERT_TRUE((*sb)->rollback("one"));
  ASSERT_TRUE((*sb)->delete_snapshot("one"));
  EXPECT_EQ((*sb)->rollback("one").error().code, ErrorCode::kNotFound);
  EXPECT_EQ((*sb)->info().phase, SandboxMetadata::Phase::kReady);
  ASSERT_TRUE((*sb)->destroy());
  expect_clean();
}

// A sandbox keeps at most max_snapshots; one more is kConflict (409) with what to do.
TEST_F(ManagerModelTest, SnapshotsPerSandboxAreCapped) {
  auto config = stack_->manager_config();
  config.max_snapshots = 2;
  auto m = open(config);
  ASSERT_TRUE(m);
  auto sb = m->create({});
  ASSERT_TRUE(sb) << sb.error().message;
  ASSERT_TRUE((*sb)->snapshot("one"));
  ASSERT_TRUE((*sb)->snapshot("two"));
  auto third = (*sb)->snapshot("three");
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code, ErrorCode::kConflict);
  EXPECT_NE(third.error().message.find("max_snapshots 2); delete one first"), std::string::npos)
      << third.error().message;
  ASSERT_TRUE((*sb)->delete_snapshot("one"));
  EXPECT_TRUE((*sb)->snapshot("three"));
  EXPECT_EQ((*sb)->snapshots()->size(), 2u);
  ASSERT_TRUE((*sb)->destroy());
  expect_clean();
}

}  // namespace
}  // namespace pvs
