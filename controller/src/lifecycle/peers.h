// The lifecycle's two peers behind small interfaces: ProxmoxApi (the Proxmox calls it makes)
// and AgentApi (pve-sandbox-agent's verbs). The real ones wrap pve::Client and AgentClient
// (make_proxmox_peer, make_agent_peer); unit tests give the Manager fakes through
// manager_testing.h. TimedPve and TimedAgent time every call for ManagerStats.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pvesandbox/agent_client.h"
#include "pvesandbox/manager.h"
#include "pvesandbox/proxmox_client.h"

namespace pvs::lifecycle {

using Clock = std::chrono::steady_clock;

// The Proxmox API as the lifecycle uses it (see pve::Client for each call's contract).
class ProxmoxApi {
 public:
  virtual ~ProxmoxApi() = default;
  virtual pve::Result<std::string> call(std::string_view method, std::string_view path,
                                        const pve::Params& params) = 0;
  virtual pve::Result<std::vector<pve::ContainerStatus>> list_containers(std::string_view node) = 0;
  // GET /cluster/resources?type=... ("node": each node's status and memory; "vm": guests).
  virtual pve::Result<std::vector<pve::ClusterResource>> resources(std::string_view type) = 0;
  virtual pve::Result<std::string> clone(std::string_view node,
                                         const pve::CloneRequest& request) = 0;
  virtual pve::Result<pve::Config> config(std::string_view node, int vmid) = 0;
  virtual pve::Status update_config(std::string_view node, int vmid,
                                    const pve::Params& changes) = 0;
  virtual pve::Result<std::string> resize(std::string_view node, int vmid, std::string_view disk,
                                          std::string_view size) = 0;
  virtual pve::Result<std::string> start(std::string_view node, int vmid) = 0;
  virtual pve::Result<std::string> stop(std::string_view node, int vmid) = 0;
  virtual pve::Result<pve::ContainerStatus> status(std::string_view node, int vmid) = 0;
  virtual pve::Result<std::vector<pve::RrdPoint>> rrddata(std::string_view node, int vmid,
                                                          std::string_view timeframe) = 0;
  virtual pve::Result<std::string> destroy(std::string_view node, int vmid,
                                           const pve::DestroyOptions& options) = 0;
  virtual pve::Result<std::vector<pve::Snapshot>> snapshots(std::string_view node, int vmid) = 0;
  virtual pve::Result<std::string> create_snapshot(std::string_view node, int vmid,
                                                   std::string_view name,
                                                   std::string_view description) = 0;
  virtual pve::Result<std::string> rollback_snapshot(std::string_view node, int vmid,
                                                     std::string_view name, bool start_after) = 0;
  virtual pve::Result<std::string> delete_snapshot(std::string_view node, int vmid,
                                                   std::string_view name) = 0;
  virtual pve::Result<pve::TaskStatus> wait_task(std::string_view upid,
                                                 const pve::WaitOptions& options) = 0;
};

// pve-sandbox-agent's verbs as the lifecycle uses them (see AgentClient).
class AgentApi {
 public:
  virtual ~AgentApi() = default;
  virtual Status allow(Ipv4Address address, std::uint32_t ttl_seconds) = 0;
  virtual Status revoke(Ipv4Address address) = 0;
  virtual Result<std::uint64_t> sync(const std::vector<proto::Grant>& grants) = 0;
  virtual Status bind(const proto::Binding& binding) = 0;
  virtual Status unbind(const std::string& port) = 0;
  virtual Result<std::vector<proto::Binding>> bindings() = 0;
  virtual Result<proto::StatusFields> status() = 0;
  // Egress allowlists (EGRESS, EGRESS off, EGRESSES).
  virtual Status egress(Ipv4Address address, const EgressList& list) = 0;
  virtual Status egress_off(Ipv4Address address) = 0;
  virtual Result<std::map<Ipv4Address, EgressList>> egresses() = 0;
  virtual Result<std::vector<proto::EgressLogLine>> egress_log(Ipv4Address address) = 0;
  virtual Result<std::vector<proto::RefusedConnection>> egress_refused(Ipv4Address address) = 0;
  // The port proxy's routes (ROUTE, UNROUTE).
  virtual Status route(Ipv4Address address, std::uint16_t port, std::uint32_t seconds) = 0;
  virtual Status unroute(Ipv4Address address, std::uint16_t port) = 0;
  virtual Status hello() = 0;                     // a HELLO on the (re)connected link
  virtual std::uint64_t connections() const = 0;  // links opened so far
};

std::unique_ptr<ProxmoxApi> make_proxmox_peer(std::unique_ptr<pve::Client> client);
std::unique_ptr<AgentApi> make_agent_peer(const ManagerAgentOptions& options);

// Latencies and outcomes of calls to one peer; lock-free, read as a CallStats.
class LatencyRecorder {
 public:
  void record(Clock::duration d, bool ok);
  CallStats snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, CallStats::kBucketBoundsMs.size() + 1> buckets_{};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<std::uint64_t> sum_ns_{0};
};

template <class F>
auto timed(LatencyRecorder& recorder, F&& f) {
  auto start = Clock::now();
  auto r = f();
  recorder.record(Clock::now() - start, r.has_value());
  return r;
}

// The Proxmox peer with every call timed into `calls` (tasks into `tasks`).
class TimedPve {
 public:
  explicit TimedPve(std::unique_ptr<ProxmoxApi> api) : api_(std::move(api)) {}

