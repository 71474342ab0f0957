// Manager and Sandbox: see manager.h for the contract and docs/architecture.md ("Sandbox
// lifecycle") for the step list, the rollback of each step and recovery. The manager's parts
// live beside this file (core.h lists which file holds what); here: destroy, lookups, health,
// stats, the background loop and Manager::open.
#include "pvesandbox/manager.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "core.h"
#include "manager_testing.h"
#include "pvesandbox/common/log.h"

namespace pvs {
namespace lifecycle {

void ManagerCore::forget_all() {
  std::map<std::string, std::shared_ptr<SandboxImpl>> gone;
  std::lock_guard lock(mu_);
  gone.swap(registry_);
  owned_.clear();
  owner_of_.clear();
}

ManagerCore::ManagerCore(ManagerConfig config, TestPeers peers,
                         std::vector<std::unique_ptr<Node>> nodes)
    : cfg_(std::move(config)),
      hook_(std::move(peers.fault_hook)),
      pve_(std::move(peers.proxmox)),
      nodes_(std::move(nodes)),
      vmids_(cfg_.vmid_min, cfg_.vmid_max) {
  // A hot pool per profile and node; a profile without a template uses each node's.
  for (auto& p : cfg_.hot_pools) {
    for (auto& n : nodes_) {
      auto& h = hot_.emplace_back();
      h.p = p;
      if (h.p.template_vmid == 0 && h.p.template_name.empty())
        h.p.template_vmid = n->cfg.template_vmid;
      h.node = n.get();
    }
  }
}

Status ManagerCore::destroy(SandboxImpl& sb) {
  std::lock_guard op(sb.op_mutex());
  Node& n = sb.node();
  if (sb.destroyed()) return {};
  busy(sb.vmid(), true);
  auto md = sb.metadata();
  // 1. Mark: an interrupted destroy is finished by recovery.
  if (md.phase != SandboxMetadata::Phase::kDestroying) {
    md.phase = SandboxMetadata::Phase::kDestroying;
    Status r = hook("destroy:mark");
    if (r) r = write_description(n, sb.vmid(), md);
    if (!r && r.error().code != ErrorCode::kNotFound) {
      busy(sb.vmid(), false);
      std::lock_guard lock(mu_);
      ++stats_.destroy_failures;
      return r;
    }
    sb.set_phase(md.phase);
  }
  // 2. Revoke first; a failed revoke quarantines the address (never ignored).
  bool address_clean = true;
  if (auto h = hook("destroy:revoke"); !h) {
    // As a failed REVOKE: the agent may still hold the address.
    std::lock_guard lock(n.agent_mu);
    n.granted.erase(sb.address());
    n.listed.erase(sb.address());
    quarantine(n, sb.address());
    address_clean = false;
  } else if (auto r = revoke_all(n, sb.address()); !r) {
    address_clean = false;
  }
  unbind(n, sb.binding().port);
  sb.close_session();
  // 3. Stop and purge.
  Status gone = hook("destroy:delete");
  if (gone) gone = destroy_container(n, sb.vmid(), sb.id());
  if (auto r = gone; !r) {
    busy(sb.vmid(), false);
    std::lock_guard lock(mu_);
    ++stats_.destroy_failures;
    return r;  // still registered in phase "destroying": the reconciler retries
  }
  sb.mark_destroyed();
  vmids_.release(static_cast<std::uint32_t>(sb.vmid()));
  if (address_clean) n.addrs->release(sb.address());
  {
    std::lock_guard lock(mu_);
    unenroll_locked(sb.id());
    busy_vmids_.erase(sb.vmid());
    ++stats_.destroys;
  }
  log::info("destroyed " + sb.id() + " vmid=" + std::to_string(sb.vmid()));
  return {};
}

Status ManagerCore::destroy_by_id(const std::string& id) {
  std::shared_ptr<SandboxImpl> sb;
  {
    std::lock_guard lock(mu_);
    auto it = registry_.find(id);
    if (it == registry_.end()) return fail(ErrorCode::kNotFound, "no sandbox " + id);
    sb = it->second;
  }
  return destroy(*sb);
}

Result<std::shared_ptr<Sandbox>> ManagerCore::attach(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = registry_.find(id);
  if (it == registry_.end() || it->second->destroyed())
    return fail(ErrorCode::kNotFound, "no sandbox " + id);
  return std::shared_ptr<Sandbox>(it->second);
}

std::size_t ManagerCore::count_owned(const std::string& owner) const {
  std::lock_guard lock(mu_);
  auto it = owned_.find(owner);
  return it == owned_.end() ? 0 : it->second.size();
}

std::size_t ManagerCore::count_paused(const std::string& owner) const {
  std::lock_guard lock(mu_);
  std::size_t paused = 0;
  if (auto it = owned_.find(owner); it != owned_.end())
    for (const auto& id : it->second)
      if (auto sb = registry_.find(id); sb != registry_.end() && sb->second->paused()) ++paused;
  return paused;
}

void ManagerCore::enroll_locked(const std::string& id, std::shared_ptr<SandboxImpl> sb,
                                const std::string& owner) {
  unenroll_locked(id);
  registry_[id] = std::move(sb);
  owner_of_[id] = owner;
  owned_[owner].insert(id);
}

void ManagerCore::unenroll_locked(const std::string& id) {
  registry_.erase(id);
  auto o = owner_of_.find(id);
  if (o == owner_of_.end()) return;
  if (auto n = owned_.find(o->second);
      n != owned_.end() && n->second.erase(id) && n->second.empty())
    owned_.erase(n);
  owner_of_.erase(o);
}

std::vector<SandboxInfo> ManagerCore::list(const Labels& selector) const {
  std::vector<std::shared_ptr<SandboxImpl>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, sb] : registry_) all.push_back(sb);
  }
  std::vector<SandboxInfo> out;
  for (auto& sb : all) {
    auto info = sb->info();
    bool match = std::all_of(selector.begin(), selector.end(), [&](auto& kv) {
      auto it = info.labels.find(kv.first);
      return it != info.labels.end() && it->second == kv.second;
    });
    if (match) out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const SandboxInfo& a, const SandboxInfo& b) {
    return std::tie(a.created_at, a.vmid) < std::tie(b.created_at, b.vmid);
  });
  return out;
}

