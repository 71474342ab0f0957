// In-memory peers for unit tests of the Manager's logic (no root, no network): a Proxmox cluster
// that keeps containers as config maps on nodes and finishes every task at once, and an agent
// that keeps the set and the bindings. Each can be told to fail a verb (a node to be offline:
// 595 for its paths); everything they were asked is counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "peers.h"

namespace pvs::test {

class FakeProxmox final : public lifecycle::ProxmoxApi {
 public:
  explicit FakeProxmox(int template_vmid, std::string template_size = "8G") {
    add_template("pve", template_vmid, template_size);
  }

  // A node (with 64 GiB, 2 GiB used) and a template on it; `shared`: on shared storage.
  void add_template(const std::string& node, int vmid, const std::string& size = "8G",
                    bool shared = false) {
    std::lock_guard lock(mu_);
    nodes_.try_emplace(node, NodeState{});
    cts_[vmid] = {
        {"rootfs", std::string(shared ? "rbd" : "local-lvm") + ":base-disk-0,size=" + size},
        {"template", "1"}};
    node_of_[vmid] = node;
  }
  void set_offline(const std::string& node, bool offline) {
    std::lock_guard lock(mu_);
    nodes_[node].offline = offline;
  }
  void set_node_memory(const std::string& node, std::uint64_t total, std::uint64_t used) {
    std::lock_guard lock(mu_);
    nodes_[node].maxmem = total;
    nodes_[node].mem = used;
  }
  std::string node_of(int vmid) const {
    std::lock_guard lock(mu_);
    auto it = node_of_.find(vmid);
    return it == node_of_.end() ? "" : it->second;
  }

  std::map<int, pve::Config> containers() const {
    std::lock_guard lock(mu_);
    auto out = cts_;
    for (auto it = out.begin(); it != out.end();)
      it = it->second.count("template") ? out.erase(it) : std::next(it);
    return out;
  }
  int calls(const std::string& verb) const {
    std::lock_guard lock(mu_);
    auto it = calls_.find(verb);
    return it == calls_.end() ? 0 : it->second;
  }

