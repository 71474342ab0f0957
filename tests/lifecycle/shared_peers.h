// Peers that forward to fakes the test keeps (fake_peers.h), so that a second Manager (a
// restarted controller) sees the same cluster and agents.
#pragma once

#include "fake_peers.h"

namespace pvs::test {

// Forwards to a fake the test keeps (so a second Manager sees the same cluster).
class SharedProxmox final : public lifecycle::ProxmoxApi {
 public:
  explicit SharedProxmox(FakeProxmox* f) : f_(f) {}
  pve::Result<std::string> call(std::string_view m, std::string_view p,
                                const pve::Params& x) override {
    return f_->call(m, p, x);
  }
  pve::Result<std::vector<pve::ContainerStatus>> list_containers(std::string_view n) override {
    return f_->list_containers(n);
  }
  pve::Result<std::vector<pve::ClusterResource>> resources(std::string_view t) override {
    return f_->resources(t);
  }
  pve::Result<std::string> clone(std::string_view n, const pve::CloneRequest& r) override {
    return f_->clone(n, r);
  }
  pve::Result<pve::Config> config(std::string_view n, int v) override { return f_->config(n, v); }
  pve::Status update_config(std::string_view n, int v, const pve::Params& c) override {
    return f_->update_config(n, v, c);
  }
  pve::Result<std::string> resize(std::string_view n, int v, std::string_view d,
                                  std::string_view s) override {
    return f_->resize(n, v, d, s);
  }
  pve::Result<std::string> start(std::string_view n, int v) override { return f_->start(n, v); }
  pve::Result<std::string> stop(std::string_view n, int v) override { return f_->stop(n, v); }
  pve::Result<pve::ContainerStatus> status(std::string_view n, int v) override {
    return f_->status(n, v);
  }
  pve::Result<std::vector<pve::RrdPoint>> rrddata(std::string_view n, int v,
                                                  std::string_view t) override {
    return f_->rrddata(n, v, t);
  }
  pve::Result<std::string> destroy(std::string_view n, int v,
                                   const pve::DestroyOptions& o) override {
    return f_->destroy(n, v, o);
  }
  pve::Result<std::vector<pve::Snapshot>> snapshots(std::string_view n, int v) override {
    return f_->snapshots(n, v);
  }
  pve::Result<std::string> create_snapshot(std::string_view n, int v, std::string_view s,
                                           std::string_view d) override {
    return f_->create_snapshot(n, v, s, d);
  }
  pve::Result<std::string> rollback_snapshot(std::string_view n, int v, std::string_view s,
                                             bool b) override {
    return f_->rollback_snapshot(n, v, s, b);
  }
  pve::Result<std::string> delete_snapshot(std::string_view n, int v, std::string_view s) override {
    return f_->delete_snapshot(n, v, s);
  }
  pve::Result<pve::TaskStatus> wait_task(std::string_view u, const pve::WaitOptions& o) override {
    return f_->wait_task(u, o);
  }

 private:
  FakeProxmox* f_;
};

class SharedAgent final : public lifecycle::AgentApi {
 public:
  explicit SharedAgent(FakeAgent* a) : a_(a) {}
  Status allow(Ipv4Address a, std::uint32_t t) override { return a_->allow(a, t); }
  Status revoke(Ipv4Address a) override { return a_->revoke(a); }
  Result<std::uint64_t> sync(const std::vector<proto::Grant>& g) override { return a_->sync(g); }
  Status bind(const proto::Binding& b) override { return a_->bind(b); }
  Status unbind(const std::string& p) override { return a_->unbind(p); }
  Result<std::vector<proto::Binding>> bindings() override { return a_->bindings(); }
  Result<proto::StatusFields> status() override { return a_->status(); }
  Status egress(Ipv4Address a, const EgressList& l) override { return a_->egress(a, l); }
  Status egress_off(Ipv4Address a) override { return a_->egress_off(a); }
  Result<std::map<Ipv4Address, EgressList>> egresses() override { return a_->egresses(); }
  Result<std::vector<proto::EgressLogLine>> egress_log(Ipv4Address address) override {
    return a_->egress_log(address);
  }
  Result<std::vector<proto::RefusedConnection>> egress_refused(Ipv4Address address) override {
    return a_->egress_refused(address);
  }
  Status route(Ipv4Address a, std::uint16_t p, std::uint32_t s) override {
    return a_->route(a, p, s);
  }
  Status unroute(Ipv4Address a, std::uint16_t p) override { return a_->unroute(a, p); }
  Status hello() override { return a_->hello(); }
  std::uint64_t connections() const override { return a_->connections(); }

 private:
  FakeAgent* a_;
};

}  // namespace pvs::test