  pve::Result<std::string> call(std::string_view method, std::string_view path,
                                const pve::Params& params = {}) {
    return timed(calls, [&] { return api_->call(method, path, params); });
  }
  pve::Result<std::vector<pve::ContainerStatus>> list_containers(std::string_view node) {
    return timed(calls, [&] { return api_->list_containers(node); });
  }
  pve::Result<std::vector<pve::ClusterResource>> resources(std::string_view type) {
    return timed(calls, [&] { return api_->resources(type); });
  }
  pve::Result<std::string> clone(std::string_view node, const pve::CloneRequest& request) {
    return timed(calls, [&] { return api_->clone(node, request); });
  }
  pve::Result<pve::Config> config(std::string_view node, int vmid) {
    return timed(calls, [&] { return api_->config(node, vmid); });
  }
  pve::Status update_config(std::string_view node, int vmid, const pve::Params& changes) {
    return timed(calls, [&] { return api_->update_config(node, vmid, changes); });
  }
  pve::Result<std::string> resize(std::string_view node, int vmid, std::string_view disk,
                                  std::string_view size) {
    return timed(calls, [&] { return api_->resize(node, vmid, disk, size); });
  }
  pve::Result<std::string> start(std::string_view node, int vmid) {
    return timed(calls, [&] { return api_->start(node, vmid); });
  }
  pve::Result<std::string> stop(std::string_view node, int vmid) {
    return timed(calls, [&] { return api_->stop(node, vmid); });
  }
  pve::Result<pve::ContainerStatus> status(std::string_view node, int vmid) {
    return timed(calls, [&] { return api_->status(node, vmid); });
  }
  pve::Result<std::vector<pve::RrdPoint>> rrddata(std::string_view node, int vmid,
                                                  std::string_view timeframe) {
    return timed(calls, [&] { return api_->rrddata(node, vmid, timeframe); });
  }
  pve::Result<std::string> destroy(std::string_view node, int vmid,
                                   const pve::DestroyOptions& options) {
    return timed(calls, [&] { return api_->destroy(node, vmid, options); });
  }
  pve::Result<std::vector<pve::Snapshot>> snapshots(std::string_view node, int vmid) {
    return timed(calls, [&] { return api_->snapshots(node, vmid); });
  }
  pve::Result<std::string> create_snapshot(std::string_view node, int vmid, std::string_view name,
                                           std::string_view description) {
    return timed(calls, [&] { return api_->create_snapshot(node, vmid, name, description); });
  }
  pve::Result<std::string> rollback_snapshot(std::string_view node, int vmid, std::string_view name,
                                             bool start_after) {
    return timed(calls, [&] { return api_->rollback_snapshot(node, vmid, name, start_after); });
  }
  pve::Result<std::string> delete_snapshot(std::string_view node, int vmid, std::string_view name) {
    return timed(calls, [&] { return api_->delete_snapshot(node, vmid, name); });
  }
  pve::Result<pve::TaskStatus> wait_task(std::string_view upid, const pve::WaitOptions& options) {
    return timed(tasks, [&] { return api_->wait_task(upid, options); });
  }

