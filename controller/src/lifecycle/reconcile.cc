// Recovery and reconciliation: Proxmox is the truth. Each pass lists the containers, adopts
// live sandboxes (after a restart), keeps or drops pooled clones, forgets sandboxes that
// vanished, makes the agent's set and bindings exactly the wanted ones, and destroys orphans
// and expired sandboxes. docs/architecture.md ("Recovery") says why each case is safe.
#include <algorithm>

#include "core.h"
#include "pvesandbox/common/log.h"

namespace pvs::lifecycle {

Status ManagerCore::reconcile() {
  std::lock_guard rec(reconcile_mu_);
  auto count = [&](const Status& r) {
    std::lock_guard lock(mu_);
    ++stats_.reconciles;
    if (!r) ++stats_.reconcile_failures;
    return r;
  };
  // Which nodes are online, and their memory; a failure here is Proxmox unreachable.
  nodes_reached_ = 0;
  if (auto r = refresh_nodes(); !r) return count(r);
  // Custom templates first: creates and hot profiles name them, and keep_hot compares.
  if (auto r = refresh_custom_templates(); !r) log::warn("custom templates: " + r.error().message);
  Status result;
  int reached = 0;
  for (auto& n : nodes_) {
    Status r;
    if (!n->online) {
      mark_unreachable(*n, "offline in /cluster/resources");
      r = fail(ErrorCode::kUnavailable, "node offline in /cluster/resources");
    } else {
      r = reconcile_node(*n);
    }
    bool available =
        r || (r.error().code != ErrorCode::kUnavailable && r.error().code != ErrorCode::kTimeout);
    if (available) ++reached;
    if (!r && result) {
      Error e = r.error();
      if (nodes_.size() > 1) e.message = n->cfg.name + ": " + e.message;
      result = fail(std::move(e));
    }
  }
  nodes_reached_ = reached;
  // After the nodes, whose sandboxes are the bases' users: only when every node was read whole
  // (a fork not adopted yet would count as none).
  if (std::all_of(nodes_.begin(), nodes_.end(), [](const auto& n) { return n->recovered.load(); }))
    drop_unused_fork_bases();
  sync_replicas();  // its failures are the replicas' (Manager::templates()), not the pass's
  return count(result);
}

// One node: list its containers, adopt/keep/forget, SYNC its agent, reap its orphans. A node
// whose containers cannot be listed is unreachable: its sandboxes are kept, never destroyed.
Status ManagerCore::reconcile_node(Node& n) {
  // Only sandboxes registered (and clones pooled) before the listing can have vanished from it.
  std::set<std::string> registered_before;
  std::set<int> pooled_before, hot_before, holders_before;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, v] : volumes_)
      if (v.first.node == n.cfg.name) holders_before.insert(v.first.holder_vmid);
    for (auto& [id, sb] : registry_)
      if (&sb->node() == &n) registered_before.insert(id);
    for (auto& p : pool_)
      if (p.node == &n) pooled_before.insert(p.vmid);
    for (auto& h : hot_)
      if (h.node == &n)
        for (auto& m : h.ready) hot_before.insert(m.vmid);
  }
  auto cts = pve_.list_containers(n.cfg.name);
  if (!cts) {
    auto e = pve_error(cts.error(), "list containers");
    if (cts.error().is(pve::ErrorKind::kTransport)) mark_unreachable(n, e.message);
    return fail(std::move(e));
  }
  {
    std::lock_guard lock(mu_);
    n.online = true;
    n.error.clear();
  }
  Scan scan;
  scan.node = &n;
  auto now = now_unix();
  // A container whose config Proxmox refuses to give does not stop the scan: the others are
  // adopted still. But the node is recovered (placeable) only once a pass has read them all,
  // and an incomplete view neither SYNCs the agent (a sandbox not adopted yet would lose its
  // grant) nor reaps.
  Status scanned;
  for (auto& ct : *cts) {
    if (ct.vmid < static_cast<int>(cfg_.vmid_min) || ct.vmid > static_cast<int>(cfg_.vmid_max))
      continue;
    scan.present.insert(ct.vmid);
    auto r = scan_container(ct, now, scan);
    if (!r && r.error().is(pve::ErrorKind::kTransport)) return r;  // Proxmox went: next pass
    if (!r && scanned) scanned = std::move(r);
  }
  forget_vanished(n, registered_before, pooled_before, scan.present);
  forget_vanished_members(n, hot_before, scan.present);
  forget_vanished_holders(n, holders_before, scan.present);
  if (!scanned) {
    std::lock_guard lock(mu_);
    n.error = scanned.error().message;
    return scanned;
  }
  if (!n.recovered.exchange(true)) {
    log::info(n.cfg.name + " recovered: every container on it read");
    pool_cv_.notify_all();
    hot_cv_.notify_all();
  }
  // Agent: the set is exactly the live sandboxes with internet, the lists those with an
  // allowlist (orphans are in neither).
  Status agent_status = sync_agent(n, busy_orphans(n, scan.orphans));
  n.agent_ok = agent_status.has_value();
  Status result = reap(scan, agent_status.has_value());
  if (!agent_status) {
    std::lock_guard lock(mu_);
    n.error = agent_status.error().message;
    return agent_status;
  }
  return result;
}

