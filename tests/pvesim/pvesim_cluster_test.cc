// pvesim as a three-node cluster behind one endpoint (model backend): per-node listings and
// figures, the wrong node's answers, clone `target` and shared storage, clone parallelism, and
// a node cut from the API.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "sim.h"
#include "test_https.h"

namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;
using pvesim::testing::Answer;
using pvesim::testing::Https;

constexpr std::uint64_t kGiB = 1ull << 30;

class PvesimCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    pvesim::Options options;
    options.tokens["root@pam!test"] = "secret";
    options.auth_delay_ms = 10;
    options.default_task_ms = 10;
    for (const char* name : {"pve1", "pve2", "pve3"}) {
      pvesim::NodeOptions node;
      node.name = name;
      options.nodes.push_back(node);
    }
    options.nodes[0].templates = {9001};
    options.nodes[1].templates = {9002};
    options.shared_templates = {{9100, "pve1"}};
    auto sim = pvesim::Simulator::start(options);
    ASSERT_TRUE(sim) << sim.error().to_string();
    sim_ = std::move(*sim);
    api_ = std::make_unique<Https>(sim_->port(), "PVEAPIToken=root@pam!test=secret");
  }

  const Https& api() { return *api_; }

  // POST a task; returns its UPID ("" if refused).
  std::string task(const std::string& path, const std::string& body = "") {
    auto a = api()("POST", path, body);
    EXPECT_EQ(a.status, 200) << path << ": " << a.reason;
    return a.status == 200 ? a.data().convert<std::string>() : "";
  }

  // node name -> its /cluster/resources?type=node entry
  std::map<std::string, Object::Ptr> node_entries() {
    std::map<std::string, Object::Ptr> out;
    auto list = api()("GET", "/cluster/resources?type=node").array();
    for (std::size_t i = 0; list && i < list->size(); ++i)
      out[list->getObject(i)->getValue<std::string>("node")] = list->getObject(i);
    return out;
  }

  // vmid -> its /cluster/resources?type=vm entry
  std::map<int, Object::Ptr> guests() {
    std::map<int, Object::Ptr> out;
    auto list = api()("GET", "/cluster/resources?type=vm").array();
    for (std::size_t i = 0; list && i < list->size(); ++i)
      out[list->getObject(i)->getValue<int>("vmid")] = list->getObject(i);
    return out;
  }

  std::vector<int> listed(const std::string& node) {
    std::vector<int> out;
    auto list = api()("GET", "/nodes/" + node + "/lxc").array();
    for (std::size_t i = 0; list && i < list->size(); ++i)
      out.push_back(list->getObject(i)->getValue<int>("vmid"));
    return out;
  }

  std::unique_ptr<pvesim::Simulator> sim_;
  std::unique_ptr<Https> api_;
};