  pve::Result<std::string> call(std::string_view, std::string_view, const pve::Params&) override {
    return std::string("[]");  // /version, active tasks: none
  }
  pve::Result<std::vector<pve::ClusterResource>> resources(std::string_view type) override {
    std::lock_guard lock(mu_);
    std::vector<pve::ClusterResource> out;
    for (auto& [name, n] : nodes_) {
      if (type != "node") break;
      pve::ClusterResource r;
      r.type = "node";
      r.id = "node/" + name;
      r.node = name;
      r.status = n.offline ? "offline" : "online";
      r.maxmem = n.maxmem;
      r.mem = n.mem;
      out.push_back(r);
    }
    for (auto& [vmid, c] : cts_) {
      if (type != "vm") break;
      pve::ClusterResource r;
      r.type = "lxc";
      r.vmid = vmid;
      r.node = node_of_.at(vmid);
      r.is_template = c.count("template") > 0;
      out.push_back(r);
    }
    return out;
  }
  pve::Result<std::vector<pve::ContainerStatus>> list_containers(std::string_view node) override {
    std::lock_guard lock(mu_);
    if (auto e = unreachable(node)) return *e;
    std::vector<pve::ContainerStatus> out;
    for (auto& [vmid, c] : cts_) {
      if (node_of_.at(vmid) != node) continue;
      pve::ContainerStatus s;
      s.vmid = vmid;
      s.is_template = c.count("template") > 0;
      s.status = running_.count(vmid) ? "running" : "stopped";
      out.push_back(s);
    }
    return out;
  }
  pve::Result<std::string> clone(std::string_view node, const pve::CloneRequest& r) override {
    std::lock_guard lock(mu_);
    ++calls_["clone"];
    if (auto e = unreachable(node)) return *e;
    if (!r.target.empty()) {
      if (auto e = unreachable(r.target)) return *e;
    }
    if (cts_.count(r.new_vmid)) return error(pve::ErrorKind::kAlreadyExists, "exists");
    if (!here(node, r.source_vmid)) return error(pve::ErrorKind::kNotFound, "does not exist");
    auto c = cts_.at(r.source_vmid);
    if (!r.target.empty() && c["rootfs"].rfind("rbd:", 0) != 0)
      return error(pve::ErrorKind::kServer, "can't clone to another node (local storage)");
    c.erase("template");
    c["hostname"] = r.hostname;
    c["description"] = r.description;
    cts_[r.new_vmid] = c;
    node_of_[r.new_vmid] = r.target.empty() ? std::string(node) : r.target;
    return std::string("UPID:clone");
  }
  pve::Result<pve::Config> config(std::string_view node, int vmid) override {
    std::lock_guard lock(mu_);
    if (auto e = unreachable(node)) return *e;
    auto it = cts_.find(vmid);
    if (it == cts_.end() || !here(node, vmid))
      return error(pve::ErrorKind::kNotFound, "does not exist");
    return it->second;
  }
  pve::Status update_config(std::string_view node, int vmid, const pve::Params& changes) override {
    std::lock_guard lock(mu_);
    ++calls_["configure"];
    if (auto e = unreachable(node)) return *e;
    auto it = cts_.find(vmid);
    if (it == cts_.end() || !here(node, vmid))
      return error(pve::ErrorKind::kNotFound, "does not exist");
    for (auto& [k, v] : changes) it->second[k] = v;
    return {};
  }
  pve::Result<std::string> resize(std::string_view, int, std::string_view,
                                  std::string_view) override {
    std::lock_guard lock(mu_);
    ++calls_["resize"];
    return std::string("UPID:resize");
  }
  pve::Result<std::string> start(std::string_view node, int vmid) override {
    std::lock_guard lock(mu_);
    ++calls_["start"];
    if (auto e = unreachable(node)) return *e;
    if (fail_start) return error(pve::ErrorKind::kServer, "start refused");
    running_.insert(vmid);
    return std::string("UPID:start");
  }
  pve::Result<std::string> stop(std::string_view node, int vmid) override {
    std::lock_guard lock(mu_);
    if (auto e = unreachable(node)) return *e;
    if (!cts_.count(vmid) || !here(node, vmid))
      return error(pve::ErrorKind::kNotFound, "does not exist");
    if (!running_.erase(vmid)) return error(pve::ErrorKind::kNotRunning, "not running");
    return std::string("UPID:stop");
  }
  pve::Result<pve::ContainerStatus> status(std::string_view node, int vmid) override {
    std::lock_guard lock(mu_);
    if (auto e = unreachable(node)) return *e;
    if (!cts_.count(vmid) || !here(node, vmid))
      return error(pve::ErrorKind::kNotFound, "does not exist");
    pve::ContainerStatus s;
    s.vmid = vmid;
    s.status = running_.count(vmid) ? "running" : "stopped";
    return s;
  }
  pve::Result<std::vector<pve::RrdPoint>> rrddata(std::string_view, int,
                                                  std::string_view) override {
    return std::vector<pve::RrdPoint>{};
  }
  pve::Result<std::string> destroy(std::string_view node, int vmid,
                                   const pve::DestroyOptions&) override {
    std::lock_guard lock(mu_);
    ++calls_["destroy"];
    if (auto e = unreachable(node)) return *e;
    if (!here(node, vmid) || !cts_.erase(vmid))
      return error(pve::ErrorKind::kNotFound, "does not exist");
    return std::string("UPID:destroy");
  }
  pve::Result<std::vector<pve::Snapshot>> snapshots(std::string_view, int) override {
    return std::vector<pve::Snapshot>{};
  }
  pve::Result<std::string> create_snapshot(std::string_view, int, std::string_view,
                                           std::string_view) override {
    return std::string("UPID:snapshot");
  }
  pve::Result<std::string> rollback_snapshot(std::string_view, int, std::string_view,
                                             bool) override {
    return std::string("UPID:rollback");
  }
  pve::Result<std::string> delete_snapshot(std::string_view, int, std::string_view) override {
    return std::string("UPID:delsnapshot");
  }
  pve::Result<pve::TaskStatus> wait_task(std::string_view upid, const pve::WaitOptions&) override {
    pve::TaskStatus t;
    t.upid = std::string(upid);
    t.status = "stopped";
    t.exitstatus = "OK";
    return t;
  }

  bool fail_start = false;

