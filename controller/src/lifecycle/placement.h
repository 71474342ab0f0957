// Placement: which node of a Proxmox cluster gets a new sandbox (the first piece of the cluster
// work, #16). Pure and fast: the caller passes what it knows about each node (from
// /cluster/resources, its agent's last ping, its own registry and creates in flight); place()
// filters, then scores, and when nothing fits says for every node why, so the client learns it.
//
//   std::vector<NodeView> nodes = ...;
//   PlacementRequest request;
//   request.memory = 512ull << 20;
//   auto node = place(nodes, request);
//   if (!node) return fail(node.error());   // kUnavailable: "no node can take ...: pve2: drained"
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs::lifecycle {

struct NodeView {
  std::string name;
  bool online = false;    // /cluster/resources says "online"
  bool agent_ok = false;  // its agent answered the last ping
  bool recovered = true;  // every container on it read since start (Node::recovered)
  bool drained = false;   // an operator drained it: no new sandboxes
  std::map<std::string, std::string> labels;
  std::uint64_t mem_total = 0;        // bytes (/cluster/resources maxmem); 0: unknown, not checked
  std::uint64_t mem_used = 0;         // bytes (mem)
  std::uint64_t mem_reserved = 0;     // bytes promised to creates in flight, not in mem_used yet
  std::uint64_t min_free_memory = 0;  // bytes that must stay free after the new sandbox
  int sandboxes = 0;                  // live + in flight
  int max_sandboxes = 0;              // 0: no limit
};

struct PlacementRequest {
  std::string node;                                  // pinned; empty: any node
  std::map<std::string, std::string> node_selector;  // every pair must be among the labels
  std::uint64_t memory = 0;                          // bytes the sandbox may use
};

// Filters (online, agent reachable, not drained, selector, sandbox limit, memory left) and
// returns the node with the largest share of its memory free after the sandbox (in whole
// percent), then the fewest sandboxes, then the smallest name: creates spread, and a node with
// more headroom gets more. Errors: kInvalidArgument for a pinned node that is not in `nodes`;
// kUnavailable naming each node and why it was refused.
Result<std::string> place(const std::vector<NodeView>& nodes, const PlacementRequest& request);

}  // namespace pvs::lifecycle
