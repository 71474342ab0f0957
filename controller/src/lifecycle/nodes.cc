// The cluster: the nodes' configuration checked and turned into Node state, what Proxmox says
// of each node (/cluster/resources), placement of a create with its reservation, drain, and
// the node listing for operators. docs/architecture.md ("Cluster") says how it fits together.
#include <algorithm>

#include "core.h"
#include "placement.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"

namespace pvs::lifecycle {
namespace {

// A Proxmox node name (pve-node format: a DNS label).
bool valid_node_name(std::string_view name) {
  return !name.empty() && name.size() <= 63 &&
         std::all_of(name.begin(), name.end(),
                     [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '-';
                     }) &&
         name.front() != '-' && name.back() != '-';
}

bool overlap(const Cidr& a, const Cidr& b) {
  return a.contains(b.network()) || b.contains(a.network());
}

}  // namespace

}  // namespace pvs::lifecycle

namespace pvs {

Result<std::vector<NodeConfig>> cluster_nodes(const ManagerConfig& c) {
  std::vector<NodeConfig> nodes = c.nodes;
  if (nodes.empty()) {
    if (c.node.empty()) return fail(ErrorCode::kInvalidArgument, "node is required");
    NodeConfig n;
    n.name = c.node;
    n.agent = c.agent;
    n.bridge = c.bridge;
    n.sandbox_cidr = c.sandbox_cidr;
    n.gateway = c.gateway;
    n.reserved = c.reserved;
    nodes.push_back(std::move(n));
  }
  auto bad = [](const std::string& what) {
    return fail(ErrorCode::kInvalidArgument, "nodes: " + what);
  };
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto& n = nodes[i];
    if (!lifecycle::valid_node_name(n.name)) return bad("bad node name " + pvs::quoted(n.name, 64));
    if (n.template_vmid == 0) n.template_vmid = c.template_vmid;
    if (n.template_vmid <= 0) return bad(n.name + ": template_vmid is required");
    if (n.template_replicas == 0) n.template_replicas = c.template_replicas;
    if (n.template_replicas < 1 || n.template_replicas > 16)
      return bad(n.name + ": template_replicas must be 1..16 (0: the controller-wide value)");
    if (n.bridge.empty()) return bad(n.name + ": bridge is required");
    if (n.max_sandboxes < 0 || n.min_free_memory_mb < 0)
      return bad(n.name + ": max_sandboxes and min_free_memory_mb must be >= 0");
    if (auto v = validate_labels(n.labels); !v) return bad(n.name + ": " + v.error().message);
    for (std::size_t j = 0; j < i; ++j) {
      if (nodes[j].name == n.name) return bad("node " + n.name + " appears twice");
      if (lifecycle::overlap(nodes[j].sandbox_cidr, n.sandbox_cidr))
        return bad("the sandbox networks of " + nodes[j].name + " (" +
                   nodes[j].sandbox_cidr.to_string() + ") and " + n.name + " (" +
                   n.sandbox_cidr.to_string() + ") overlap: each node routes its own");
    }
  }
  return nodes;
}

}  // namespace pvs

