// The hot pool on the whole stack (pvs::test::Stack, pvesim netns backend): members are running
// namespaces on the bridge with their own sshd, bound by the real agent in the real ruleset;
// a claim hands over the member's live connection. The SIGKILL storm runs on the model backend.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <thread>

#include "manager_testing.h"
#include "pvesandbox/manager.h"
#include "pvesandbox/proxmox_client.h"
#include "sim.h"
#include "support/stack_fixture.h"

#ifndef PVS_LIFECYCLE_DRIVER
#error "PVS_LIFECYCLE_DRIVER must name the driver binary"
#endif

namespace pvs {
namespace {

using std::chrono::milliseconds;

HotPoolProfile profile(int size, const std::string& name = "small") {
  HotPoolProfile p;
  p.name = name;
  p.size = size;
  p.cpus = 1;
  p.memory_mb = 256;
  return p;
}

// Waits (up to 30 s) until the first pool has `ready` members and none being made.
bool pool_settles(Manager& m, int ready) {
  for (int i = 0; i < 300; ++i) {
    auto p = m.pools();
    if (!p.empty() && p[0].ready == ready && p[0].filling == 0) return true;
    std::this_thread::sleep_for(milliseconds(100));
  }
  return false;
}

class HotPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = std::make_unique<test::Stack>(options());
    auto client = pve::Client::create(stack_->manager_config().proxmox);
    ASSERT_TRUE(client) << client.error().message;
    client_ = std::move(*client);
  }
  void TearDown() override {
    client_.reset();
    stack_.reset();
  }
  virtual test::StackOptions options() { return {}; }

  std::unique_ptr<Manager> open(ManagerConfig c) {
    auto m = lifecycle::open_manager(std::move(c), {});
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
  }
  ManagerConfig hot_config(int size) {
    auto c = stack_->manager_config();
    c.hot_pools = {profile(size)};
    c.hot_pool_check_interval = milliseconds(200);
    return c;
  }
  // Ports the agent binds, as `nft` prints them ("veth<vmid>i0/<address>").
  std::set<std::string> ports_of(Manager& m, const std::vector<int>& members) {
    std::set<std::string> out;
    for (auto& s : m.list())
      out.insert("veth" + std::to_string(s.vmid) + "i0/" + s.address->to_string());
    for (int vmid : members) {
      auto conf = client_->config("pve", vmid);
      if (!conf) continue;
      auto md = decode_description(conf->at("description"));
      if (md && md->address)
        out.insert("veth" + std::to_string(vmid) + "i0/" + md->address->to_string());
    }
    return out;
  }
  std::vector<int> members(Manager& m) {
    std::set<int> live;
    for (auto& s : m.list()) live.insert(s.vmid);
    std::vector<int> out;
    for (int vmid : stack_->containers())
      if (!live.count(vmid)) out.push_back(vmid);
    return out;
  }
  // The id in a container's description ("pool-..." for a member): VMIDs are reused, ids never.
  std::string id_of(int vmid) {
    auto conf = client_->config("pve", vmid);
    if (!conf || !conf->count("description")) return "";
    auto md = decode_description(conf->at("description"));
    return md ? md->id : "";
  }
  std::string key_of(int vmid) {
    auto conf = client_->config("pve", vmid);
    if (!conf || !conf->count("description")) return "";
    auto md = decode_description(conf->at("description"));
    return md ? md->host_key : "";
  }
  bool exists(const std::string& id) {
    for (int vmid : stack_->containers())
      if (id_of(vmid) == id) return true;
    return false;
  }
  // Tasks Proxmox ran for a container.
  std::size_t tasks_of(int vmid) {
    auto r = client_->call("GET", "/nodes/pve/tasks", {{"vmid", std::to_string(vmid)}});
    if (!r) return 0;
    std::size_t n = 0;
    for (auto at = r->find("UPID:"); at != std::string::npos; at = r->find("UPID:", at + 1)) ++n;
    return n;
  }
  // The client ports of the SSH connections established to a CT's sshd.
  std::set<std::string> ssh_client_ports(int vmid) {
    std::string ns = stack_->id() + "-" + std::to_string(vmid);
    std::string cmd = "ip netns exec " + ns + " ss -Htn state established '( sport = :22 )'";
    std::set<std::string> out;
    FILE* f = ::popen(cmd.c_str(), "r");
    char line[512];
    while (f && std::fgets(line, sizeof line, f)) {
      std::string l(line);  // Recv-Q Send-Q Local:Port Peer:Port
      auto colon = l.rfind(':');
      if (colon != std::string::npos)
        out.insert(l.substr(colon + 1, l.find_first_of(" \n", colon) - colon - 1));
    }
    if (f) ::pclose(f);
    return out;
  }

