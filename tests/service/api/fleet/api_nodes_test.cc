// The cluster's REST surface on two nodes (pvesim model backend, a real agent and ruleset per
// node): GET /v1/nodes, drain/undrain, a create pinned to a node or selecting by node labels,
// the per-node metrics and the audit of drains.
#include <gtest/gtest.h>

#include <algorithm>

#include "service/support/api_fixture.h"

namespace pvs::service {
namespace {

class ApiClusterTest : public ApiTest {
 protected:
  test::StackOptions stack_options() override {
    test::StackOptions o = ApiTest::stack_options();
    o.nodes = 2;
    return o;
  }
  void adjust(ManagerConfig& c) override {
    c.nodes.at(0).labels = {{"zone", "a"}};
    c.nodes.at(1).labels = {{"zone", "b"}};
  }
  Poco::JSON::Object::Ptr node(const std::string& name) {
    auto r = call("GET", "/v1/nodes", "", "tok-root");
    EXPECT_EQ(r.status, 200) << r.body;
    auto list = json(r.body)->getArray("nodes");
    for (std::size_t i = 0; list && i < list->size(); ++i) {
      auto o = list->getObject(static_cast<unsigned>(i));
      if (o->getValue<std::string>("name") == name) return o;
    }
    ADD_FAILURE() << "no node " << name << " in " << r.body;
    return new Poco::JSON::Object;
  }
  std::string node_of(const HttpReply& created) {
    EXPECT_EQ(created.status, 201) << created.body;
    return created.status == 201 ? json(created.body)->getValue<std::string>("node") : "";
  }
};

TEST_F(ApiClusterTest, NodesDrainPinsSelectorsMetricsAndAudit) {
  auto nodes = call("GET", "/v1/nodes", "", "tok-root");
  ASSERT_EQ(nodes.status, 200) << nodes.body;
  ASSERT_EQ(json(nodes.body)->getArray("nodes")->size(), 2u) << nodes.body;
  auto pve1 = node("pve1");
  EXPECT_TRUE(pve1->getValue<bool>("online")) << nodes.body;
  EXPECT_TRUE(pve1->getValue<bool>("agent_ok")) << nodes.body;
  EXPECT_FALSE(pve1->getValue<bool>("drained"));
  EXPECT_TRUE(pve1->getValue<bool>("recovered")) << nodes.body;
  EXPECT_TRUE(pve1->isNull("error"));
  EXPECT_EQ(pve1->getValue<std::string>("sandbox_cidr"), "10.91.0.0/16");
  EXPECT_EQ(pve1->getObject("labels")->getValue<std::string>("zone"), "a");
  EXPECT_GT(pve1->getValue<std::uint64_t>("free_addresses"), 60000u);
  EXPECT_EQ(call("GET", "/v1/nodes").status, 403);
  EXPECT_EQ(call("POST", "/v1/nodes/pve1/drain").status, 403);

  // Pinned, by selector, unknown and malformed nodes, a selector no node satisfies.
  EXPECT_EQ(node_of(call("POST", "/v1/sandboxes", R"({"node":"pve2"})")), "pve2");
  EXPECT_EQ(node_of(call("POST", "/v1/sandboxes", R"({"node_selector":{"zone":"a"}})")), "pve1");
  auto unknown = call("POST", "/v1/sandboxes", R"({"node":"pve9"})");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_NE(unknown.body.find("no node \\\"pve9\\\" in the cluster"), std::string::npos)
      << unknown.body;
  auto bad = call("POST", "/v1/sandboxes", R"({"node":"pve_1"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("node: must be a node name"), std::string::npos) << bad.body;
  auto none = call("POST", "/v1/sandboxes", R"({"node_selector":{"zone":"c"}})");
  EXPECT_EQ(none.status, 503) << none.body;
  EXPECT_NE(none.body.find("label zone=c missing"), std::string::npos) << none.body;

  // Drain pve2: creates go to pve1, a create pinned to pve2 is refused; undrain restores it.
  auto drained = call("POST", "/v1/nodes/pve2/drain", "", "tok-root");
  ASSERT_EQ(drained.status, 200) << drained.body;
  EXPECT_TRUE(json(drained.body)->getValue<bool>("drained"));
  EXPECT_EQ(json(drained.body)->getValue<int>("sandboxes"), 1);
  EXPECT_EQ(node_of(call("POST", "/v1/sandboxes", "{}", "tok-bob")), "pve1");
  auto refused = call("POST", "/v1/sandboxes", R"({"node":"pve2"})", "tok-bob");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("drained"), std::string::npos) << refused.body;
  EXPECT_EQ(call("POST", "/v1/nodes/pve9/drain", "", "tok-root").status, 404);
  EXPECT_EQ(call("POST", "/v1/nodes/-x/drain", "", "tok-root").status, 400);
  auto metrics = call("GET", "/metrics", "", "");
  EXPECT_NE(metrics.body.find("pvs_node_recovered{node=\"pve2\"} 1"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("pvs_node_drained{node=\"pve2\"} 1"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("pvs_node_online{node=\"pve1\"} 1"), std::string::npos);
  EXPECT_NE(metrics.body.find("pvs_node_sandboxes{node=\"pve1\"} 2"), std::string::npos);
  EXPECT_FALSE(
      json(call("POST", "/v1/nodes/pve2/undrain", "", "tok-root").body)->getValue<bool>("drained"));
  EXPECT_FALSE(node("pve2")->getValue<bool>("drained"));
  EXPECT_EQ(node_of(call("POST", "/v1/sandboxes", R"({"node":"pve2"})", "tok-bob")), "pve2");

  std::vector<int> drains;  // the statuses of audited drains
  for (const auto& line : audit_lines()) {
    if (line->getValue<std::string>("action") != "node.drain") continue;
    drains.push_back(line->getValue<int>("status"));
    if (drains.back() != 200) continue;
    EXPECT_EQ(line->getValue<std::string>("token"), "root");
    EXPECT_EQ(line->getObject("params")->getValue<std::string>("node"), "pve2");
  }
  EXPECT_EQ(std::count(drains.begin(), drains.end(), 200), 1);
  EXPECT_EQ(std::count(drains.begin(), drains.end(), 404), 1);
}

}  // namespace
}  // namespace pvs::service