// A node that cannot be reached: its sandboxes say so; nothing of it is destroyed or forgotten.
void ManagerCore::mark_unreachable(Node& n, const std::string& why) {
  std::lock_guard lock(mu_);
  n.online = false;
  n.error = why;
  for (auto& [id, sb] : registry_)
    if (&sb->node() == &n) sb->set_status("unreachable");
}

// One container of the listing: a registered sandbox (expired?), a template, a pooled clone
// (warm or a hot member), a sandbox to adopt, or an orphan. Only a failed config read is an error.
Status ManagerCore::scan_container(const pve::ContainerStatus& ct, std::int64_t now, Scan& scan) {
  std::shared_ptr<SandboxImpl> known;
  {
    std::lock_guard lock(mu_);
    if (busy_vmids_.count(ct.vmid)) return {};
    for (auto& [id, sb] : registry_)
      if (sb->vmid() == ct.vmid) known = sb;
  }
  Node& n = *scan.node;
  if (known) {
    if (&known->node() != &n) {  // moved by hand (e.g. migrated): not ours to manage there
      log::warn("sandbox " + known->id() + " found on " + n.cfg.name + ", expected on " +
                known->node().cfg.name + "; left alone");
      return {};
    }
    known->set_status(ct.status);
    auto md = known->metadata();
    bool ended = md.expires_at != 0 && md.expires_at <= now;
    if (ended && md.phase == SandboxMetadata::Phase::kReady && md.on_expiry.pause)
      scan.to_pause.push_back(known);
    else if (md.phase == SandboxMetadata::Phase::kDestroying || ended)
      scan.expired.push_back(known);
    else if (md.phase == SandboxMetadata::Phase::kPaused && ct.status == "running")
      scan.running_paused.push_back(known);
    return {};
  }
  if (ct.is_template) {
    vmids_.mark_used(static_cast<std::uint32_t>(ct.vmid));
    return {};
  }
  auto conf = pve_.config(n.cfg.name, ct.vmid);
  if (!conf) {
    if (conf.error().is(pve::ErrorKind::kNotFound)) return {};
    return fail(pve_error(conf.error(), "read config of " + std::to_string(ct.vmid)));
  }
  vmids_.mark_used(static_cast<std::uint32_t>(ct.vmid));
  auto d = conf->find("description");
  auto md = decode_description(d == conf->end() ? "" : d->second);
  if (!md) {
    if (md.error().code == ErrorCode::kNotFound) return {};  // not ours
    scan.orphans.push_back({ct.vmid, "", std::nullopt, false, false});
    return {};
  }
  if (md->vmid != ct.vmid) {  // a copy of a description, e.g. a manual clone: not a sandbox
    scan.orphans.push_back({ct.vmid, md->id, std::nullopt, false, false});
    return {};
  }
  if (md->labels.count(
          std::string(kVolumeHolderLabel))) {  // a volume's holder (volumes/holders.cc)
    if (!keep_holder(n, *conf, *md)) scan.orphans.push_back({ct.vmid, md->id, {}, false, false});
    return {};
  }
  if (md->phase == SandboxMetadata::Phase::kPooled &&
      md->labels.count(std::string(kPoolProfileLabel))) {
    if (md->address) n.addrs->mark_used(*md->address);
    if (!keep_hot(n, ct, *conf, *md))
      scan.orphans.push_back({ct.vmid, md->id, md->address, false, false});
    return {};
  }
  if (md->phase == SandboxMetadata::Phase::kPooled) {
    if (!keep_pooled(n, ct, *conf, *md))
      scan.orphans.push_back({ct.vmid, md->id, {}, false, false});
    return {};
  }
  if (md->address && !n.cfg.sandbox_cidr.contains(*md->address)) {
    // Not an address of this node's network (moved here by hand): never destroyed on a guess.
    log::warn("container " + std::to_string(ct.vmid) + " on " + n.cfg.name + " has address " +
              md->address->to_string() + " outside " + n.cfg.sandbox_cidr.to_string() +
              "; left alone");
    return {};
  }
  if (md->address) n.addrs->mark_used(*md->address);
  bool is_expired = md->expires_at != 0 && md->expires_at <= now;
  // A paused sandbox is adopted as a ready one is: stopped, resumable (pause.cc); so is a ready
  // one whose TTL ended while no controller watched, if its end is a pause.
  bool live =
      md->phase == SandboxMetadata::Phase::kReady || md->phase == SandboxMetadata::Phase::kPaused;
  bool to_pause = is_expired && md->phase == SandboxMetadata::Phase::kReady && md->on_expiry.pause;
  if (!live || (is_expired && !to_pause) || !md->address) {
    scan.orphans.push_back({ct.vmid, md->id, md->address, is_expired, false});
    return {};
  }
  auto sb = adopt(n, ct, *conf, *md);
  if (to_pause) scan.to_pause.push_back(sb);
  if (md->phase == SandboxMetadata::Phase::kPaused && ct.status == "running")
    scan.running_paused.push_back(sb);
  return {};
}

