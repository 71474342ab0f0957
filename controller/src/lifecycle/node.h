// One node of the cluster as the lifecycle keeps it: its configuration (template resolved),
// its agent, its sandbox addresses, what its agent should hold, and what placement needs to
// know of it. Nodes live as long as the ManagerCore; a sandbox, a pool member and a create
// step point at theirs.
#pragma once

#include <atomic>
#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "id_pool.h"
#include "peers.h"
#include "pvesandbox/manager.h"
#include "routes.h"

namespace pvs::lifecycle {

struct Node {
  Node(NodeConfig config, std::unique_ptr<AgentApi> agent_api,
       std::unique_ptr<AddressPool> addresses)
      : cfg(std::move(config)), agent(std::move(agent_api)), addrs(std::move(addresses)) {
    drained = cfg.drained;
  }

  const NodeConfig cfg;  // template_vmid resolved (never 0)
  TimedAgent agent;
  RouteTable routes{agent};  // the port proxy's routes to this node's sandboxes
  const std::unique_ptr<AddressPool> addrs;

  // What the agent should hold for this node's sandboxes; agent_mu is held around agent calls.
  std::mutex agent_mu;
  std::set<Ipv4Address> granted;
  std::map<Ipv4Address, EgressList> listed;  // egress allowlists (EGRESS)
  // Whether the agent on the connection numbered egress_probed (agent.connects()) has the
  // egress verbs: its STATUS says egress_sources=<n> (an agent from before #20 does not).
  std::uint64_t egress_probed = 0;
  bool egress_verbs = true;
  std::uint64_t egress_sources = 0;  // as that STATUS said
  std::map<std::string, proto::Binding> bound;
  std::set<Ipv4Address> quarantine;
  std::atomic<std::size_t> quarantined{0};  // quarantine.size(), readable without agent_mu

  // For placement and operators.
  std::atomic<bool> online{true};    // in /cluster/resources and its containers listed
  std::atomic<bool> agent_ok{true};  // its agent answered the last ping
  std::atomic<bool> drained{false};
  // Every container listed on it has been read since the controller started (a reconcile pass
  // went through its whole listing). Until then its address pool does not know every address
  // in use (a live sandbox not yet adopted holds one), so nothing new is placed on it.
  std::atomic<bool> recovered{false};
  // How every refusal and report words a node that is not recovered yet.
  static constexpr const char* kRecovering = "recovering (not every container on it read yet)";
  bool placeable() const { return online && agent_ok && recovered && !drained; }
  // A free address of its sandbox network for a new sandbox or pool member: refused until the
  // node is recovered.
  Result<Ipv4Address> new_address() {
    if (!recovered) return fail(ErrorCode::kUnavailable, cfg.name + ": " + kRecovering);
    auto a = addrs->acquire();
    if (!a) return fail(ErrorCode::kUnavailable, "no free address: " + a.error().message);
    return a;
  }
  std::uint64_t agent_connects = 0;  // the loop's: a reconnected agent gets a reconcile
  // The agent's egress totals (STATUS, read by health and reconcile), kept monotonic across
  // agent restarts: a total below the last one read counts from zero again. NodeInfo's.
  struct EgressTotal {
    std::uint64_t total = 0, last_read = 0;
    void note(std::uint64_t read) {
      total += read >= last_read ? read - last_read : read;
      last_read = read;
    }
  };
  std::mutex totals_mu;
  EgressTotal egress_allowed, egress_refused, egress_connections_refused;
  void note_status(const proto::StatusFields& status) {
    std::lock_guard lock(totals_mu);
    auto read = [&](const char* key, EgressTotal& to) {
      auto v = proto::find_field(status, key);
      std::uint64_t n = 0;
      if (v && std::from_chars(v->data(), v->data() + v->size(), n).ec == std::errc()) to.note(n);
    };
    read("egress_decisions_allowed", egress_allowed);
    read("egress_decisions_refused", egress_refused);
    read("egress_connections_refused", egress_connections_refused);
  }

  // Under the core's mu_.
  std::string error;                             // why offline / agent down
  std::uint64_t mem_total = 0;                   // /cluster/resources maxmem (0: unknown)
  std::uint64_t mem_used = 0;                    // mem, plus sandboxes made since that listing
  std::uint64_t mem_reserved = 0;                // creates in flight on it
  int creating = 0;                              // creates in flight on it
  std::uint64_t pool_hits = 0, pool_misses = 0;  // its warm pool
};

}  // namespace pvs::lifecycle