  std::unique_ptr<test::Stack> stack_;
  std::unique_ptr<pve::Client> client_;
};

TEST_F(HotPoolTest, AClaimServesARunningMemberOnItsPooledConnection) {
  auto c = hot_config(2);
  // Each member runs the warm-up once before it is ready; a failing one is only logged. (The
  // netns stand-in's members share the stack user's home.)
  const std::string warmups = stack_->home() + "/warmups";
  c.hot_pool_warmup = "echo warm >> \"$HOME/warmups\"; exit 3";
  c.hot_pool_member_cpuunits = 1;
  auto m = open(c);
  ASSERT_TRUE(m);
  ASSERT_TRUE(pool_settles(*m, 2));
  {
    std::ifstream in(warmups);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(all, "warm\nwarm\n");
  }
  // Members: running, bound, internet off, invisible.
  auto pooled = members(*m);
  ASSERT_EQ(pooled.size(), 2U);
  for (int vmid : pooled) {
    EXPECT_EQ(client_->status("pve", vmid)->status, "running");
    // Made and waiting at the lowest CPU weight (pvesim's lxc test checks the cgroup).
    EXPECT_EQ(client_->config("pve", vmid)->at("cpuunits"), "1");
  }
  EXPECT_TRUE(m->list().empty());
  EXPECT_TRUE(stack_->internet_set().empty());
  EXPECT_EQ(stack_->bound_ports(), ports_of(*m, pooled));

  std::map<int, std::size_t> tasks_before;
  for (int vmid : pooled) tasks_before[vmid] = tasks_of(vmid);
  CreateOptions o;
  o.internet = true;
  o.memory_mb = 512;  // more than the profile's: hot-applied
  o.labels["team"] = "ml";
  auto sb = m->create(o);
  ASSERT_TRUE(sb) << sb.error().message;
  auto info = (*sb)->info();
  ASSERT_NE(std::find(pooled.begin(), pooled.end(), info.vmid), pooled.end());
  EXPECT_EQ(tasks_of(info.vmid), tasks_before[info.vmid]) << "a claim runs no Proxmox task";
  auto before = ssh_client_ports(info.vmid);
  ASSERT_EQ(before.size(), 1U);  // the pooled connection
  auto r = (*sb)->exec("echo $SSH_CONNECTION");
  ASSERT_TRUE(r) << r.error().message;
  auto fields = r->out;  // "client_ip client_port server_ip server_port"
  auto port = fields.substr(fields.find(' ') + 1);
  port = port.substr(0, port.find(' '));
  EXPECT_TRUE(before.count(port)) << "the first command ran on a new connection " << fields;

  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{info.address->to_string()});
  auto conf = client_->config("pve", info.vmid);
  ASSERT_TRUE(conf);
  EXPECT_EQ(conf->at("memory"), "512");
  EXPECT_EQ(conf->count("cpuunits"), 0U) << "the claim gives the sandbox the default weight";
  auto md = decode_description(conf->at("description"));
  ASSERT_TRUE(md);
  EXPECT_EQ(md->id, info.id);
  EXPECT_EQ(md->phase, SandboxMetadata::Phase::kReady);
  EXPECT_EQ(md->labels.at("team"), "ml");
  EXPECT_EQ(md->host_key, info.host_key);
  EXPECT_EQ(info.hostname, "sandbox-" + std::to_string(info.vmid));

  auto p = m->pools();
  ASSERT_EQ(p.size(), 1U);
  EXPECT_EQ(p[0].claims, 1U);
  EXPECT_EQ(p[0].claim_latency.count, 1U);
  ASSERT_TRUE(pool_settles(*m, 2));  // refilled
  EXPECT_TRUE(stack_->internet_set() == std::set<std::string>{info.address->to_string()});

  // A request no profile serves (a hostname) goes the cold way.
  CreateOptions named;
  named.hostname = "named";
  auto cold = m->create(named);
  ASSERT_TRUE(cold) << cold.error().message;
  EXPECT_EQ(m->pools()[0].claims, 1U);
  EXPECT_EQ((*cold)->info().hostname, "named");
  ASSERT_TRUE((*cold)->destroy());
  ASSERT_TRUE((*sb)->destroy());
  EXPECT_TRUE(stack_->internet_set().empty());
  EXPECT_EQ(stack_->bound_ports(), ports_of(*m, members(*m)));
}