// A warm-pool clone is kept while it is stopped, of today's template and wanted; false: an
// orphan to destroy.
bool ManagerCore::keep_pooled(Node& n, const pve::ContainerStatus& ct, const pve::Config& conf,
                              const SandboxMetadata& md) {
  // A clone still being made (a killed controller's) has a lock: look again next time.
  if (conf.count("lock")) return true;
  auto tpl = md.labels.find(std::string(kPoolTemplateLabel));
  bool fits = tpl != md.labels.end() && tpl->second == std::to_string(n.cfg.template_vmid) &&
              ct.status == "stopped";
  {
    std::lock_guard lock(mu_);
    if (busy_vmids_.count(ct.vmid)) return true;  // claimed by a create meanwhile
    auto it = std::find_if(pool_.begin(), pool_.end(),
                           [&](const Pooled& p) { return p.vmid == ct.vmid; });
    if (it != pool_.end()) {
      if (fits) return true;
      pool_.erase(it);
    } else if (fits && pooled_on(n) < cfg_.warm_pool) {
      pool_.push_back({ct.vmid, md.id, &n});
      return true;
    }
  }
  pool_cv_.notify_all();
  return false;
}

// A live sandbox this process does not know (it restarted): registered again, its grant and
// binding wanted again.
std::shared_ptr<SandboxImpl> ManagerCore::adopt(Node& n, const pve::ContainerStatus& ct,
                                                const pve::Config& conf,
                                                const SandboxMetadata& md) {
  auto net0 = parse_property_string(conf.count("net0") ? conf.at("net0") : "");
  auto mac = MacAddress::parse(net0["hwaddr"]);
  proto::Binding binding{port_name(ct.vmid, net0["firewall"] == "1"), mac ? *mac : MacAddress{},
                         *md.address};
  auto sb = std::make_shared<SandboxImpl>(
      shared_from_this(), n, md, conf.count("hostname") ? conf.at("hostname") : "",
      config_int(conf, "cores", 1), config_int(conf, "memory", 512),
      conf.count("rootfs") ? size_gb(conf.at("rootfs")) : 0, binding);
  sb->set_status(ct.status);
  {
    std::lock_guard lock(n.agent_mu);
    if (mac) n.bound[binding.port] = binding;
    if (md.internet) n.granted.insert(*md.address);
    if (md.allowlist) n.listed[*md.address] = *md.allowlist;
  }
  {
    std::lock_guard lock(mu_);
    enroll_locked(md.id, sb, md.owner);
  }
  log::info("recovered " + md.id + " vmid=" + std::to_string(ct.vmid) + " on " + n.cfg.name);
  return sb;
}