  LatencyRecorder calls;
  LatencyRecorder tasks;

 private:
  std::unique_ptr<ProxmoxApi> api_;
};

// The agent peer with every request timed. Errors carry the verb ("agent: REVOKE: ...") so
// that logs say which step failed.
class TimedAgent {
 public:
  explicit TimedAgent(std::unique_ptr<AgentApi> api) : api_(std::move(api)) {}

  Status allow(Ipv4Address address, std::uint32_t ttl_seconds) {
    return named("ALLOW", timed(calls, [&] { return api_->allow(address, ttl_seconds); }));
  }
  Status revoke(Ipv4Address address) {
    return named("REVOKE", timed(calls, [&] { return api_->revoke(address); }));
  }
  Result<std::uint64_t> sync(const std::vector<proto::Grant>& grants) {
    return named("SYNC", timed(calls, [&] { return api_->sync(grants); }));
  }
  Status bind(const proto::Binding& binding) {
    return named("BIND", timed(calls, [&] { return api_->bind(binding); }));
  }
  Status unbind(const std::string& port) {
    return named("UNBIND", timed(calls, [&] { return api_->unbind(port); }));
  }
  Result<std::vector<proto::Binding>> bindings() {
    return named("BINDINGS", timed(calls, [&] { return api_->bindings(); }));
  }
  Result<proto::StatusFields> status() {
    return named("STATUS", timed(calls, [&] { return api_->status(); }));
  }
  Status egress(Ipv4Address address, const EgressList& list) {
    return named("EGRESS", timed(calls, [&] { return api_->egress(address, list); }));
  }
  Status egress_off(Ipv4Address address) {
    return named("EGRESS off", timed(calls, [&] { return api_->egress_off(address); }));
  }
  Result<std::map<Ipv4Address, EgressList>> egresses() {
    return named("EGRESSES", timed(calls, [&] { return api_->egresses(); }));
  }
  Result<std::vector<proto::EgressLogLine>> egress_log(Ipv4Address address) {
    return named("EGRESSLOG", timed(calls, [&] { return api_->egress_log(address); }));
  }
  Result<std::vector<proto::RefusedConnection>> egress_refused(Ipv4Address address) {
    return named("EGRESSREFUSED", timed(calls, [&] { return api_->egress_refused(address); }));
  }
  Status route(Ipv4Address address, std::uint16_t port, std::uint32_t seconds) {
    return named("ROUTE", timed(calls, [&] { return api_->route(address, port, seconds); }));
  }
  Status unroute(Ipv4Address address, std::uint16_t port) {
    return named("UNROUTE", timed(calls, [&] { return api_->unroute(address, port); }));
  }
  // Notices an agent that went away and came back.
  Status ping() {
    return named("HELLO", timed(calls, [&] { return api_->hello(); }));
  }
  std::uint64_t connects() const { return api_->connections(); }

  LatencyRecorder calls;

 private:
  template <class R>
  static R named(std::string_view verb, R r) {
    if (!r) r.error().message = "agent: " + std::string(verb) + ": " + r.error().message;
    return r;
  }

  std::unique_ptr<AgentApi> api_;
};

}  // namespace pvs::lifecycle