Health ManagerCore::health() {
  Health h;
  auto v = pve_.call("GET", "/version");
  h.proxmox_ok = v.has_value();
  if (!v) h.proxmox_error = pve::describe(v.error());
  // Every node's agent; in a cluster each error names its node.
  h.agent_ok = true;
  for (auto& n : nodes_) {
    std::string error;
    auto s = n->agent.status();
    if (!s) {
      error = s.error().to_string();
    } else {
      n->note_status(*s);
      auto table = proto::find_field(*s, "table");
      auto set = proto::find_field(*s, "set");
      if ((table && *table != "present") || (set && *set != "present"))
        error = "ruleset missing on the node";
    }
    n->agent_ok = error.empty();
    if (error.empty()) continue;
    h.agent_ok = false;
    if (!h.agent_error.empty()) h.agent_error += "; ";
    h.agent_error += nodes_.size() > 1 ? n->cfg.name + ": " + error : error;
  }
  return h;
}

ManagerStats ManagerCore::stats() const {
  std::lock_guard lock(mu_);
  ManagerStats s = stats_;
  s.live = registry_.size();
  for (auto& [id, sb] : registry_) s.paused += sb->paused() ? 1 : 0;
  s.pooled = pool_.size();
  s.volumes = volumes_.size();
  s.proxmox_calls = pve_.calls.snapshot();
  s.proxmox_tasks = pve_.tasks.snapshot();
  s.pauses = pause_times_.snapshot();
  s.resumes = resume_times_.snapshot();
  for (auto& n : nodes_) {
    s.quarantined_addresses += n->quarantined.load();
    auto a = n->agent.calls.snapshot();
    s.agent_calls.count += a.count;
    s.agent_calls.errors += a.errors;
    s.agent_calls.sum_seconds += a.sum_seconds;
    for (std::size_t i = 0; i < a.buckets.size(); ++i) s.agent_calls.buckets[i] += a.buckets[i];
  }
  return s;
}

