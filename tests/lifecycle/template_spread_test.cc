// Custom templates on a cluster, the pure parts (templates/spread.h): which nodes build a copy,
// which copy a node clones, and the label naming the nodes a copy serves.
#include "spread.h"

#include <gtest/gtest.h>

namespace pvs::lifecycle {
namespace {

using Names = std::vector<std::string>;

TEST(TemplateSpreadTest, NodesSharingABaseBuildOnceOthersEachTheirOwn) {
  // One template on shared storage for all: one build, on the first node.
  EXPECT_EQ(build_groups({{"pve1", 9000}, {"pve2", 9000}, {"pve3", 9000}}),
            (std::vector<Names>{{"pve1", "pve2", "pve3"}}));
  // A template per node (local storage): a build per node.
  EXPECT_EQ(build_groups({{"pve1", 9001}, {"pve2", 9002}}),
            (std::vector<Names>{{"pve1"}, {"pve2"}}));
  // Mixed, in the order of each group's first node.
  EXPECT_EQ(build_groups({{"a", 2}, {"b", 1}, {"c", 2}, {"d", 3}}),
            (std::vector<Names>{{"a", "c"}, {"b"}, {"d"}}));
  EXPECT_TRUE(build_groups({}).empty());
}

TEST(TemplateSpreadTest, ANodeClonesItsOwnCopyElseOneThatServesIt) {
  CustomTemplate t;
  t.copies = {{"pve1", 10001, "build-a", 9000, {"pve1", "pve2"}},
              {"pve2", 10002, "build-b", 9002, {"pve2"}}};
  ASSERT_TRUE(copy_for(t, "pve2"));
  EXPECT_EQ(copy_for(t, "pve2")->vmid, 10002);  // its own before a shared one
  EXPECT_EQ(copy_for(t, "pve1")->vmid, 10001);
  EXPECT_EQ(copy_for(t, "pve3"), nullptr);
  EXPECT_EQ(copy_for(CustomTemplate{}, "pve1"), nullptr);
}

TEST(TemplateSpreadTest, TheNodesLabelRoundTrips) {
  const Names all = {"pve1", "pve2", "pve3"};
  EXPECT_EQ(nodes_label({"pve1", "pve2", "pve3"}, all), "*");
  EXPECT_EQ(nodes_label({"pve1", "pve3"}, all), "pve1,pve3");
  EXPECT_EQ(nodes_label({"pve"}, {"pve"}), "pve");  // one node: its name, not "*"
  EXPECT_EQ(nodes_label({std::string(70, 'a'), std::string(70, 'b')}, all), "");  // too long
  EXPECT_EQ(parse_nodes_label("*", all, "pve1"), all);
  EXPECT_EQ(parse_nodes_label("pve1,pve3", all, "pve1"), (Names{"pve1", "pve3"}));
  EXPECT_EQ(parse_nodes_label("", all, "pve2"), Names{"pve2"});  // no label: its own node
  EXPECT_EQ(parse_nodes_label("pve3,,pve3", all, "pve2"), (Names{"pve2", "pve3"}));
}

TEST(TemplateSpreadTest, FinishOrdersCopiesByNodeAndListsTheNodesServed) {
  CustomTemplate t;
  t.copies = {{"pve3", 10003, "build-c", 9003, {"pve3"}},
              {"pve1", 10001, "build-a", 9001, {"pve1", "pve2"}}};
  finish_template(t, {"pve1", "pve2", "pve3", "pve4"});
  ASSERT_EQ(t.copies.size(), 2u);
  EXPECT_EQ(t.copies[0].node, "pve1");
  EXPECT_EQ(t.node, "pve1");
  EXPECT_EQ(t.vmid, 10001);
  EXPECT_EQ(t.id, "build-a");
  EXPECT_EQ(t.base_vmid, 9001);
  EXPECT_EQ(t.nodes, (Names{"pve1", "pve2", "pve3"}));
}

}  // namespace
}  // namespace pvs::lifecycle
