// What /metrics shows: the metric families the API declares, and the collector that copies the
// Manager's state (sandboxes, peers, pools, nodes) into them at each scrape.
#include "app/api.h"

namespace pvs::service {

namespace {
// The Manager's peers whose calls /metrics shows.
struct CallPeer {
  const char* prefix;
  const char* what;
  CallStats ManagerStats::*stats;
};
constexpr CallPeer kCallPeers[] = {
    {"pvs_proxmox_request", "Proxmox API requests (retries included)",
     &ManagerStats::proxmox_calls},
    {"pvs_proxmox_task", "Proxmox tasks waited for (clone, start, stop, destroy, ...)",
     &ManagerStats::proxmox_tasks},
    {"pvs_agent_request", "Requests to pve-sandbox-agent", &ManagerStats::agent_calls},
    {"pvs_sandbox_pause", "Sandbox pauses (stop, disk kept)", &ManagerStats::pauses},
    {"pvs_sandbox_resume", "Sandbox resumes (start, until SSH answers)", &ManagerStats::resumes},
};
}  // namespace

void Api::declare_metrics(Metrics& m) {
  std::vector<double> call_buckets;  // pvs::CallStats' bounds
  for (auto ms : CallStats::kBucketBoundsMs) call_buckets.push_back(ms / 1000.0);
  m.declare_counter("pvs_http_requests_total", "HTTP requests by method, route and status.");
  m.declare_histogram("pvs_http_request_duration_seconds", "HTTP request latency by route.",
                      Metrics::latency_buckets());
  m.declare_gauge("pvs_manager_ready", "1 once the Manager recovered its state from Proxmox.");
  m.declare_gauge("pvs_sandboxes_live", "Live sandboxes.");
  m.declare_gauge("pvs_sandboxes_paused", "Live sandboxes that are paused.");
  m.declare_gauge("pvs_volumes", "Volumes (their holders) known.");
  m.declare_counter("pvs_sandbox_creates_total", "Sandboxes created.");
  m.declare_counter("pvs_sandbox_create_failures_total", "Sandbox creations that failed.");
  m.declare_counter("pvs_sandbox_destroys_total", "Sandboxes destroyed.");
  m.declare_counter("pvs_sandbox_destroy_failures_total", "Sandbox destructions that failed.");
  m.declare_counter("pvs_reconciles_total", "Reconciler runs.");
  m.declare_counter("pvs_reconcile_failures_total", "Reconciler runs that failed.");
  m.declare_counter("pvs_orphans_destroyed_total", "Orphan containers destroyed by recovery.");
  m.declare_counter("pvs_expired_destroyed_total", "Sandboxes destroyed when their TTL ended.");
  m.declare_counter("pvs_expired_paused_total",
                    "Sandboxes paused when their TTL ended (on_expiry: pause).");
  m.declare_counter("pvs_auto_resumes_total",
                    "Paused sandboxes a data-plane call resumed (auto_resume).");
  m.declare_counter("pvs_port_requests_total",
                    "Requests proxied to sandboxes' ports (kind: http, or upgrade: a WebSocket).");
  m.declare_counter("pvs_port_bytes_total",
                    "Bytes proxied to sandboxes' ports (direction: in from clients, out to them).");
  m.declare_gauge("pvs_port_upgrades_open", "Upgraded connections to sandboxes' ports open now.");
  m.declare_gauge("pvs_quarantined_addresses", "Addresses waiting for a confirmed revoke.");
  m.declare_gauge("pvs_warm_pool_containers", "Stopped clones ready in the warm pool.");
  m.declare_counter("pvs_warm_pool_hits_total", "Creates served from the warm pool.");
  m.declare_counter("pvs_warm_pool_misses_total", "Creates that had to clone.");
  m.declare_gauge("pvs_pool_size", "Members a pool keeps (hot profiles, and pool=\"warm\").");
  m.declare_gauge("pvs_pool_ready", "Pool members that can be claimed now.");
  m.declare_gauge("pvs_pool_filling", "Pool members being made.");
  m.declare_counter("pvs_pool_claims_total", "Creates a pool served.");
  m.declare_counter("pvs_pool_misses_total", "Creates a pool would have served, none ready.");
  m.declare_counter("pvs_pool_refill_failures_total", "Pool members that failed to be made.");
  m.declare_counter("pvs_pool_replaced_total",
                    "Hot members destroyed: failed a check, stopped or changed.");
  m.declare_histogram("pvs_pool_claim_duration_seconds",
                      "Creates served by a hot pool: latency in the Manager.", call_buckets);
  m.declare_gauge("pvs_node_online", "1 when Proxmox lists the node online and it answers.");
  m.declare_gauge("pvs_node_agent_ok", "1 when the node's agent answered its last ping.");
  m.declare_gauge("pvs_node_drained", "1 while the node takes no new sandboxes.");
  m.declare_gauge("pvs_node_recovered",
                  "1 once every container on the node was read since the controller started.");
  m.declare_gauge("pvs_node_sandboxes", "Live sandboxes on the node.");
  m.declare_gauge("pvs_node_creating", "Creates placed on the node and in flight.");
  m.declare_gauge("pvs_node_memory_total_bytes", "The node's memory (/cluster/resources).");
  m.declare_gauge("pvs_node_memory_used_bytes", "The node's memory in use (/cluster/resources).");
  m.declare_gauge("pvs_node_free_addresses", "Free addresses in the node's sandbox network.");
  m.declare_counter("pvs_egress_decisions_total",
                    "Egress decisions on a node for sandboxes with an allowlist: names the "
                    "resolver allowed or refused, connections the ruleset refused.");
  m.declare_counter("pvs_policy_decisions_total", "Policy decisions by action and verdict.");
  m.declare_gauge("pvs_approvals_pending", "Calls waiting for a person's approval.");
  m.declare_histogram("pvs_approval_wait_seconds", "How long calls waited for an approval.",
                      {1, 5, 15, 30, 60, 120, 300, 900, 3600});
  m.declare_counter("pvs_webhook_deliveries_total",
                    "Approval webhook attempts by outcome (delivered, retried, failed, dropped).");
  m.declare_counter("pvs_exec_total", "Commands run, by result (ok, nonzero, timeout, error).");
  m.declare_histogram("pvs_exec_duration_seconds", "Command latency through the API.",
                      Metrics::latency_buckets());
  m.declare_counter("pvs_audit_failures_total", "Audit records that could not be written.");
  m.declare_counter("pvs_rejected_total", "Requests rejected by limits (413, 429).");
  // The Manager's calls to its peers (pvs::CallStats), as histograms with its bucket bounds.
  for (const auto& peer : kCallPeers) {
    m.declare_histogram(std::string(peer.prefix) + "_duration_seconds",
                        std::string(peer.what) + ": latency.", call_buckets);
    m.declare_counter(std::string(peer.prefix) + "_errors_total",
                      std::string(peer.what) + " that failed.");
  }
}

namespace {

// Each node's health and capacity (GET /v1/nodes in numbers).
void collect_nodes(Metrics& m, const std::vector<NodeInfo>& nodes) {
  for (const NodeInfo& n : nodes) {
    MetricLabels l{{"node", n.name}};
    m.set("pvs_node_online", l, n.online ? 1 : 0);
    m.set("pvs_node_agent_ok", l, n.agent_ok ? 1 : 0);
    m.set("pvs_node_drained", l, n.drained ? 1 : 0);
    m.set("pvs_node_recovered", l, n.recovered ? 1 : 0);
    m.set("pvs_node_sandboxes", l, n.sandboxes);
    m.set("pvs_node_creating", l, n.creating);
    m.set("pvs_node_memory_total_bytes", l, static_cast<double>(n.mem_total));
    m.set("pvs_node_memory_used_bytes", l, static_cast<double>(n.mem_used));
    m.set("pvs_node_free_addresses", l, static_cast<double>(n.free_addresses));
    for (auto [decision, total] :
         {std::pair{"allow", n.egress_allowed}, std::pair{"refuse", n.egress_refused},
          std::pair{"refuse_connection", n.egress_connections_refused}}) {
      MetricLabels labels{{"decision", decision}, {"node", n.name}};
      double current = m.value("pvs_egress_decisions_total", labels);  // a counter: mirrored
      if (static_cast<double>(total) > current)
        m.inc("pvs_egress_decisions_total", labels, static_cast<double>(total) - current);
    }
  }
}

}  // namespace

void Api::collect(Metrics& m) {
  m.set("pvs_approvals_pending", {}, static_cast<double>(gate_.approvals().pending()));
  m.set("pvs_port_upgrades_open", {}, static_cast<double>(port_routes_.upgrades_open()));
  auto manager = this->manager();
  m.set("pvs_manager_ready", {}, manager ? 1 : 0);
  if (!manager) return;
  ManagerStats s = manager->stats();
  m.set("pvs_sandboxes_live", {}, static_cast<double>(s.live));
  m.set("pvs_sandboxes_paused", {}, static_cast<double>(s.paused));
  m.set("pvs_volumes", {}, static_cast<double>(s.volumes));
  m.set("pvs_quarantined_addresses", {}, static_cast<double>(s.quarantined_addresses));
  m.set("pvs_warm_pool_containers", {}, static_cast<double>(s.pooled));
  // Counters mirror the Manager's own (monotonic) counters.
  auto mirror = [&m](const std::string& name, std::uint64_t v, const MetricLabels& l = {}) {
    double current = m.value(name, l);
    if (static_cast<double>(v) > current) m.inc(name, l, static_cast<double>(v) - current);
  };
  mirror("pvs_sandbox_creates_total", s.creates);
  mirror("pvs_sandbox_create_failures_total", s.create_failures);
  mirror("pvs_sandbox_destroys_total", s.destroys);
  mirror("pvs_sandbox_destroy_failures_total", s.destroy_failures);
  mirror("pvs_reconciles_total", s.reconciles);
  mirror("pvs_reconcile_failures_total", s.reconcile_failures);
  mirror("pvs_orphans_destroyed_total", s.orphans_destroyed);
  mirror("pvs_expired_destroyed_total", s.expired_destroyed);
  mirror("pvs_expired_paused_total", s.expired_paused);
  mirror("pvs_auto_resumes_total", s.auto_resumes);
  mirror("pvs_warm_pool_hits_total", s.pool_hits);
  mirror("pvs_warm_pool_misses_total", s.pool_misses);
  for (const auto& peer : kCallPeers) {
    const CallStats& c = s.*peer.stats;
    m.set_histogram(std::string(peer.prefix) + "_duration_seconds", {},
                    std::vector<std::uint64_t>(c.buckets.begin(), c.buckets.end()), c.count,
                    c.sum_seconds);
    mirror(std::string(peer.prefix) + "_errors_total", c.errors);
  }
  for (const PoolInfo& p : manager->pools()) {
    MetricLabels l{{"pool", p.name}, {"node", p.node}};
    m.set("pvs_pool_size", l, p.size);
    m.set("pvs_pool_ready", l, p.ready);
    m.set("pvs_pool_filling", l, p.filling);
    mirror("pvs_pool_claims_total", p.claims, l);
    mirror("pvs_pool_misses_total", p.misses, l);
    mirror("pvs_pool_refill_failures_total", p.refill_failures, l);
    mirror("pvs_pool_replaced_total", p.replaced, l);
    const CallStats& c = p.claim_latency;
    if (p.hot)
      m.set_histogram("pvs_pool_claim_duration_seconds", l,
                      std::vector<std::uint64_t>(c.buckets.begin(), c.buckets.end()), c.count,
                      c.sum_seconds);
  }
  collect_nodes(m, manager->nodes());
}

}  // namespace pvs::service
