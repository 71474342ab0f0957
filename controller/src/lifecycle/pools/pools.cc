// The pools. The warm pool: per node, stopped clones of its template (phase "pooled") that a
// create on that node claims instead of cloning; a background thread refills the node short of
// the most. The hot pools: running clones per profile, bound at the agent with internet off,
// each with its own SSH host key and a live idle connection. A create claims one with one config
// write (written with the digest the member had when it became ready, so a member changed behind
// our back is refused by Proxmox, destroyed and never handed out). docs/architecture.md ("Hot
// pool") says why a claim is safe.
#include <algorithm>

#include "core.h"
#include "pvesandbox/common/log.h"

namespace pvs::lifecycle {

std::optional<ManagerCore::Pooled> ManagerCore::take_pooled(const Node& n) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(pool_.begin(), pool_.end(), [&](const Pooled& p) { return p.node == &n; });
  if (it == pool_.end()) return std::nullopt;
  auto p = *it;
  pool_.erase(it);
  busy_vmids_.insert(p.vmid);
  return p;
}

int ManagerCore::pooled_on(const Node& n) const {
  return static_cast<int>(
      std::count_if(pool_.begin(), pool_.end(), [&](const Pooled& p) { return p.node == &n; }));
}

Status ManagerCore::fill_pool_once(Node& n) {
  Step s;
  s.node = &n;
  SandboxMetadata md;
  md.id = "pool-" + random_hex(12);
  md.phase = SandboxMetadata::Phase::kPooled;
  md.created_at = now_unix();
  md.labels[std::string(kPoolTemplateLabel)] = std::to_string(n.cfg.template_vmid);
  auto cloned = clone_template(
      s,
      [&](int vmid, pve::CloneRequest& req) {
        md.vmid = vmid;
        req.hostname = "pool-" + std::to_string(vmid);
        req.description = encode_description(md);
      },
      CloneQueue::Who::kRefill);
  if (!cloned) {
    if (s.container_maybe) s.container_id = md.id;
    s.id = md.id;
    (void)rollback(s);
    return cloned;
  }
  std::lock_guard lock(mu_);
  pool_.push_back({s.vmid, md.id, &n});
  busy_vmids_.erase(s.vmid);
  return {};
}

void ManagerCore::pool_loop() {
  auto backoff = milliseconds(500);
  for (;;) {
    Node* short_of = nullptr;
    {
      std::unique_lock lock(mu_);
      // The node short of the most that may take clones (Node::placeable).
      auto pick = [&] {
        int deficit = 0;
        for (auto& n : nodes_) {
          int d = cfg_.warm_pool - pooled_on(*n);
          if (d > deficit && n->placeable()) {
            deficit = d;
            short_of = n.get();
          }
        }
        return short_of != nullptr;
      };
      // Also wakes periodically: a reconcile may have dropped pooled containers.
      pool_cv_.wait_for(lock, seconds(5), [&] { return pool_stop_ || pick(); });
      if (pool_stop_) return;
      if (!short_of) continue;
    }
    if (auto r = fill_pool_once(*short_of); !r) {
      log::warn("warm pool: clone failed: " + r.error().message);
      std::unique_lock lock(mu_);
      if (pool_cv_.wait_for(lock, backoff, [&] { return pool_stop_; })) return;
      backoff = std::min(backoff * 2, milliseconds(30000));
    } else {
      backoff = milliseconds(500);
    }
  }
}

}  // namespace pvs::lifecycle