TEST_F(PvesimCluster, ResourcesListEveryNodeAndMemFollowsRunningContainers) {
  auto nodes = node_entries();
  ASSERT_EQ(nodes.size(), 3u);
  for (const auto& [name, o] : nodes) {
    EXPECT_EQ(o->getValue<std::string>("id"), "node/" + name);
    EXPECT_EQ(o->getValue<std::string>("status"), "online");
    EXPECT_EQ(o->getValue<int>("maxcpu"), 16);
    EXPECT_EQ(o->getValue<Poco::Int64>("maxmem"), static_cast<Poco::Int64>(64 * kGiB));
    EXPECT_EQ(o->getValue<Poco::Int64>("mem"), static_cast<Poco::Int64>(2 * kGiB));
    EXPECT_TRUE(o->has("cpu") && o->has("uptime")) << name;
  }
  ASSERT_EQ(api().wait_task("pve2", task("/nodes/pve2/lxc/9002/clone", "newid=200")), "OK");
  ASSERT_EQ(api().wait_task("pve2", task("/nodes/pve2/lxc/200/status/start")), "OK");
  nodes = node_entries();
  EXPECT_EQ(nodes["pve2"]->getValue<Poco::Int64>("mem"),
            static_cast<Poco::Int64>(2 * kGiB + (512ull << 20)));
  EXPECT_EQ(nodes["pve1"]->getValue<Poco::Int64>("mem"), static_cast<Poco::Int64>(2 * kGiB));
  EXPECT_EQ(guests()[200]->getValue<std::string>("node"), "pve2");
  ASSERT_EQ(api().wait_task("pve2", task("/nodes/pve2/lxc/200/status/stop")), "OK");
  EXPECT_EQ(node_entries()["pve2"]->getValue<Poco::Int64>("mem"),
            static_cast<Poco::Int64>(2 * kGiB));
  auto listing = api()("GET", "/nodes").array();
  ASSERT_EQ(listing->size(), 3u);
  EXPECT_TRUE(listing->getObject(0)->has("ssl_fingerprint"));
  // Storages: local-lvm per node, not shared; shared-rbd on every node, shared.
  auto storages = api()("GET", "/cluster/resources?type=storage").array();
  ASSERT_EQ(storages->size(), 6u);
  for (std::size_t i = 0; i < storages->size(); ++i) {
    auto s = storages->getObject(i);
    bool shared = s->getValue<std::string>("storage") == "shared-rbd";
    EXPECT_EQ(s->getValue<int>("shared"), shared ? 1 : 0);
  }
  auto on_pve2 = api()("GET", "/nodes/pve2/storage").array();
  ASSERT_EQ(on_pve2->size(), 2u);
  auto for_target = api()("GET", "/nodes/pve2/storage?target=pve3").array();
  ASSERT_EQ(for_target->size(), 1u);
  EXPECT_EQ(for_target->getObject(0)->getValue<std::string>("storage"), "shared-rbd");
  EXPECT_EQ(for_target->getObject(0)->getValue<int>("shared"), 1);
}

TEST_F(PvesimCluster, EachNodeListsItsOwnContainersAndRefusesOthers) {
  EXPECT_EQ(listed("pve1"), (std::vector<int>{9001, 9100}));
  EXPECT_EQ(listed("pve2"), (std::vector<int>{9002}));
  EXPECT_TRUE(listed("pve3").empty());
  auto wrong = api()("GET", "/nodes/pve2/lxc/9001/config");
  EXPECT_EQ(wrong.status, 500);
  EXPECT_EQ(wrong.reason, "Configuration file 'nodes/pve2/lxc/9001.conf' does not exist");
  // start has no synchronous check: its task on the wrong node fails.
  auto start = task("/nodes/pve2/lxc/9001/status/start");
  EXPECT_EQ(start.rfind("UPID:pve2:", 0), 0u) << start;
  EXPECT_EQ(api().wait_task("pve2", start),
            "Configuration file 'nodes/pve2/lxc/9001.conf' does not exist");
  auto unknown = api()("GET", "/nodes/nope/lxc");
  EXPECT_EQ(unknown.status, 500);
  EXPECT_EQ(unknown.reason,
            "hostname lookup 'nope' failed - failed to get address info for: nope: Name or "
            "service not known");
  // A task is known on its own node only.
  auto clone = task("/nodes/pve1/lxc/9001/clone", "newid=210");
  EXPECT_EQ(clone.rfind("UPID:pve1:", 0), 0u) << clone;
  EXPECT_EQ(api()("GET", "/nodes/pve2/tasks/" + clone + "/status").status, 400);
  EXPECT_EQ(api().wait_task("pve1", clone), "OK");
  EXPECT_EQ(api()("GET", "/nodes/pve2/tasks?source=all&typefilter=vzclone").array()->size(), 0u);
  EXPECT_EQ(api()("GET", "/nodes/pve1/tasks?source=all&typefilter=vzclone").array()->size(), 1u);
  // VMIDs are cluster-wide.
  auto taken = api()("POST", "/nodes/pve2/lxc/9002/clone", "newid=210");
  EXPECT_EQ(taken.status, 500);
  EXPECT_EQ(taken.reason, "CT 210 already exists on node 'pve1'");
  EXPECT_EQ(api()("GET", "/cluster/nextid").data().convert<std::string>(), "100");
}

