// The agent's logic, independent of sockets: policy, the verbs, the desired state, drift
// detection and re-apply. The server feeds it request lines and ticks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "config.h"
#include "dhcp_hosts.h"
#include "pvesandbox/common/protocol.h"
#include "set_backend.h"
#include "state.h"

namespace pvs::agent {

// Who sent a request (SO_PEERCRED).
struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

class Agent {
 public:
  Agent(AgentConfig config, std::unique_ptr<SetBackend> backend);

  // Loads the state file (a missing file means: adopt what the kernel has now), drops expired
  // leases and re-applies the desired state. Fails on an unreadable or corrupt state file.
  Status start();

  // Answers one request line ('\n' excluded) with one reply line ('\n' excluded).
  std::string handle(const Peer& peer, std::string_view line);
  std::string handle(const Peer& peer, const proto::Request& request);

  // Periodic work: forgets expired leases, and when the ruleset generation moved, compares the
  // kernel with the desired state and re-applies it if they differ (or the sets came back).
  void tick();

  // Writes the state file if the desired state changed since the last write.
  Status persist();
  bool state_dirty() const { return snapshot_needed_ || !journal_pending_.empty(); }
  // Counts changes of the desired state made by requests: a reply to a request that moved it
  // may only leave once persist() has succeeded.
  std::uint64_t changes() const { return changes_; }

  void set_client_count(std::size_t n) { clients_ = n; }
  const DesiredState& desired() const { return desired_; }
  const AgentConfig& config() const { return config_; }
  SetBackend& backend() { return *backend_; }
  std::uint64_t reapply_count() const { return reapplies_; }

  // Re-applies the whole desired state (atomic replace of each set). Public for tests/bench.
  Status reapply(std::string_view reason);

  // Makes dhcp_hosts_dir mirror the desired bindings (no-op when the key is not set). Done at
  // start; retried by tick() while it fails.
  Status mirror_dhcp_hosts();
  bool dhcp_hosts_ok() const { return !dhcp_dirty_; }

 private:
  Status check_address(Ipv4Address address) const;
  std::string error_reply(const Error& error);
  std::string do_allow(const Peer& peer, const proto::AllowRequest& r);
  std::string do_revoke(const Peer& peer, const proto::RevokeRequest& r);
  std::string do_sync(const Peer& peer, const proto::SyncRequest& r);
  std::string do_list();
  std::string do_bind(const Peer& peer, const proto::BindRequest& r);
  std::string do_unbind(const Peer& peer, const proto::UnbindRequest& r);
  std::string do_bindings();
  // The port proxy's routes (agent_bindings.cc, docs/protocol.md "Routes"): an element of
  // proxy_routes for an address bound to a sandbox port, with a timeout; kernel state only.
  std::string do_route(const Peer& peer, const proto::RouteRequest& r);
  std::string do_unroute(const Peer& peer, const proto::UnrouteRequest& r);
  std::string do_status();
  // Egress by domain (agent_egress.cc).
  bool resolver_only(const Peer& peer) const;
  std::string do_egress(const Peer& peer, const proto::EgressRequest& r);
  std::string do_egresses();
  std::string do_ask(const proto::AskRequest& r);
  std::string do_pair(const Peer& peer, const proto::PairRequest& r);
  // The resolver's egress log (docs/agent.md "Egress log"): kept per listed source, the last
  // kMaxEgressLogLines lines each, in memory only.
  std::string do_egress_log(const proto::EgressLogRequest& r);
  std::string do_egress_log_query(const proto::EgressLogQuery& r) const;
  // Refused connection attempts (agent_refused.cc, docs/agent.md "Refused connections").
  struct Refused {
    RefusedKey key;
    std::uint64_t count = 0;
    std::int64_t first_ms = 0;
    std::int64_t last_ms = 0;
  };
  // Every element of egress_refused with its count, first and last refusal; adds what the
  // counters grew by since the last read to refused_connections_.
  Result<std::vector<Refused>> kernel_refused();
  void count_refused(const std::vector<Refused>& all);
  std::string do_egress_refused(const proto::EgressRefusedQuery& q);
  // Adds to `batch` the removal of everything the ruleset recorded of `source`: its elements of
  // egress_refused and egress_refused_last and its bucket in egress_refused_rate (sets the
  // ruleset lacks are skipped). Done when a source's list goes and before a new list of an
  // unlisted source goes in: addresses are reused, and the next sandbox on the address must
  // read nothing of the last one's refusals nor inherit its spent bucket (#46).
  Status forget_refused(Ipv4Address source, Batch& batch);
  // forget_refused() in a batch of its own; a failure is logged, not returned: the lists must
  // not depend on it (a kernel without the destroy message emulates it with an add, which a
  // full set refuses), and the controller never shows a sandbox what predates it.
  void clear_refused(Ipv4Address source);
  Status check_destination(Ipv4Address destination) const;
  // The kernel's pairs of one source (every source when nullopt).
  Result<std::vector<PairKey>> kernel_pairs(std::optional<Ipv4Address> source);
  // Makes egress_listed equal the lists and drops pairs of unlisted sources or ports; reloads
  // pairs_ from the kernel (names of pairs not known here stay unknown).
  Status reapply_egress();
  Result<bool> egress_drifted();
  void prune_pairs(std::int64_t now_ms);
  std::size_t pairs_of(Ipv4Address source) const;
  // Removes the proxy_routes elements of `address` (UNBIND of its last port: the next sandbox on
  // the address starts with none), in a batch of its own; a failure (a ruleset without the
  // set, say) is logged, not returned: the elements end with their timeouts anyway.
  void drop_routes(Ipv4Address address);
  // The kernel's port_mac and port_ip4 elements of one port (what BIND replaces, UNBIND removes).
  Status kernel_port_elements(const std::string& port, std::vector<RawElement>* macs,
                              std::vector<RawElement>* ips);
  Result<std::vector<proto::Binding>> kernel_bindings(std::vector<RawElement>* mac_elements,
                                                      std::vector<RawElement>* ip_elements);
  // Compares the kernel with the desired state; true if they differ.
  Result<bool> drifted();
  void log_change(const Peer& peer, std::string_view what, const std::string& reply);
  Error missing_error(const Error& error, const SetRef& set);
  // Commits `batch`; a refusal is mapped by missing_error against `set`, the set it names.
  Status commit(const Batch& batch, const SetRef& set);

