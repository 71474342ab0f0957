#include "placement.h"

#include <cstdio>

#include "node.h"

namespace pvs::lifecycle {
namespace {

std::string gib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

// Why `n` cannot take the sandbox; empty if it can. *free_after: its free memory afterwards.
std::string refusal(const NodeView& n, const PlacementRequest& r, std::uint64_t* free_after) {
  if (!n.online) return "offline";
  if (!n.agent_ok) return "agent unreachable";
  if (!n.recovered) return Node::kRecovering;
  if (n.drained) return "drained";
  for (const auto& [key, value] : r.node_selector) {
    auto it = n.labels.find(key);
    if (it == n.labels.end() || it->second != value)
      return "label " + key + "=" + value + " missing";
  }
  if (n.max_sandboxes > 0 && n.sandboxes >= n.max_sandboxes)
    return "full (" + std::to_string(n.sandboxes) + " of " + std::to_string(n.max_sandboxes) +
           " sandboxes)";
  if (n.mem_total == 0) return "";  // memory unknown: not a reason to refuse
  std::uint64_t taken = n.mem_used + n.mem_reserved + r.memory;
  std::uint64_t free = taken < n.mem_total ? n.mem_total - taken : 0;
  if (taken > n.mem_total || free < n.min_free_memory)
    return gib(free) + " free after the sandbox, " + gib(n.min_free_memory) + " must stay free";
  *free_after = free;
  return "";
}

}  // namespace

Result<std::string> place(const std::vector<NodeView>& nodes, const PlacementRequest& r) {
  const NodeView* best = nullptr;
  std::uint64_t best_percent = 0;
  std::string why;
  bool pinned_seen = false;
  for (const auto& n : nodes) {
    if (!r.node.empty() && n.name != r.node) continue;
    pinned_seen = true;
    std::uint64_t free_after = 0;
    if (auto no = refusal(n, r, &free_after); !no.empty()) {
      why += (why.empty() ? "" : "; ") + n.name + ": " + no;
      continue;
    }
    std::uint64_t percent = n.mem_total ? free_after * 100 / n.mem_total : 0;
    bool better =
        !best || percent > best_percent ||
        (percent == best_percent && (n.sandboxes < best->sandboxes ||
                                     (n.sandboxes == best->sandboxes && n.name < best->name)));
    if (better) {
      best = &n;
      best_percent = percent;
    }
  }
  if (!r.node.empty() && !pinned_seen)
    return fail(ErrorCode::kInvalidArgument, "no node " + r.node + " in the cluster");
  if (!best)
    return fail(
        ErrorCode::kUnavailable,
        "no node can take the sandbox" + (why.empty() ? std::string(": no nodes") : ": " + why));
  return best->name;
}

}  // namespace pvs::lifecycle