 private:
  struct NodeState {
    bool offline = false;
    std::uint64_t maxmem = 64ull << 30, mem = 2ull << 30;
  };
  static tl::unexpected<Error> error(pve::ErrorKind kind, std::string message) {
    return tl::unexpected<Error>(pve::make_error(kind, 500, std::move(message)));
  }
  // mu_ held: pveproxy's answer for an offline node's paths.
  std::optional<tl::unexpected<Error>> unreachable(std::string_view node) const {
    auto it = nodes_.find(std::string(node));
    if (it != nodes_.end() && !it->second.offline) return std::nullopt;
    return tl::unexpected<Error>(
        pve::make_error(pve::ErrorKind::kTransport, 595, "No route to host"));
  }
  bool here(std::string_view node, int vmid) const {
    auto it = node_of_.find(vmid);
    return it != node_of_.end() && it->second == node;
  }

  mutable std::mutex mu_;
  std::map<std::string, NodeState> nodes_;
  std::map<int, std::string> node_of_;
  std::map<int, pve::Config> cts_;
  std::set<int> running_;
  std::map<std::string, int> calls_;
};

class FakeAgent final : public lifecycle::AgentApi {
 public:
  std::set<Ipv4Address> set() const {
    std::lock_guard lock(mu_);
    return set_;
  }

  // The egress lists it holds (EGRESS), by source.
  std::map<Ipv4Address, EgressList> lists() const {
    std::lock_guard lock(mu_);
    return lists_;
  }
  // What `a` could reach after each verb that touched it, in order: "on" (in the set),
  // "allow:<names>" (listed: the ruleset checks pairs first, so a listed address in the set
  // still reaches only its list) or "off".
  std::vector<std::string> history(Ipv4Address a) const {
    std::lock_guard lock(mu_);
    auto it = history_.find(a);
    return it == history_.end() ? std::vector<std::string>{} : it->second;
  }
  // Every ALLOW/REVOKE/EGRESS request, as "VERB address".
  std::vector<std::string> verbs() const {
    std::lock_guard lock(mu_);
    return verbs_;
  }

