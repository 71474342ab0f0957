// The real peers: pve::Client and AgentClient behind ProxmoxApi and AgentApi.
#include "peers.h"

#include <algorithm>

namespace pvs::lifecycle {
namespace {

class PveClientPeer final : public ProxmoxApi {
 public:
  explicit PveClientPeer(std::unique_ptr<pve::Client> client) : c_(std::move(client)) {}

  pve::Result<std::string> call(std::string_view method, std::string_view path,
                                const pve::Params& params) override {
    return c_->call(method, path, params);
  }
  pve::Result<std::vector<pve::ContainerStatus>> list_containers(std::string_view node) override {
    return c_->list_containers(node);
  }
  pve::Result<std::vector<pve::ClusterResource>> resources(std::string_view type) override {
    return c_->resources(type);
  }
  pve::Result<std::string> clone(std::string_view node, const pve::CloneRequest& request) override {
    return c_->clone(node, request);
  }
  pve::Result<pve::Config> config(std::string_view node, int vmid) override {
    return c_->config(node, vmid);
  }
  pve::Status update_config(std::string_view node, int vmid, const pve::Params& changes) override {
    return c_->update_config(node, vmid, changes);
  }
  pve::Result<std::string> resize(std::string_view node, int vmid, std::string_view disk,
                                  std::string_view size) override {
    return c_->resize(node, vmid, disk, size);
  }
  pve::Result<std::string> start(std::string_view node, int vmid) override {
    return c_->start(node, vmid);
  }
  pve::Result<std::string> stop(std::string_view node, int vmid) override {
    return c_->stop(node, vmid);
  }
  pve::Result<pve::ContainerStatus> status(std::string_view node, int vmid) override {
    return c_->status(node, vmid);
  }
  pve::Result<std::vector<pve::RrdPoint>> rrddata(std::string_view node, int vmid,
                                                  std::string_view timeframe) override {
    return c_->rrddata(node, vmid, timeframe);
  }
  pve::Result<std::string> destroy(std::string_view node, int vmid,
                                   const pve::DestroyOptions& options) override {
    return c_->destroy(node, vmid, options);
  }
  pve::Result<std::vector<pve::Snapshot>> snapshots(std::string_view node, int vmid) override {
    return c_->snapshots(node, vmid);
  }
  pve::Result<std::string> create_snapshot(std::string_view node, int vmid, std::string_view name,
                                           std::string_view description) override {
    return c_->create_snapshot(node, vmid, name, description);
  }
  pve::Result<std::string> rollback_snapshot(std::string_view node, int vmid, std::string_view name,
                                             bool start_after) override {
    return c_->rollback_snapshot(node, vmid, name, start_after);
  }
  pve::Result<std::string> delete_snapshot(std::string_view node, int vmid,
                                           std::string_view name) override {
    return c_->delete_snapshot(node, vmid, name);
  }
  pve::Result<pve::TaskStatus> wait_task(std::string_view upid,
                                         const pve::WaitOptions& options) override {
    return c_->wait_task(upid, options);
  }

 private:
  std::unique_ptr<pve::Client> c_;
};

AgentClientOptions client_options(const ManagerAgentOptions& o) {
  AgentClientOptions a;
  a.socket_path = o.socket_path;
  a.command = o.command;
  a.request_timeout = o.timeout;
  a.connect_timeout = std::min(o.timeout, std::chrono::milliseconds(5000));
  a.retries = 1;
  return a;
}

class AgentClientPeer final : public AgentApi {
 public:
  explicit AgentClientPeer(const ManagerAgentOptions& o) : client_(client_options(o)) {}

  Status allow(Ipv4Address address, std::uint32_t ttl_seconds) override {
    return client_.allow(address, ttl_seconds);
  }
  Status egress(Ipv4Address address, const EgressList& list) override {
    return client_.egress(address, list);
  }
  Status egress_off(Ipv4Address address) override { return client_.egress_off(address); }
  Result<std::map<Ipv4Address, EgressList>> egresses() override { return client_.egresses(); }
  Result<std::vector<proto::EgressLogLine>> egress_log(Ipv4Address address) override {
    return client_.egress_log(address);
  }
  Result<std::vector<proto::RefusedConnection>> egress_refused(Ipv4Address address) override {
    return client_.egress_refused(address);
  }
  Status revoke(Ipv4Address address) override { return client_.revoke(address); }
  Result<std::uint64_t> sync(const std::vector<proto::Grant>& grants) override {
    return client_.sync(grants);
  }
  Status bind(const proto::Binding& binding) override { return client_.bind(binding); }
  Status unbind(const std::string& port) override { return client_.unbind(port); }
  Result<std::vector<proto::Binding>> bindings() override { return client_.bindings(); }
  Result<proto::StatusFields> status() override { return client_.status(); }
  Status route(Ipv4Address address, std::uint16_t port, std::uint32_t seconds) override {
    return client_.route(address, port, seconds);
  }
  Status unroute(Ipv4Address address, std::uint16_t port) override {
    return client_.unroute(address, port);
  }
  Status hello() override {
    auto r = client_.call(proto::HelloRequest{});
    if (!r) return fail(r.error());
    return {};
  }
  std::uint64_t connections() const override { return client_.connections(); }

 private:
  AgentClient client_;
};

}  // namespace

std::unique_ptr<ProxmoxApi> make_proxmox_peer(std::unique_ptr<pve::Client> client) {
  return std::make_unique<PveClientPeer>(std::move(client));
}

std::unique_ptr<AgentApi> make_agent_peer(const ManagerAgentOptions& options) {
  return std::make_unique<AgentClientPeer>(options);
}

void LatencyRecorder::record(Clock::duration d, bool ok) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  if (ns < 0) ns = 0;
  std::size_t i = 0;
  while (i < CallStats::kBucketBoundsMs.size() &&
         ns > static_cast<std::int64_t>(CallStats::kBucketBoundsMs[i]) * 1000000)
    ++i;
  sum_ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
  if (!ok) errors_.fetch_add(1, std::memory_order_relaxed);
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
}

CallStats LatencyRecorder::snapshot() const {
  CallStats s;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    s.buckets[i] = total;
  }
  s.count = total;
  s.errors = std::min(total, errors_.load(std::memory_order_relaxed));
  s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

}  // namespace pvs::lifecycle