  AgentConfig config_;
  std::unique_ptr<SetBackend> backend_;
  SetRef set_;
  SetRef port_mac_;
  SetRef port_ip4_;
  SetRef egress_listed_;
  SetRef egress_pairs_;
  SetRef egress_refused_;
  SetRef egress_refused_last_;
  SetRef egress_refused_rate_;
  SetRef proxy_routes_;
  // The pairs the agent knows of: expiry (unix ms) and the listed names they were added for
  // (empty: added before a restart, names unknown). Mirrors the kernel's egress_pairs.
  struct PairInfo {
    std::int64_t expiry_ms = 0;
    std::vector<std::string> names;
  };
  std::map<PairKey, PairInfo> pairs_;
  static constexpr std::size_t kMaxEgressLogLines = 256;
  std::map<Ipv4Address, std::deque<proto::EgressLogLine>> egress_log_;
  // Totals for STATUS: the n of ELOG lines by decision, and the refused connection attempts
  // counted in egress_refused (each element's count when last read, to add only its growth).
  std::uint64_t decisions_allowed_ = 0;
  std::uint64_t decisions_refused_ = 0;
  std::uint64_t refused_connections_ = 0;
  std::map<RefusedKey, std::uint64_t> refused_seen_;
  DesiredState desired_;
  StateStore store_;
  DhcpHosts dhcp_;
  bool dhcp_dirty_ = false;       // the directory may differ from the bindings: mirror again
  std::string journal_pending_;   // records not yet appended
  bool snapshot_needed_ = false;  // a change too big for the journal (SYNC), or first start
  bool state_error_ = false;
  std::optional<bool> set_has_timeout_;
  std::optional<std::uint32_t> verified_generation_;
  std::uint64_t lost_acks_seen_ = 0;
  std::int64_t last_reapply_ms_ = 0;
  std::uint64_t reapplies_ = 0;
  std::uint64_t changes_ = 0;
  std::int64_t started_ms_ = 0;
  std::size_t clients_ = 0;
};

}  // namespace pvs::agent
