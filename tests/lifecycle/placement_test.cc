// Placement over node views: filters, the score, and the reasons a client reads.
#include "placement.h"

#include <gtest/gtest.h>

namespace pvs::lifecycle {
namespace {

constexpr std::uint64_t kGiB = 1ull << 30;

NodeView node(const std::string& name, std::uint64_t used_gib, int sandboxes = 0) {
  NodeView n;
  n.name = name;
  n.online = n.agent_ok = true;
  n.mem_total = 64 * kGiB;
  n.mem_used = used_gib * kGiB;
  n.sandboxes = sandboxes;
  return n;
}

PlacementRequest request(std::string pinned = "", std::map<std::string, std::string> selector = {},
                         std::uint64_t memory = 0) {
  PlacementRequest r;
  r.node = std::move(pinned);
  r.node_selector = std::move(selector);
  r.memory = memory;
  return r;
}

TEST(Placement, MostFreeMemoryThenFewestSandboxesThenName) {
  std::vector<NodeView> nodes = {node("pve1", 40), node("pve2", 10), node("pve3", 20)};
  EXPECT_EQ(*place(nodes, {}), "pve2");
  nodes[1].mem_reserved = 20 * kGiB;  // creates in flight count
  EXPECT_EQ(*place(nodes, {}), "pve3");
  std::vector<NodeView> even = {node("b", 10, 5), node("a", 10, 5), node("c", 10, 2)};
  EXPECT_EQ(*place(even, {}), "c");
  even[2].sandboxes = 5;
  EXPECT_EQ(*place(even, {}), "a");
}

TEST(Placement, FiltersSayWhy) {
  std::vector<NodeView> nodes = {node("pve1", 0), node("pve2", 0),  node("pve3", 0),
                                 node("pve4", 0), node("pve5", 63), node("pve6", 0)};
  nodes[0].online = false;
  nodes[1].agent_ok = false;
  nodes[2].drained = true;
  nodes[3].max_sandboxes = 2;
  nodes[3].sandboxes = 2;
  nodes[4].min_free_memory = kGiB;
  nodes[5].recovered = false;
  auto none = place(nodes, request("", {}, kGiB / 2));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(none.error().message,
            "no node can take the sandbox: pve1: offline; pve2: agent unreachable; pve3: drained; "
            "pve4: full (2 of 2 sandboxes); pve5: 0.5 GiB free after the sandbox, 1.0 GiB must "
            "stay free; pve6: recovering (not every container on it read yet)");
  EXPECT_EQ(place({}, {}).error().message, "no node can take the sandbox: no nodes");
}

TEST(Placement, PinnedNodeAndSelector) {
  std::vector<NodeView> nodes = {node("pve1", 0), node("pve2", 30)};
  nodes[1].labels["gpu"] = "yes";
  EXPECT_EQ(*place(nodes, request("pve2")), "pve2");
  EXPECT_EQ(place(nodes, request("pve9")).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(*place(nodes, request("", {{"gpu", "yes"}})), "pve2");
  auto none = place(nodes, request("", {{"gpu", "no"}}));
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("pve1: label gpu=no missing"), std::string::npos);
  nodes[1].drained = true;
  auto pinned = place(nodes, request("pve2"));
  ASSERT_FALSE(pinned);
  EXPECT_EQ(pinned.error().message, "no node can take the sandbox: pve2: drained");
}

}  // namespace
}  // namespace pvs::lifecycle