  Status allow(Ipv4Address a, std::uint32_t) override {
    std::lock_guard lock(mu_);
    verbs_.push_back("ALLOW " + a.to_string());
    if (down || fail_allow) return fail(ErrorCode::kUnavailable, "allow refused");
    set_.insert(a);
    record(a);
    return {};
  }
  Status revoke(Ipv4Address a) override {
    std::lock_guard lock(mu_);
    verbs_.push_back("REVOKE " + a.to_string());
    if (down || fail_revoke) return fail(ErrorCode::kUnavailable, "revoke refused");
    set_.erase(a);
    record(a);
    return {};
  }
  Status egress(Ipv4Address a, const EgressList& list) override {
    std::lock_guard lock(mu_);
    verbs_.push_back("EGRESS " + a.to_string());
    if (down || fail_egress) return fail(ErrorCode::kUnavailable, "egress refused");
    if (no_egress_verbs) return fail(ErrorCode::kInvalidArgument, "agent: 400 unknown verb");
    lists_[a] = list;
    record(a);
    return {};
  }
  Status egress_off(Ipv4Address a) override {
    std::lock_guard lock(mu_);
    verbs_.push_back("EGRESS-OFF " + a.to_string());
    if (down || fail_egress) return fail(ErrorCode::kUnavailable, "egress refused");
    if (no_egress_verbs) return fail(ErrorCode::kInvalidArgument, "agent: 400 unknown verb");
    lists_.erase(a);
    record(a);
    return {};
  }
  Result<std::map<Ipv4Address, EgressList>> egresses() override {
    std::lock_guard lock(mu_);
    if (down) return fail(ErrorCode::kUnavailable, "agent down");
    ++egresses_calls_;
    if (no_egress_verbs) return fail(ErrorCode::kInvalidArgument, "agent: 400 unknown verb");
    return lists_;
  }
  // The log of a listed source: the lines a test put there with add_log_line.
  Result<std::vector<proto::EgressLogLine>> egress_log(Ipv4Address address) override {
    std::lock_guard lock(mu_);
    if (down) return fail(ErrorCode::kUnavailable, "agent down");
    if (!lists_.count(address)) return std::vector<proto::EgressLogLine>{};
    return logs_[address];
  }
  void add_log_line(Ipv4Address address, proto::EgressLogLine line) {
    std::lock_guard lock(mu_);
    logs_[address].push_back(std::move(line));
  }
  Result<std::vector<proto::RefusedConnection>> egress_refused(Ipv4Address address) override {
    std::lock_guard lock(mu_);
    if (down) return fail(ErrorCode::kUnavailable, "agent down");
    return refused_[address];
  }
  void add_refused(Ipv4Address address, proto::RefusedConnection c) {
    std::lock_guard lock(mu_);
    refused_[address].push_back(c);
  }
  // As an agent restarted without its journal: the lists are gone.
  void forget_lists() {
    std::lock_guard lock(mu_);
    lists_.clear();
  }
  Result<std::uint64_t> sync(const std::vector<proto::Grant>& grants) override {
    std::lock_guard lock(mu_);
    if (down || fail_sync) return fail(ErrorCode::kUnavailable, "sync refused");
    set_.clear();
    for (auto& g : grants) set_.insert(g.address);
    return set_.size();
  }
  Status bind(const proto::Binding& b) override {
    std::lock_guard lock(mu_);
    if (down) return fail(ErrorCode::kUnavailable, "agent down");
    bound_[b.port] = b;
    return {};
  }
  Status unbind(const std::string& port) override {
    std::lock_guard lock(mu_);
    bound_.erase(port);
    return {};
  }
  // Routes (the port proxy's): refused unless `routes`; then each ROUTE and UNROUTE is only
  // recorded in verbs() as "ROUTE address:port seconds" / "UNROUTE address:port" (the netns
  // tests have the real agent and ruleset). `fail_route` refuses them again.
  Status route(Ipv4Address a, std::uint16_t port, std::uint32_t seconds) override {
    std::lock_guard lock(mu_);
    if (!routes || fail_route) return fail(ErrorCode::kUnavailable, "the fake agent has no routes");
    verbs_.push_back("ROUTE " + a.to_string() + ":" + std::to_string(port) + " " +
                     std::to_string(seconds));
    return {};
  }
  Status unroute(Ipv4Address a, std::uint16_t port) override {
    std::lock_guard lock(mu_);
    if (routes) verbs_.push_back("UNROUTE " + a.to_string() + ":" + std::to_string(port));
    return {};
  }
  Result<std::vector<proto::Binding>> bindings() override {
    std::lock_guard lock(mu_);
    if (down) return fail(ErrorCode::kUnavailable, "agent down");
    std::vector<proto::Binding> out;
    for (auto& [port, b] : bound_) out.push_back(b);
    return out;
  }
  Result<proto::StatusFields> status() override {
    if (down) return fail(ErrorCode::kUnavailable, "agent down");
    std::lock_guard lock(mu_);
    ++statuses_;
    if (no_egress_verbs) return proto::StatusFields{};
    return proto::StatusFields{{"egress_sources", std::to_string(lists_.size())}};
  }
  int statuses() const {
    std::lock_guard lock(mu_);
    return statuses_;
  }
  int egresses_calls() const {
    std::lock_guard lock(mu_);
    return egresses_calls_;
  }
  // A new connection (the agent restarted): the Manager asks STATUS again.
  void reconnect() { ++connections_; }
  Status hello() override {
    if (down) return fail(ErrorCode::kUnavailable, "agent down");
    return {};
  }
  std::uint64_t connections() const override { return connections_.load(); }

  std::atomic<bool> down{false};  // every verb fails (kUnavailable)
  bool fail_allow = false, fail_revoke = false, fail_sync = false;
  bool routes = false, fail_route = false;  // under mu_ once shared
  bool fail_egress = false;                 // EGRESS fails (kUnavailable)
  bool no_egress_verbs = false;             // an agent from before #20: 400 for EGRESS and EGRESSES

 private:
  void record(Ipv4Address a) {  // mu_ held
    std::string now = "off";
    if (auto it = lists_.find(a); it != lists_.end()) {
      now = "allow:";
      for (auto& n : it->second.names) now += n + ",";
    } else if (set_.count(a)) {
      now = "on";
    }
    history_[a].push_back(now);
  }

  mutable std::mutex mu_;
  std::atomic<std::uint64_t> connections_{1};
  int statuses_ = 0, egresses_calls_ = 0;
  std::map<Ipv4Address, std::vector<proto::EgressLogLine>> logs_;
  std::map<Ipv4Address, std::vector<proto::RefusedConnection>> refused_;
  std::map<Ipv4Address, EgressList> lists_;
  std::map<Ipv4Address, std::vector<std::string>> history_;
  std::vector<std::string> verbs_;
  std::set<Ipv4Address> set_;
  std::map<std::string, proto::Binding> bound_;
};

}  // namespace pvs::test