// Pooled clones and registered sandboxes whose container vanished behind our back.
void ManagerCore::forget_vanished(Node& n, const std::set<std::string>& registered_before,
                                  const std::set<int>& pooled_before,
                                  const std::set<int>& present) {
  {
    std::lock_guard lock(mu_);
    auto gone = [&](const Pooled& p) {
      return p.node == &n && pooled_before.count(p.vmid) && !present.count(p.vmid);
    };
    if (std::any_of(pool_.begin(), pool_.end(), gone)) {
      for (auto& p : pool_)
        if (gone(p)) vmids_.release(static_cast<std::uint32_t>(p.vmid));
      pool_.erase(std::remove_if(pool_.begin(), pool_.end(), gone), pool_.end());
      pool_cv_.notify_all();
    }
  }
  std::vector<std::shared_ptr<SandboxImpl>> vanished;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, sb] : registry_)
      if (registered_before.count(id) && !present.count(sb->vmid()) &&
          !busy_vmids_.count(sb->vmid()))
        vanished.push_back(sb);
  }
  for (auto& sb : vanished) {
    log::warn("sandbox " + sb->id() + " vanished from Proxmox; forgetting it");
    std::lock_guard op(sb->op_mutex());
    bool clean = true;
    if (!revoke_all(n, sb->address())) clean = false;
    unbind(n, sb->binding().port);
    sb->close_session();
    sb->mark_destroyed();
    vmids_.release(static_cast<std::uint32_t>(sb->vmid()));
    if (clean) n.addrs->release(sb->address());
    std::lock_guard lock(mu_);
    unenroll_locked(sb->id());
  }
}

// A task that a dead controller started (e.g. a start) may still run on an orphan: it is
// left, bindings included, until the task ended (Proxmox serialises such a destroy anyway).
// Returns the ports the SYNC must keep.
std::set<std::string> ManagerCore::busy_orphans(const Node& n, std::vector<Orphan>& orphans) {
  std::set<std::string> keep_ports;
  for (auto& o : orphans) {
    auto active = pve_.call("GET", "/nodes/" + n.cfg.name + "/tasks",
                            {{"vmid", std::to_string(o.vmid)}, {"source", "active"}});
    if (!active)
      log::warn("task list for " + std::to_string(o.vmid) + ": " + pve::describe(active.error()));
    if (active && active->find("UPID:") != std::string::npos) {
      o.busy_task = true;
      keep_ports.insert(port_name(o.vmid, false));
      keep_ports.insert(port_name(o.vmid, true));
    }
  }
  return keep_ports;
}

// Destroys orphans (their address revoked first when the SYNC failed) and expired sandboxes.
Status ManagerCore::reap(Scan& scan, bool synced) {
  Node& n = *scan.node;
  Status result;
  for (auto& o : scan.orphans) {
    if (o.busy_task) {
      result = fail(ErrorCode::kConflict,
                    "orphan " + std::to_string(o.vmid) + " still has a running task; later");
      continue;
    }
    busy(o.vmid, true);
    if (o.address && !synced) {  // the SYNC did not remove it: try an explicit REVOKE
      std::lock_guard lock(n.agent_mu);
      if (!n.agent.revoke(*o.address)) quarantine(n, *o.address);
    }
    unbind(n, port_name(o.vmid, false));
    unbind(n, port_name(o.vmid, true));
    auto r = destroy_container(n, o.vmid, o.id);
    busy(o.vmid, false);
    if (!r) {
      log::warn("orphan " + std::to_string(o.vmid) + " not destroyed: " + r.error().message);
      result = r;
      continue;
    }
    vmids_.release(static_cast<std::uint32_t>(o.vmid));
    if (o.address) n.addrs->release(*o.address);  // a quarantined one stays quarantined
    log::info("destroyed orphan vmid=" + std::to_string(o.vmid) + (o.expired ? " (expired)" : ""));
    std::lock_guard lock(mu_);
    ++(o.expired ? stats_.expired_destroyed : stats_.orphans_destroyed);
  }
  for (auto& sb : scan.running_paused)
    if (auto r = settle_paused(*sb); !r) result = r;
  for (auto& sb : scan.to_pause)
    if (auto r = pause_expired(*sb); !r) result = r;
  for (auto& sb : scan.expired) {
    auto phase = sb->metadata().phase;
    bool was_expired =
        phase == SandboxMetadata::Phase::kReady || phase == SandboxMetadata::Phase::kPaused;
    if (auto r = destroy(*sb); !r) {
      result = r;
      continue;
    }
    std::lock_guard lock(mu_);
    if (was_expired) ++stats_.expired_destroyed;
  }
  return result;
}

}  // namespace pvs::lifecycle