void ManagerCore::start_background() {
  thread_ = std::thread([this] { loop(); });
}

void ManagerCore::start_pool() {
  if (cfg_.warm_pool > 0) pool_thread_ = std::thread([this] { pool_loop(); });
  {
    std::lock_guard lock(mu_);
    pool_started_ = true;
  }
  start_hot_workers();
}

// Once: at start (after the first reconcile adopted members), or when a custom template's
// pool_size first asks for members.
void ManagerCore::start_hot_workers() {
  std::lock_guard lock(mu_);
  bool hot =
      std::any_of(hot_.begin(), hot_.end(), [](const HotProfile& h) { return h.p.size > 0; });
  if (!hot || !pool_started_ || pool_stop_ || !hot_threads_.empty()) return;
  for (int i = 0; i < cfg_.hot_pool_refill_parallel; ++i)
    hot_threads_.emplace_back([this] { hot_loop(); });
}

void ManagerCore::stop_background() {
  {
    std::lock_guard lock(loop_mu_);
    stop_ = true;
  }
  loop_cv_.notify_all();
  {
    std::lock_guard lock(mu_);
    pool_stop_ = true;
  }
  pool_cv_.notify_all();
  hot_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (pool_thread_.joinable()) pool_thread_.join();  // a clone in progress completes first
  for (auto& t : hot_threads_) t.join();             // members being made complete first
  hot_threads_.clear();
}

void ManagerCore::loop() {
  auto lease_period = std::max(seconds(1), cfg_.internet_lease / 2);
  auto reconcile_period = std::max(seconds(1), cfg_.reconcile_interval);
  auto tick = std::min(lease_period, reconcile_period);
  tick = std::min<seconds>(tick, seconds(5));  // notice agent reconnects soon enough
  // A node left unrecovered by a pass (a container's config refused) takes no new sandboxes:
  // it is read again sooner, after a tick, then twice as long each time, up to the period.
  auto unrecovered = [&] {
    return std::any_of(nodes_.begin(), nodes_.end(),
                       [](const auto& n) { return n->online && !n->recovered; });
  };
  auto retry = tick;
  auto next_lease = Clock::now() + lease_period;
  auto next_reconcile = Clock::now() + (unrecovered() ? retry : reconcile_period);
  for (auto& n : nodes_) n->agent_connects = n->agent.connects();
  for (;;) {
    {
      std::unique_lock lock(loop_mu_);
      if (loop_cv_.wait_for(lock, tick, [&] { return stop_; })) return;
    }
    auto now = Clock::now();
    // Each agent is pinged: one that came back (or restarted) gets a reconcile at once, one
    // that does not answer takes its node out of placement.
    bool reconnected = false;
    for (auto& n : nodes_) {
      bool ok = n->agent.ping().has_value();
      n->agent_ok = ok;
      if (ok && n->agent.connects() != n->agent_connects) reconnected = true;
    }
    if (now >= next_reconcile || reconnected) {
      if (auto r = reconcile(); !r) log::warn("reconcile: " + r.error().message);
      for (auto& n : nodes_) {  // the egress totals /metrics shows, once a reconcile
        if (!n->agent_ok) continue;
        if (auto st = n->agent.status()) n->note_status(*st);
      }
      for (auto& n : nodes_) n->agent_connects = n->agent.connects();
      if (unrecovered()) {
        next_reconcile = now + retry;
        retry = std::min<seconds>(retry * 2, reconcile_period);
      } else {
        next_reconcile = now + reconcile_period;
        retry = tick;
      }
      next_lease = now + lease_period;
    } else if (now >= next_lease) {
      for (auto& n : nodes_) {
        if (!n->online) continue;
        if (auto r = sync_agent(*n); !r)
          log::warn("lease renewal on " + n->cfg.name + ": " + r.error().message);
      }
      next_lease = now + lease_period;
    }
  }
}