// hot_pool_refill_delay: a claim that leaves the pool half full or more starts no refill until
// claims stop for the delay (a minute here: the test runs inside it); one that leaves it below
// half refills at once, up to half (one worker, so each member is made after the last).
TEST_F(HotPoolTest, ARefillWaitsForQuietWhileThePoolIsHalfFull) {
  auto c = hot_config(2);
  c.hot_pool_refill_delay = std::chrono::minutes(1);
  c.hot_pool_refill_parallel = 1;
  auto m = open(c);
  ASSERT_TRUE(m);
  ASSERT_TRUE(pool_settles(*m, 2));
  auto a = m->create({});
  ASSERT_TRUE(a) << a.error().message;
  auto p = m->pools();
  EXPECT_EQ(p[0].ready, 1);
  EXPECT_EQ(p[0].filling, 0) << "half full: the refill waits for a quiet minute";
  auto b = m->create({});
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_TRUE(pool_settles(*m, 1)) << "below half: refilled at once, up to half";
  EXPECT_EQ(m->pools()[0].claims, 2U);
  EXPECT_EQ(m->pools()[0].misses, 0U);
  ASSERT_TRUE((*a)->destroy());
  ASSERT_TRUE((*b)->destroy());
}

// A claim adds no memory to its node (the member already runs and counts there), so a node
// whose free memory keeps a new container out still hands out its hot members.
TEST_F(HotPoolTest, AClaimNeedsNoFreeMemoryOnItsNodeANewContainerDoes) {
  auto c = hot_config(2);
  auto nodes = cluster_nodes(c);
  ASSERT_TRUE(nodes) << nodes.error().message;
  c.nodes = *nodes;
  // pvesim's node: 64 GiB, 2 GiB base use; two running 256 MB members use 512 MB more.
  const int free_mb = 64 * 1024 - 2 * 1024 - 2 * 256;
  c.nodes[0].min_free_memory_mb = free_mb - 100;  // room for nothing new
  auto m = open(c);
  ASSERT_TRUE(m);
  ASSERT_TRUE(pool_settles(*m, 2));
  ASSERT_TRUE(m->reconcile());  // the node's memory as /cluster/resources says now
  ASSERT_EQ(m->nodes()[0].mem_used, (2048ull + 512) << 20);
  auto sb = m->create({});
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_EQ(m->pools()[0].claims, 1U);
  CreateOptions named;  // served by no profile: a new container
  named.hostname = "named";
  auto cold = m->create(named);
  ASSERT_FALSE(cold);
  EXPECT_EQ(cold.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(cold.error().message.find("must stay free"), std::string::npos) << cold.error().message;
  ASSERT_TRUE((*sb)->destroy());
}

TEST_F(HotPoolTest, AFileOneCallerWritesNeverAppearsInAnotherSandbox) {
  auto m = open(hot_config(2));
  ASSERT_TRUE(m);
  ASSERT_TRUE(pool_settles(*m, 2));
  auto a = m->create({});
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_TRUE((*a)->write_file("/tmp/secret", "of a\n"));
  auto wrote = (*a)->exec("echo more >> /tmp/secret; cat /tmp/secret");
  ASSERT_TRUE(wrote) << wrote.error().message;
  EXPECT_EQ(wrote->out, "of a\nmore\n");
  auto b = m->create({});  // the other member, made before a wrote anything
  ASSERT_TRUE(b) << b.error().message;
  auto seen = (*b)->exec("cat /tmp/secret");
  ASSERT_TRUE(seen) << seen.error().message;
  EXPECT_NE(seen->exit_code, 0) << seen->out;
  ASSERT_TRUE((*a)->destroy());
  ASSERT_TRUE(pool_settles(*m, 2));  // refilled after a was written and destroyed
  auto c = m->create({});
  ASSERT_TRUE(c) << c.error().message;
  auto later = (*c)->exec("ls -A /tmp");
  ASSERT_TRUE(later) << later.error().message;
  EXPECT_EQ(later->out.find("secret"), std::string::npos) << later->out;
  ASSERT_TRUE((*b)->destroy());
  ASSERT_TRUE((*c)->destroy());
}

TEST_F(HotPoolTest, AMemberStoppedOrChangedBehindOurBackIsReplacedNeverHandedOut) {
  auto m = open(hot_config(1));
  ASSERT_TRUE(m);
  ASSERT_TRUE(pool_settles(*m, 1));
  int stopped = members(*m).at(0);
  std::string stopped_id = id_of(stopped), stopped_key = key_of(stopped);
  auto upid = client_->stop("pve", stopped);
  ASSERT_TRUE(upid);
  ASSERT_TRUE(client_->wait_task(*upid));
  auto sb = m->create({});
  ASSERT_TRUE(sb) << sb.error().message;
  EXPECT_NE((*sb)->info().host_key, stopped_key) << "the stopped member was handed out";
  ASSERT_TRUE(pool_settles(*m, 1));
  EXPECT_FALSE(exists(stopped_id)) << "the stopped member is destroyed";
  EXPECT_GE(m->pools()[0].replaced, 1U);

  // Changed: the claim's digest no longer matches; Proxmox refuses it, the member goes.
  int changed = members(*m).at(0);
  std::string changed_id = id_of(changed);
  ASSERT_TRUE(client_->update_config("pve", changed, {{"cores", "2"}}));
  auto sb2 = m->create({});
  ASSERT_TRUE(sb2) << sb2.error().message;
  auto conf = client_->config("pve", (*sb2)->info().vmid);
  ASSERT_TRUE(conf);
  EXPECT_EQ(conf->at("cores"), "1") << "the changed member was handed out";
  ASSERT_TRUE(pool_settles(*m, 1));
  EXPECT_FALSE(exists(changed_id)) << "the changed member is destroyed";
  EXPECT_GE(m->pools()[0].replaced, 2U);
  ASSERT_TRUE((*sb)->destroy());
  ASSERT_TRUE((*sb2)->destroy());
}

TEST_F(HotPoolTest, ARestartAdoptsHealthyMembersOfTodaysProfileAndDestroysTheRest) {
  auto c = hot_config(2);
  auto m = open(c);
  ASSERT_TRUE(m);
  ASSERT_TRUE(pool_settles(*m, 2));
  auto before = members(*m);
  m.reset();

  // Same profile: both adopted, nothing cloned, bindings kept.
  stack_->sim().reset_counts();
  m = open(c);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->pools()[0].ready, 2);
  EXPECT_EQ(members(*m), before);
  EXPECT_EQ(stack_->sim().count("POST", "/nodes/{node}/lxc/{vmid}/clone"), 0U);
  EXPECT_EQ(stack_->bound_ports(), ports_of(*m, before));
  auto sb = m->create({});  // and they still serve, on a fresh connection to their own key
  ASSERT_TRUE(sb) << sb.error().message;
  auto r = (*sb)->exec("echo adopted");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "adopted\n");
  ASSERT_TRUE((*sb)->destroy());
  ASSERT_TRUE(pool_settles(*m, 2));
  m.reset();

  // The profile changed: every member is destroyed, new ones are made.
  c.hot_pools[0].memory_mb = 384;
  std::vector<std::string> old;
  for (int vmid : stack_->containers()) old.push_back(id_of(vmid));
  m = open(c);
  ASSERT_TRUE(m);
  ASSERT_TRUE(pool_settles(*m, 2));
  for (auto& id : old) EXPECT_FALSE(exists(id)) << id;
  m.reset();

  // A pool of 0 disables it: the members go at the next start.
  c.hot_pools[0].size = 0;
  m = open(c);
  ASSERT_TRUE(m);
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_TRUE(stack_->bound_ports().empty());
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  auto cold = m->create({});
  ASSERT_TRUE(cold) << cold.error().message;
  EXPECT_EQ(m->pools()[0].claims, 0U);
  ASSERT_TRUE((*cold)->destroy());
}