TEST_F(PvesimCluster, CloneToAnotherNodeNeedsSharedStorage) {
  auto local = api()("POST", "/nodes/pve1/lxc/9001/clone", "newid=300&target=pve2");
  EXPECT_EQ(local.status, 500);
  EXPECT_EQ(local.reason, "can't clone CT to node 'pve2' (CT uses local storage)");
  auto config = api()("GET", "/nodes/pve1/lxc/9001/config").object();
  EXPECT_FALSE(config->has("lock"));  // nothing left behind
  EXPECT_EQ(api()("GET", "/nodes/pve1/lxc/300/config").status, 500);
  auto nowhere = api()("POST", "/nodes/pve1/lxc/9100/clone", "newid=300&target=nope");
  EXPECT_EQ(nowhere.reason, "no such cluster node 'nope'");
  // target = the node itself is dropped, as pve-container does.
  EXPECT_EQ(api().wait_task("pve1", task("/nodes/pve1/lxc/9001/clone", "newid=301&target=pve1")),
            "OK");
  EXPECT_EQ(guests()[301]->getValue<std::string>("node"), "pve1");
  // A shared template: the task runs on the source node, the clone ends up on the target.
  auto upid = task("/nodes/pve1/lxc/9100/clone", "newid=302&target=pve3");
  EXPECT_EQ(upid.rfind("UPID:pve1:", 0), 0u) << upid;
  EXPECT_EQ(api().wait_task("pve1", upid), "OK");
  auto moved = api()("GET", "/nodes/pve3/lxc/302/config").object();
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->getValue<std::string>("rootfs"), "shared-rbd:vm-302-disk-0,size=8G");
  EXPECT_EQ(api()("GET", "/nodes/pve1/lxc/302/config").status, 500);
  EXPECT_EQ(guests()[302]->getValue<std::string>("node"), "pve3");
  EXPECT_EQ(listed("pve3"), (std::vector<int>{302}));
  EXPECT_EQ(api().wait_task("pve3", task("/nodes/pve3/lxc/302/status/start")), "OK");
  EXPECT_EQ(node_entries()["pve3"]->getValue<Poco::Int64>("mem"),
            static_cast<Poco::Int64>(2 * kGiB + (512ull << 20)));
}

TEST_F(PvesimCluster, ClonesOfTwoTemplatesOverlapClonesOfOneTemplateDoNot) {
  sim_->set_task_ms("vzclone", 600);
  auto a = task("/nodes/pve1/lxc/9001/clone", "newid=400");
  auto b = task("/nodes/pve2/lxc/9002/clone", "newid=401");
  auto running = [&](const std::string& node, const std::string& upid) {
    auto o = api()("GET", "/nodes/" + node + "/tasks/" + upid + "/status").object();
    return o && o->getValue<std::string>("status") == "running";
  };
  EXPECT_TRUE(running("pve1", a) && running("pve2", b));  // both at once
  EXPECT_EQ(api().wait_task("pve1", a), "OK");
  EXPECT_EQ(api().wait_task("pve2", b), "OK");
  // One template: the second clone meets the first one's lock until that ends.
  auto first = task("/nodes/pve1/lxc/9001/clone", "newid=402");
  auto second = api()("POST", "/nodes/pve1/lxc/9001/clone", "newid=403");
  EXPECT_EQ(second.status, 500);
  EXPECT_EQ(second.reason, "CT is locked (disk)");
  EXPECT_EQ(api().wait_task("pve1", first), "OK");
  EXPECT_EQ(api().wait_task("pve1", task("/nodes/pve1/lxc/9001/clone", "newid=403")), "OK");
}