namespace {

class ManagerHandle final : public Manager {
 public:
  explicit ManagerHandle(std::shared_ptr<ManagerCore> core) : core_(std::move(core)) {}
  ~ManagerHandle() override {
    core_->stop_background();
    core_->forget_all();
  }

  Result<std::shared_ptr<Sandbox>> create(const CreateOptions& options) override {
    return core_->create(options);
  }
  Result<std::shared_ptr<Sandbox>> attach(const std::string& id) override {
    return core_->attach(id);
  }
  std::vector<SandboxInfo> list(const Labels& selector) const override {
    return core_->list(selector);
  }
  std::size_t count_owned(const std::string& owner) const override {
    return core_->count_owned(owner);
  }
  std::size_t count_paused(const std::string& owner) const override {
    return core_->count_paused(owner);
  }
  Status destroy_by_id(const std::string& id) override { return core_->destroy_by_id(id); }
  Status reconcile() override { return core_->reconcile(); }
  Health health() override { return core_->health(); }
  ManagerStats stats() const override { return core_->stats(); }
  std::vector<PoolInfo> pools() const override { return core_->pools(); }
  std::vector<NodeInfo> nodes() const override { return core_->nodes(); }
  std::vector<TemplateInfo> templates() const override { return core_->templates(); }
  Result<TemplateBuild> build_template(const TemplateRecipe& recipe,
                                       const BuildOutput& out) override {
    return core_->build_template(recipe, out);
  }
  std::vector<CustomTemplate> custom_templates() const override {
    return core_->custom_templates();
  }
  Status delete_template(const std::string& name) override { return core_->delete_template(name); }
  Result<CustomTemplate> capture_template(const std::string& sandbox_id, const std::string& name,
                                          const std::string& owner) override {
    return core_->capture(sandbox_id, name, owner, false);
  }
  Result<std::vector<std::shared_ptr<Sandbox>>> fork(const std::string& sandbox_id, int count,
                                                     const std::string& owner,
                                                     const ForkCreate& create) override {
    return core_->fork(sandbox_id, count, owner, create);
  }
  void set_owner_limits(OwnerLimits limits) override { core_->set_owner_limits(std::move(limits)); }
  Status drain(const std::string& node, bool drained) override {
    return core_->drain(node, drained);
  }
  Result<VolumeInfo> create_volume(const VolumeRequest& request) override {
    return core_->create_volume(request);
  }
  std::vector<VolumeInfo> volumes() const override { return core_->volumes(); }
  Status delete_volume(const std::string& id) override { return core_->delete_volume(id); }
  Result<VolumeInfo> resize_volume(const std::string& id, int size_gb) override {
    return core_->resize_volume(id, size_gb);
  }

 private:
  std::shared_ptr<ManagerCore> core_;
};

}  // namespace

namespace {

Status validate_hot_pools(const ManagerConfig& c, std::size_t nodes) {
  auto bad = [](const std::string& what) {
    return fail(ErrorCode::kInvalidArgument, "hot_pools: " + what);
  };
  std::set<std::string> names;
  std::uint64_t total = 0;
  for (auto& p : c.hot_pools) {
    if (!valid_pool_profile_name(p.name))
      return bad("name must be 1-32 of [a-z0-9-], not \"" + p.name + "\"");
    if (!names.insert(p.name).second) return bad("profile " + p.name + " appears twice");
    if (p.template_vmid < 0) return bad(p.name + ": template_vmid must be a VMID or 0");
    if (!p.template_name.empty() && (p.template_vmid != 0 || !valid_template_name(p.template_name)))
      return bad(p.name + ": template must be a template's name, and without template_vmid");
    if (p.cpus < 1 || p.cpus > c.max_cpus)
      return bad(p.name + ": cpus must be 1.." + std::to_string(c.max_cpus));
    if (p.memory_mb < 16 || p.memory_mb > c.max_memory_mb)
      return bad(p.name + ": memory_mb must be 16.." + std::to_string(c.max_memory_mb));
    if (p.disk_gb < 0 || p.disk_gb > c.max_disk_gb)
      return bad(p.name + ": disk_gb must be 0.." + std::to_string(c.max_disk_gb));
    if (p.size < 0) return bad(p.name + ": size must be >= 0");
    if (p.template_replicas < 0 || p.template_replicas > 16)
      return bad(p.name + ": template_replicas must be 1..16 (0: no wish of its own)");
    total += static_cast<std::uint64_t>(p.size);
  }
  if ((total + static_cast<std::uint64_t>(std::max(c.warm_pool, 0))) * nodes >
      std::uint64_t{c.vmid_max} - c.vmid_min + 1)
    return bad("the pools' sizes together exceed the VMID range");
  if (c.hot_pool_refill_parallel < 1 || c.hot_pool_refill_parallel > 16)
    return bad("refill_parallel must be 1..16");
  if (c.hot_pool_check_interval < std::chrono::milliseconds(100))
    return bad("check_interval must be at least 100 ms");
  return {};
}

}  // namespace