// ---- SIGKILL storm (model backend: members without sshd) ------------------------------------

class HotPoolModelTest : public HotPoolTest {
 protected:
  test::StackOptions options() override {
    test::StackOptions o;
    o.backend = "model";
    return o;
  }
};

// SIGKILL a controller with a hot pool at random points (members made, claimed, creates,
// destroys from four threads), then restart: Proxmox holds exactly the live sandboxes and the
// members, the agent exactly the live sandboxes' grants and the bindings of both.
TEST_F(HotPoolModelTest, SigkillWithAHotPoolThenRestartLeavesOnlyLiveAndMembers) {
  stack_->sim().set_task_ms("vzclone", 40);
  stack_->sim().set_task_ms("vzstart", 40);
  stack_->sim().set_task_ms("vzstop", 20);
  stack_->sim().set_task_ms("vzdestroy", 20);
  constexpr int kPool = 3;
  std::mt19937 rng(static_cast<unsigned>(::getpid()));
  auto c = stack_->manager_config();
  c.hot_pools = {profile(kPool, "hot")};
  std::size_t created = 0;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    test::DriverRun run;
    run.driver = PVS_LIFECYCLE_DRIVER;
    run.out_file = stack_->dir() + "/hot-driver." + std::to_string(round);
    run.seed = static_cast<unsigned>(rng());
    run.hot_pool = kPool;
    run.finished = round == 0 ? 1 : 0;  // one create finishes on any machine
    run.run_for = milliseconds(300 + rng() % 1000);
    for (auto& line : stack_->run_driver_until_killed(run))
      if (line.rfind("create sb-", 0) == 0) ++created;

    auto m = open(c);
    ASSERT_TRUE(m);
    std::string why;
    for (int i = 0; i < 80; ++i) {
      (void)m->reconcile();
      why.clear();
      std::set<std::string> internet;
      for (auto& sb : m->list())
        if (sb.internet) internet.insert(sb.address->to_string());
      std::size_t running_members = 0;
      for (int vmid : members(*m)) {
        auto conf = client_->config("pve", vmid);
        auto md = conf && conf->count("description")
                      ? decode_description(conf->at("description"))
                      : Result<SandboxMetadata>(fail(ErrorCode::kNotFound, "gone"));
        if (md && md->phase == SandboxMetadata::Phase::kPooled && !conf->count("lock"))
          ++running_members;
        else
          why += " stray container " + std::to_string(vmid);
      }
      auto p = m->pools();
      if (running_members != static_cast<std::size_t>(p[0].ready))
        why += " members != the manager's pool";
      if (stack_->internet_set() != internet) why += " internet set differs";
      if (stack_->bound_ports() != ports_of(*m, members(*m))) why += " bindings differ";
      if (why.empty()) break;
      std::this_thread::sleep_for(milliseconds(250));
    }
    EXPECT_EQ(why, "");
    m.reset();
  }
  std::printf("10 kills with a hot pool; sandboxes created %zu\n", created);
  EXPECT_GE(created, 1U);
  c.hot_pools.clear();
  auto m = open(c);
  ASSERT_TRUE(m);
  for (auto& info : m->list()) EXPECT_TRUE(m->destroy_by_id(info.id));
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_TRUE(stack_->bound_ports().empty());
}

}  // namespace
}  // namespace pvs