namespace pvs {

bool valid_pool_profile_name(std::string_view name) {
  return !name.empty() && name.size() <= 32 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

}  // namespace pvs

namespace pvs::lifecycle {

int ManagerCore::hot_profile_for(const CreateOptions& o, const Node& n, bool ready) const {
  if (!o.hostname.empty()) return -1;  // a hostname is only applied when a container starts
  for (std::size_t i = 0; i < hot_.size(); ++i) {
    auto& h = hot_[i];
    if (h.p.size == 0 || h.node != &n) continue;
    if (!o.profile.empty() && h.p.name != o.profile) continue;
    int wanted =
        o.template_name.empty() ? n.cfg.template_vmid : custom_vmid_locked(o.template_name, n);
    if (o.profile.empty() && h.p.template_vmid != wanted) continue;
    if (o.disk_gb > 0 && (h.disk_gb == 0 || o.disk_gb > h.disk_gb)) continue;
    if (ready && h.ready.empty()) continue;
    return static_cast<int>(i);
  }
  return -1;
}

void ManagerCore::count_hot_miss(const CreateOptions& o, const Node& n) {
  std::lock_guard lock(mu_);
  if (int fits = hot_profile_for(o, n, false); fits >= 0) ++hot_[fits].misses;
}

std::set<const Node*> ManagerCore::hot_nodes(const CreateOptions& o) const {
  std::set<const Node*> out;
  std::lock_guard lock(mu_);
  for (auto& n : nodes_)
    if (hot_profile_for(o, *n, true) >= 0) out.insert(n.get());
  return out;
}

std::optional<ManagerCore::HotMember> ManagerCore::take_hot(const CreateOptions& o, const Node& n,
                                                            int* profile) {
  std::lock_guard lock(mu_);
  int fits = hot_profile_for(o, n, false);
  if (fits < 0) return std::nullopt;
  for (;;) {
    int i = hot_profile_for(o, n, true);
    if (i < 0) {
      ++hot_[fits].misses;
      return std::nullopt;
    }
    auto& h = hot_[i];
    HotMember m = std::move(h.ready.front());
    h.ready.pop_front();
    h.quiet_until = Clock::now() + cfg_.hot_pool_refill_delay;
    hot_cv_.notify_all();  // refill
    if (m.ssh && !m.ssh->is_connected()) {
      ++h.replaced;
      discard_member(std::move(m), "its connection dropped");
      continue;
    }
    busy_vmids_.insert(m.vmid);
    *profile = i;
    return m;
  }
}

// ManagerConfig::hot_pool_warmup on a new member: what it prints and its status only logged.
void ManagerCore::warm_up(SshSession& ssh, int vmid) {
  ExecOptions o;
  o.timeout = std::chrono::seconds(30);
  o.max_output = 4096;
  auto r = ssh.exec(cfg_.hot_pool_warmup, std::move(o));
  if (r && r->exit_code == 0 && !r->timed_out) return;
  log::warn("hot member " + std::to_string(vmid) + ": warm-up " +
            (!r             ? "failed: " + r.error().message
             : r->timed_out ? std::string("timed out")
                            : "exited " + std::to_string(r->exit_code) + ": " + r->err));
}

// One config write makes the member the caller's sandbox; nothing waits on a Proxmox task.
// take_hot() handed out only a member whose connection is up: a stopped container's sshd
// closed it (docs/architecture.md, "Hot pool").
Result<std::shared_ptr<SandboxImpl>> ManagerCore::claim(Step& s, const CreateOptions& o,
                                                        const HotMember& m) {
  s.node = m.node;
  s.vmid = m.vmid;
  s.address = m.binding.address;
  s.container_maybe = true;
  s.container_id = m.id;  // until the claim writes our description
  s.port = m.binding.port;
  s.ssh = m.ssh;
  s.host_key = m.host_key;
  auto md = new_metadata(s, o);
  md.vmid = m.vmid;
  md.phase = SandboxMetadata::Phase::kReady;
  md.host_key = m.host_key;
  if (auto r = start_egress(s, o); !r) return fail(r.error());
  if (auto h = hook("claim"); !h) return fail(h.error());
  pve::Params params = {{"description", encode_description(md)}};
  if (!m.digest.empty()) params.emplace_back("digest", m.digest);
  // Proxmox applies cores at once and memory through the cgroup on a running container.
  if (o.cpus != m.cpus) params.emplace_back("cores", std::to_string(o.cpus));
  if (o.memory_mb != m.memory_mb) params.emplace_back("memory", std::to_string(o.memory_mb));
  // And the member's low CPU weight goes: the sandbox competes as any other (hot-applied too).
  if (m.low_weight) params.emplace_back("delete", "cpuunits");
  if (auto r = pve_.update_config(m.node->cfg.name, m.vmid, params); !r)
    return fail(pve_error(r.error(), "claim"));
  s.container_id.clear();
  auto sandbox = std::make_shared<SandboxImpl>(shared_from_this(), *m.node, md,
                                               "sandbox-" + std::to_string(m.vmid), o.cpus,
                                               o.memory_mb, m.disk_gb, m.binding);
  if (m.ssh) sandbox->adopt_session(m.ssh);
  return sandbox;
}

// Clone, configure, bind, start, SSH with its own host key, then "pooled" with the profile's
// label: from then on a restart may adopt it.
Status ManagerCore::fill_hot_once(int i) {
  HotPoolProfile p;
  Node* node = nullptr;
  {
    std::lock_guard lock(mu_);
    p = hot_[i].p;
    node = hot_[i].node;
  }
  if (p.template_vmid == 0)
    return fail(ErrorCode::kUnavailable, "template " + p.template_name + " is not built yet");
  Node& n = *node;
  Step s;
  s.node = node;
  s.id = "pool-" + random_hex(12);
  s.template_vmid = p.template_vmid;
  CreateOptions o;
  o.cpus = p.cpus;
  o.memory_mb = p.memory_mb;
  o.disk_gb = p.disk_gb;
  HotMember m;
  auto made = [&]() -> Status {
    auto template_gib = template_disk(o, n, p.template_vmid);
    if (!template_gib) return fail(template_gib.error());
    auto address = n.new_address();
    if (!address) return fail(address.error());
    s.address = *address;
    SandboxMetadata md;
    md.id = s.id;
    md.created_at = now_unix();
    md.address = s.address;
    md.labels[std::string(kPoolTemplateLabel)] = std::to_string(p.template_vmid);
    md.labels[std::string(kPoolProfileLabel)] = p.name;
    std::string hostname;
    auto cloned = clone_template(
        s,
        [&](int vmid, pve::CloneRequest& req) {
          md.vmid = vmid;
          hostname = "sandbox-" + std::to_string(vmid);
          req.hostname = hostname;
          req.description = encode_description(md);
        },
        CloneQueue::Who::kRefill);
    if (!cloned) return cloned;
    proto::Binding binding{port_name(s.vmid, cfg_.firewall), mac_for(*s.address), *s.address};
    if (auto r = configure(s, o, hostname, binding, nullptr, cfg_.hot_pool_member_cpuunits); !r)
      return r;
    if (p.disk_gb > 0 && static_cast<double>(p.disk_gb) != *template_gib) {
      auto r = wait(pve_.resize(n.cfg.name, s.vmid, "rootfs", std::to_string(p.disk_gb) + "G"),
                    "resize");
      if (!r) return r;
    }
    if (auto r = bring_up(s, o, binding); !r) return r;
    if (!cfg_.hot_pool_warmup.empty() && s.ssh) warm_up(*s.ssh, s.vmid);
    md.phase = SandboxMetadata::Phase::kPooled;
    md.host_key = s.host_key;
    if (auto r = write_description(n, s.vmid, md); !r) return r;
    auto conf = pve_.config(n.cfg.name, s.vmid);
    if (!conf) return fail(pve_error(conf.error(), "read config"));
    m = HotMember{&n,
                  s.vmid,
                  s.id,
                  binding,
                  s.ssh,
                  s.host_key,
                  conf->count("digest") ? conf->at("digest") : "",
                  p.cpus,
                  p.memory_mb,
                  conf->count("rootfs") ? size_gb(conf->at("rootfs")) : 0,
                  conf->count("cpuunits") > 0};
    return {};
  }();
  if (!made) {
    (void)rollback(s);
    return made;
  }
  std::lock_guard lock(mu_);
  hot_[i].disk_gb = m.disk_gb;
  hot_[i].ready.push_back(std::move(m));
  busy_vmids_.erase(s.vmid);
  return {};
}

void ManagerCore::discard_member(HotMember m, std::string_view why) {
  log::info("hot member " + std::to_string(m.vmid) + " replaced: " + std::string(why));
  busy_vmids_.insert(m.vmid);
  hot_discard_.push_back(std::move(m));
  hot_cv_.notify_all();
}

// A member never had internet: unbind, destroy, release. If the destroy fails, the reconciler
// decides again (adopt it if it passes the checks of a restart, else destroy it).
void ManagerCore::destroy_member(HotMember m) {
  if (m.ssh) m.ssh->close();
  unbind(*m.node, m.binding.port);
  if (auto r = destroy_container(*m.node, m.vmid, m.id); !r) {
    log::warn("hot member " + std::to_string(m.vmid) +
              " not destroyed (reconcile retries): " + r.error().message);
    busy(m.vmid, false);
    return;
  }
  vmids_.release(static_cast<std::uint32_t>(m.vmid));
  m.node->addrs->release(m.binding.address);
  busy(m.vmid, false);
}

void ManagerCore::check_hot_members() {
  for (auto& h : hot_) {
    for (auto it = h.ready.begin(); it != h.ready.end();) {
      if (it->ssh && !it->ssh->is_connected()) {
        ++h.replaced;
        discard_member(std::move(*it), "its connection dropped");
        it = h.ready.erase(it);
      } else {
        ++it;
      }
    }
  }
}

bool ManagerCore::claimed_or_busy(int vmid) const {
  if (busy_vmids_.count(vmid)) return true;
  for (auto& [id, sb] : registry_)
    if (sb->vmid() == vmid) return true;
  return false;
}

// One of hot_pool_refill_parallel workers: destroys discarded members first, then makes one
// member for the profile short of the most, each profile backing off after a failure.
void ManagerCore::hot_loop() {
  std::unique_lock lock(mu_);
  while (!pool_stop_) {
    check_hot_members();
    if (!hot_discard_.empty()) {
      HotMember m = std::move(hot_discard_.front());
      hot_discard_.pop_front();
      lock.unlock();
      destroy_member(std::move(m));
      lock.lock();
      continue;
    }
    auto now = Clock::now();
    auto wake = now + cfg_.hot_pool_check_interval;
    int best = -1, deficit = 0;
    for (std::size_t i = 0; i < hot_.size(); ++i) {
      auto& h = hot_[i];
      int d = h.p.size - static_cast<int>(h.ready.size()) - h.filling;
      if (d <= 0 || !h.node->placeable()) continue;
      if (h.not_before > now) {
        wake = std::min(wake, h.not_before);
      } else if (h.quiet_until > now && 2 * static_cast<int>(h.ready.size()) >= h.p.size) {
        wake = std::min(wake, h.quiet_until);  // just claimed, half full or more: when quiet
      } else if (d > deficit) {
        best = static_cast<int>(i);
        deficit = d;
      }
    }
    if (best < 0) {
      hot_cv_.wait_until(lock, wake);
      continue;
    }
    ++hot_[best].filling;
    lock.unlock();
    auto r = fill_hot_once(best);
    lock.lock();
    auto& h = hot_[best];
    --h.filling;
    hot_cv_.notify_all();  // a delete of its template waits for its fills
    if (r) {
      h.backoff = milliseconds(500);
      continue;
    }
    ++h.refill_failures;
    log::warn("hot pool " + h.p.name + " on " + h.node->cfg.name +
              ": member not made: " + r.error().message);
    h.not_before = Clock::now() + h.backoff;
    h.backoff = std::min(h.backoff * 2, milliseconds(30000));
  }
}

std::vector<PoolInfo> ManagerCore::pools() const {
  std::vector<PoolInfo> out;
  std::lock_guard lock(mu_);
  for (const HotProfile& h : hot_) {
    if (h.implicit && h.p.size == 0 && h.ready.empty() && h.filling == 0) continue;  // retired
    const Node* node = h.node;
    PoolInfo i;
    i.name = h.p.name;
    i.node = node->cfg.name;
    i.template_vmid = h.p.template_vmid;
    i.cpus = h.p.cpus;
    i.memory_mb = h.p.memory_mb;
    i.disk_gb = h.p.disk_gb != 0 ? h.p.disk_gb : h.disk_gb;
    i.size = h.p.size;
    i.ready = static_cast<int>(h.ready.size());
    i.filling = h.filling;
    i.claims = h.claims;
    i.misses = h.misses;
    i.refill_failures = h.refill_failures;
    i.replaced = h.replaced;
    i.claim_latency = h.claim_latency->snapshot();
    out.push_back(std::move(i));
  }
  for (auto& n : nodes_) {
    if (cfg_.warm_pool <= 0) break;
    PoolInfo w;
    w.name = "warm";
    w.node = n->cfg.name;
    w.hot = false;
    w.template_vmid = n->cfg.template_vmid;
    w.size = cfg_.warm_pool;
    w.ready = pooled_on(*n);
    w.claims = n->pool_hits;
    w.misses = n->pool_misses;
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace pvs::lifecycle