TEST_F(PvesimCluster, OfflineNodeIsCutFromTheApiAndComesBack) {
  ASSERT_EQ(api().wait_task("pve2", task("/nodes/pve2/lxc/9002/clone", "newid=500")), "OK");
  ASSERT_EQ(api().wait_task("pve2", task("/nodes/pve2/lxc/500/status/start")), "OK");
  sim_->set_task_ms("vzclone", 300);
  auto pending = task("/nodes/pve2/lxc/9002/clone", "newid=501");
  ASSERT_TRUE(sim_->set_node_offline("pve2", true));
  for (const char* path :
       {"/nodes/pve2/lxc", "/nodes/pve2/lxc/500/status/current", "/nodes/pve2/storage"}) {
    auto a = api()("GET", path);
    EXPECT_EQ(a.status, 595) << path;
    EXPECT_EQ(a.reason, "No route to host") << path;
    EXPECT_EQ(a.body, "") << path;
  }
  EXPECT_EQ(api()("GET", "/nodes/pve2/tasks/" + pending + "/status").status, 595);
  EXPECT_EQ(api()("POST", "/nodes/pve2/lxc/9002/clone", "newid=1").status, 595);
  auto nodes = node_entries();
  EXPECT_EQ(nodes["pve2"]->getValue<std::string>("status"), "offline");
  EXPECT_FALSE(nodes["pve2"]->has("mem"));
  EXPECT_EQ(nodes["pve1"]->getValue<std::string>("status"), "online");
  EXPECT_EQ(guests()[500]->getValue<std::string>("status"), "unknown");
  EXPECT_EQ(guests()[9001]->getValue<std::string>("status"), "stopped");
  auto listing = api()("GET", "/nodes").array();
  for (std::size_t i = 0; i < listing->size(); ++i) {
    auto o = listing->getObject(i);
    bool down = o->getValue<std::string>("node") == "pve2";
    EXPECT_EQ(o->getValue<std::string>("status"), down ? "offline" : "online");
  }
  EXPECT_EQ(listed("pve1"), (std::vector<int>{9001, 9100}));
  EXPECT_EQ(api().wait_task("pve1", task("/nodes/pve1/lxc/9001/clone", "newid=502")), "OK");
  // Back online (over the control endpoint): all as it was, the task ran on meanwhile.
  EXPECT_EQ(api()("POST", "/_pvesim/faults", R"({"offline":{"pve2":false}})").status, 200);
  EXPECT_EQ(api().wait_task("pve2", pending), "OK");
  EXPECT_EQ(listed("pve2"), (std::vector<int>{500, 501, 9002}));
  EXPECT_EQ(guests()[500]->getValue<std::string>("status"), "running");
  EXPECT_EQ(node_entries()["pve2"]->getValue<std::string>("status"), "online");
  EXPECT_FALSE(sim_->set_node_offline("nope", true));
  EXPECT_EQ(api()("POST", "/_pvesim/faults", R"({"offline":{"nope":true}})").status, 400);
}

pvesim::NodeOptions node(const std::string& name, int template_vmid) {
  pvesim::NodeOptions out;
  out.name = name;
  out.templates = {template_vmid};
  return out;
}

TEST(PvesimClusterOptions, NoNodesIsTodaysSingleNodeAndBadClustersAreRefused) {
  pvesim::Options options;
  options.tokens["root@pam!test"] = "secret";
  auto sim = pvesim::Simulator::start(options);
  ASSERT_TRUE(sim) << sim.error().to_string();
  Https api((*sim)->port(), "PVEAPIToken=root@pam!test=secret");
  auto all = api("GET", "/cluster/resources").array();
  ASSERT_EQ(all->size(), 3u);  // lxc/9000, node/pve, storage/pve/local-lvm
  EXPECT_EQ(all->getObject(0)->getValue<std::string>("node"), "pve");
  EXPECT_EQ(all->getObject(1)->getValue<std::string>("id"), "node/pve");
  EXPECT_EQ(all->getObject(2)->getValue<std::string>("id"), "storage/pve/local-lvm");
  EXPECT_EQ(all->getObject(2)->getValue<int>("shared"), 0);
  sim->reset();
  options.nodes = {node("pve1", 9001), node("pve1", 9002)};
  EXPECT_FALSE(pvesim::Simulator::start(options));  // a name twice
  options.nodes = {node("pve1", 9001), node("pve2", 9001)};
  EXPECT_FALSE(pvesim::Simulator::start(options));  // a VMID twice
  options.nodes = {node("pve1", 9001)};
  options.shared_templates = {{9100, "pve9"}};
  EXPECT_FALSE(pvesim::Simulator::start(options));  // no such node
}

}  // namespace