namespace pvs::lifecycle {

Node* ManagerCore::find_node(std::string_view name) const {
  for (auto& n : nodes_)
    if (n->cfg.name == name) return n.get();
  return nullptr;
}

std::string ManagerCore::template_home(int template_vmid, const Node& n) const {
  std::lock_guard lock(mu_);
  auto it = template_nodes_.find(template_vmid);
  return it == template_nodes_.end() ? n.cfg.name : it->second;
}

// With one node every template is on it. In a cluster, a template on shared storage lives on
// one node and is cloned from there with `target`.
Status ManagerCore::locate_templates() {
  if (nodes_.size() < 2) return {};
  auto vms = pve_.resources("vm");
  if (!vms) return fail(pve_error(vms.error(), "cluster resources"));
  std::lock_guard lock(mu_);
  for (auto& r : *vms)
    if (r.is_template && !r.node.empty()) template_nodes_[r.vmid] = r.node;
  return {};
}

Status ManagerCore::refresh_nodes() {
  auto rs = pve_.resources("node");
  if (!rs) return fail(pve_error(rs.error(), "cluster resources"));
  std::lock_guard lock(mu_);
  for (auto& n : nodes_) {
    auto it = std::find_if(rs->begin(), rs->end(), [&](const pve::ClusterResource& r) {
      return r.type == "node" && r.node == n->cfg.name;
    });
    if (it == rs->end()) {
      n->online = false;
      n->error = "not in /cluster/resources";
      continue;
    }
    n->online = it->status == "online";
    if (!n->online) n->error = "status " + it->status + " in /cluster/resources";
    n->mem_total = it->maxmem;
    n->mem_used = it->mem;
  }
  return {};
}

Result<Node*> ManagerCore::place_create(const CreateOptions& o, const std::set<const Node*>& only,
                                        std::uint64_t memory) {
  PlacementRequest request;
  request.node = o.node;
  request.node_selector = o.node_selector;
  request.memory = memory;
  std::lock_guard lock(mu_);
  std::map<const Node*, int> live;
  for (auto& [id, sb] : registry_) ++live[&sb->node()];
  std::vector<NodeView> views;
  for (auto& n : nodes_) {
    if (!only.empty() && !only.count(n.get())) continue;
    NodeView v;
    v.name = n->cfg.name;
    v.online = n->online;
    v.agent_ok = n->agent_ok;
    v.recovered = n->recovered;
    v.drained = n->drained;
    v.labels = n->cfg.labels;
    v.mem_total = n->mem_total;
    v.mem_used = n->mem_used;
    v.mem_reserved = n->mem_reserved;
    v.min_free_memory = static_cast<std::uint64_t>(n->cfg.min_free_memory_mb) << 20;
    v.sandboxes = live[n.get()] + n->creating;
    v.max_sandboxes = n->cfg.max_sandboxes;
    views.push_back(std::move(v));
  }
  auto name = place(views, request);
  if (!name) return fail(name.error());
  Node* n = find_node(*name);
  ++n->creating;
  n->mem_reserved += request.memory;
  return n;
}

void ManagerCore::unreserve(Node& n, std::uint64_t memory, bool made) {
  std::lock_guard lock(mu_);
  --n.creating;
  n.mem_reserved -= std::min(n.mem_reserved, memory);
  // Until the next /cluster/resources listing shows it, the new sandbox counts as used.
  if (made) n.mem_used += memory;
}

Status ManagerCore::drain(const std::string& name, bool drained) {
  Node* n = find_node(name);
  if (!n) return fail(ErrorCode::kNotFound, "no node " + pvs::quoted(name, 64));
  if (n->drained.exchange(drained) != drained)
    log::info(std::string(drained ? "drained " : "undrained ") + name);
  hot_cv_.notify_all();
  pool_cv_.notify_all();
  return {};
}

std::vector<NodeInfo> ManagerCore::nodes() const {
  std::vector<NodeInfo> out;
  std::lock_guard lock(mu_);
  std::map<const Node*, int> live;
  for (auto& [id, sb] : registry_) ++live[&sb->node()];
  for (auto& n : nodes_) {
    NodeInfo i;
    i.name = n->cfg.name;
    i.online = n->online;
    i.agent_ok = n->agent_ok;
    i.drained = n->drained;
    i.recovered = n->recovered;
    if (!i.online || !i.agent_ok) i.error = n->error.empty() ? "agent unreachable" : n->error;
    if (i.error.empty() && !i.recovered) i.error = n->error.empty() ? Node::kRecovering : n->error;
    i.labels = n->cfg.labels;
    i.bridge = n->cfg.bridge;
    i.sandbox_cidr = n->cfg.sandbox_cidr;
    i.template_vmid = n->cfg.template_vmid;
    i.sandboxes = live[n.get()];
    i.creating = n->creating;
    i.max_sandboxes = n->cfg.max_sandboxes;
    i.mem_total = n->mem_total;
    i.mem_used = n->mem_used;
    i.free_addresses = n->addrs->free();
    {
      std::lock_guard totals(n->totals_mu);
      i.egress_allowed = n->egress_allowed.total;
      i.egress_refused = n->egress_refused.total;
      i.egress_connections_refused = n->egress_connections_refused.total;
    }
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace pvs::lifecycle