Result<std::unique_ptr<Manager>> open_manager(ManagerConfig config, TestPeers peers) {
  if (config.nodes.empty() && config.template_vmid <= 0)
    return fail(ErrorCode::kInvalidArgument, "template_vmid is required");
  if (config.template_replicas < 1 || config.template_replicas > 16)
    return fail(ErrorCode::kInvalidArgument, "template_replicas must be 1..16");
  auto node_configs = cluster_nodes(config);
  if (!node_configs) return fail(node_configs.error());
  if (config.vmid_min < 100 || config.vmid_min > config.vmid_max)
    return fail(ErrorCode::kInvalidArgument, "bad VMID range");
  if (config.warm_pool < 0 ||
      static_cast<std::uint64_t>(config.warm_pool) > config.vmid_max - config.vmid_min + 1)
    return fail(ErrorCode::kInvalidArgument, "warm_pool must be 0..(size of the VMID range)");
  if (auto r = validate_hot_pools(config, node_configs->size()); !r) return fail(r.error());
  if (config.internet_lease.count() < 2 || config.internet_lease.count() > proto::kMaxTtlSeconds)
    return fail(ErrorCode::kInvalidArgument, "internet_lease out of range");
  std::vector<std::unique_ptr<Node>> nodes;
  for (auto& nc : *node_configs) {
    auto addresses = AddressPool::create(nc.sandbox_cidr, nc.gateway, nc.reserved);
    if (!addresses)
      return fail(ErrorCode::kInvalidArgument, nc.name + ": " + addresses.error().message);
    auto agent = std::move(peers.agents[nc.name]);
    if (!agent && nodes.empty()) agent = std::move(peers.agent);
    if (!agent) agent = make_agent_peer(nc.agent);
    nodes.push_back(std::make_unique<Node>(nc, std::move(agent), std::move(*addresses)));
  }
  if (!peers.proxmox) {
    auto client = pve::Client::create(config.proxmox);
    if (!client) return fail(client.error());
    peers.proxmox = make_proxmox_peer(std::move(*client));
  }
  bool background = config.background;
  auto core = std::make_shared<ManagerCore>(std::move(config), std::move(peers), std::move(nodes));
  if (auto r = core->locate_templates(); !r) return fail(r.error());
  core->plan_replicas();
  if (auto r = core->reconcile(); !r) {
    // Recovery must see Proxmox and an agent; orphans that could not be destroyed are retried
    // by the background loop, and a node that is down is reported (GET /v1/nodes) and comes
    // back by itself, so only Proxmox or every node unreachable fails open().
    auto code = r.error().code;
    bool unreachable = code == ErrorCode::kUnavailable || code == ErrorCode::kTimeout;
    if (code == ErrorCode::kUnauthenticated || code == ErrorCode::kPermissionDenied ||
        (unreachable && core->nodes_reached() == 0))
      return fail(r.error());
    log::warn("initial reconcile incomplete: " + r.error().message);
  }
  if (background) core->start_background();
  core->start_pool();
  return std::unique_ptr<Manager>(std::make_unique<ManagerHandle>(core));
}

}  // namespace lifecycle

Result<std::unique_ptr<Manager>> Manager::open(ManagerConfig config) {
  return lifecycle::open_manager(std::move(config), {});
}

}  // namespace pvs
