// The create pipeline: validation, the steps with their rollback, and the template clone.
// docs/architecture.md ("Sandbox lifecycle") lists the steps and what undoes each.
#include <optional>
#include <sstream>
#include <thread>

#include "core.h"
#include "on_exit.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"
#include "service.h"

namespace pvs::lifecycle {

Status ManagerCore::rollback(Step& s) {
  Status result;
  bool address_clean = true;
  if (s.ssh) s.ssh->close();
  Node& n = *s.node;
  if (s.granted) {
    if (auto r = revoke_all(n, *s.address); !r) {
      address_clean = false;
      result = r;
    }
  }
  if (!s.port.empty()) unbind(n, s.port);
  bool container_gone = true;
  if (s.container_maybe) {
    auto r = destroy_container(n, s.vmid, s.container_id.empty() ? s.id : s.container_id);
    // A configure that failed in transport may still have written our description.
    if (!r && r.error().code == ErrorCode::kPermissionDenied && !s.container_id.empty())
      r = destroy_container(n, s.vmid, s.id);
    if (!r) {
      // Left with phase "creating" in its description: the reconciler destroys it.
      container_gone = false;
      log::error("rollback: container " + std::to_string(s.vmid) +
                 " not destroyed (reconcile retries): " + r.error().message);
      if (result) result = r;
    }
  }
  if (s.vmid != 0) {
    if (container_gone) vmids_.release(static_cast<std::uint32_t>(s.vmid));
    busy(s.vmid, false);
  }
  // A container left behind keeps its address until the reconciler destroyed it (it may run
  // with it, e.g. on a node that went offline mid-create).
  if (s.address && address_clean && container_gone) n.addrs->release(*s.address);
  return result;
}

Status ManagerCore::validate(const CreateOptions& o) {
  if (!o.hostname.empty() && !valid_hostname(o.hostname))
    return fail(ErrorCode::kInvalidArgument, "hostname must be a DNS label (RFC 1123)");
  if (o.cpus < 1 || o.cpus > cfg_.max_cpus)
    return fail(ErrorCode::kInvalidArgument, "cpus must be 1.." + std::to_string(cfg_.max_cpus));
  if (o.memory_mb < 16 || o.memory_mb > cfg_.max_memory_mb)
    return fail(ErrorCode::kInvalidArgument,
                "memory_mb must be 16.." + std::to_string(cfg_.max_memory_mb));
  if (o.disk_gb < 0 || o.disk_gb > cfg_.max_disk_gb)
    return fail(ErrorCode::kInvalidArgument,
                "disk_gb must be 0.." + std::to_string(cfg_.max_disk_gb));
  if (o.ttl.count() < 0 || o.ttl > cfg_.max_ttl)
    return fail(ErrorCode::kInvalidArgument, "ttl out of range");
  if (o.auto_resume && !o.pause_on_expiry)
    return fail(ErrorCode::kInvalidArgument,
                "auto_resume needs pause_on_expiry (a sandbox its TTL destroyed cannot resume)");
  if (!o.template_name.empty() &&
      (template_nodes(o).empty() || !may_use_template(o.template_name, o.owner)))
    return fail(ErrorCode::kInvalidArgument, "no template " + pvs::quoted(o.template_name, 40));
  if (!o.profile.empty()) {  // where the profile is, it must be of the template named
    CreateOptions by_profile = o;
    by_profile.template_name.clear();
    bool found = false;
    for (auto& n : nodes_) {
      int t = template_for(by_profile, *n);
      if (t == 0) continue;
      found = true;
      if (!o.template_name.empty() && t != template_for(o, *n))
        return fail(ErrorCode::kInvalidArgument, "hot pool profile " + pvs::quoted(o.profile, 40) +
                                                     " is not of template " +
                                                     pvs::quoted(o.template_name, 40));
    }
    if (!found)
      return fail(ErrorCode::kInvalidArgument, "no hot pool profile " + pvs::quoted(o.profile, 40));
  }
  if (!o.node.empty() && !find_node(o.node))
    return fail(ErrorCode::kInvalidArgument,
                "no node " + pvs::quoted(o.node, 64) + " in the cluster");
  if (auto v = validate_labels(o.node_selector); !v)
    return fail(ErrorCode::kInvalidArgument, "node_selector: " + v.error().message);
  if (auto v = validate_client_labels(o.labels); !v) return fail(v.error());
  if (auto e = create_egress(o); !e) return fail(e.error());
  return {};
}

Result<Egress> ManagerCore::create_egress(const CreateOptions& o) {
  if (o.egress.mode == Egress::Mode::kOff) return o.internet ? Egress::on() : Egress::off();
  if (o.internet)
    return fail(ErrorCode::kInvalidArgument, "internet and egress at once: give one of them");
  Egress e = o.egress;
  if (e.allowlist()) normalize_egress_list(e.list);
  if (auto ok = validate_egress(e); !ok) return fail(ok.error());
  return e;
}

int ManagerCore::template_for(const CreateOptions& o, const Node& n) const {
  if (o.template_name.empty() && o.profile.empty()) return n.cfg.template_vmid;
  std::lock_guard lock(mu_);
  if (!o.template_name.empty()) return custom_vmid_locked(o.template_name, n);
  for (auto& h : hot_)
    if (h.p.name == o.profile && h.node == &n) return h.p.template_vmid;
  return 0;
}

std::set<const Node*> ManagerCore::template_nodes(const CreateOptions& o) const {
  std::set<const Node*> out;
  if (o.template_name.empty() && o.profile.empty()) return out;  // every node
  for (auto& n : nodes_)
    if (template_for(o, *n) != 0) out.insert(n.get());
  return out;
}

// A profile of a custom template names it: placed where it is, labelled with it (in use).
CreateOptions ManagerCore::with_template(const CreateOptions& options) const {
  CreateOptions o = options;
  if (!o.template_name.empty() || o.profile.empty()) return o;
  std::lock_guard lock(mu_);
  for (auto& h : hot_)
    if (h.p.name == o.profile && !h.p.template_name.empty()) {
      o.template_name = h.p.template_name;
      break;
    }
  return o;
}

// A disk only grows: a smaller one is the caller's mistake, said before anything is cloned.
Result<double> ManagerCore::template_disk(const CreateOptions& o, const Node& n,
                                          int template_vmid) {
  if (o.disk_gb == 0) return 0.0;
  auto t = pve_.config(template_home(template_vmid, n), template_vmid);
  if (!t) return fail(pve_error(t.error(), "template config"));
  double template_gib = t->count("rootfs") ? size_gib(t->at("rootfs")) : 0;
  if (o.disk_gb < template_gib) {
    std::ostringstream gib;
    gib << template_gib;
    return fail(ErrorCode::kInvalidArgument,
                "disk_gb " + std::to_string(o.disk_gb) + " is smaller than the template's disk (" +
                    gib.str() + " GiB): a container's disk can only grow");
  }
  return template_gib;
}

SandboxMetadata ManagerCore::new_metadata(const Step& s, const CreateOptions& o) const {
  SandboxMetadata md;
  md.id = s.id;
  md.phase = SandboxMetadata::Phase::kCreating;
  md.created_at = now_unix();
  auto ttl = o.ttl.count() == 0 ? cfg_.default_ttl : o.ttl;
  md.expires_at = ttl.count() == 0 ? 0 : md.created_at + ttl.count();
  if (o.pause_on_expiry) md.on_expiry = {true, o.auto_resume, ttl.count()};
  if (auto e = create_egress(o)) set_egress(md, *e);
  md.address = s.address;
  md.owner = o.owner;
  md.labels = o.labels;  // validate_client_labels: none of the controller's own
  md.volumes = o.volumes;
  // What the create used, the one record of a template's users (catalog.cc counts these).
  if (!o.template_name.empty()) md.labels[std::string(kTemplateNameLabel)] = o.template_name;
  return md;
}

Result<std::shared_ptr<Sandbox>> ManagerCore::create(const CreateOptions& options) {
  auto started = Clock::now();
  const CreateOptions o = with_template(options);
  if (auto v = validate(o); !v) return fail(v.error());
  {
    std::lock_guard lock(mu_);
    if (static_cast<int>(registry_.size()) + inflight_ >= cfg_.max_sandboxes)
      return fail(ErrorCode::kUnavailable, "sandbox limit reached");
    ++inflight_;
  }
  OnExit inflight_guard([this] {
    std::lock_guard lock(mu_);
    --inflight_;
  });
  // The node: one with a ready hot member if placement allows one there (a member already runs
  // and counts in the node's memory: it adds none), else any node with room for a new one.
  struct Reservation {
    Reservation(ManagerCore* core, Node* node, std::uint64_t memory)
        : m(core), n(node), mem(memory) {}
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation() { m->unreserve(*n, mem, made); }
    ManagerCore* m;
    Node* n;
    std::uint64_t mem;
    bool made = false;
  };
  std::optional<Reservation> reservation;
  const auto memory = static_cast<std::uint64_t>(o.memory_mb) << 20;
  bool hot_node = false;  // placed for a hot member: no memory reserved
  // Volumes: claimed for this sandbox until it is registered (or fails), and placed on their node.
  const std::string sandbox_id = "sb-" + random_hex(12);
  std::set<const Node*> only = template_nodes(o);
  if (auto claimed = claim_volumes(o, sandbox_id, &only); !claimed) return fail(claimed.error());
  OnExit unclaim([this, &sandbox_id] { release_volumes(sandbox_id); });
  // `count`: a failure is the create's (not a try for a hot member).
  auto place = [&](const std::set<const Node*>& among, std::uint64_t mem, bool count) -> Status {
    reservation.reset();
    auto node = place_create(o, among, mem);
    if (!node && count) {
      std::lock_guard lock(mu_);
      ++stats_.create_failures;
    }
    if (!node) return fail(node.error());
    reservation.emplace(this, *node, mem);
    return {};
  };
  // A hot member runs: it cannot mount volumes at its start.
  if (auto hot = o.volumes.empty() ? hot_nodes(o) : std::set<const Node*>{};
      !hot.empty() && place(hot, 0, false)) {
    hot_node = true;
  } else {
    if (auto placed = place(only, memory, true); !placed) return fail(placed.error());
    count_hot_miss(o, *reservation->n);  // no member ready on any node
  }

  // A hot member if one fits (a second one if claiming the first failed), else a clone.
  for (int attempt = 0; hot_node && attempt < 2; ++attempt) {
    int profile = -1;
    auto member = take_hot(o, *reservation->n, &profile);
    if (!member) break;
    Step s;
    s.id = "sb-" + random_hex(12);
    s.node = reservation->n;
    auto claimed = claim(s, o, *member);
    if (claimed) {
      reservation->made = true;
      register_created(s, *claimed, o);
      std::lock_guard lock(mu_);
      ++hot_[profile].claims;
      hot_[profile].claim_latency->record(Clock::now() - started, true);
      return std::shared_ptr<Sandbox>(*claimed);
    }
    log::warn("claim of hot member " + std::to_string(member->vmid) +
              " failed: " + claimed.error().message);
    (void)rollback(s);
    std::lock_guard lock(mu_);
    ++hot_[profile].replaced;
    hot_cv_.notify_all();
  }
  // No member after all: a new container, placed with its memory.
  if (hot_node)
    if (auto placed = place(only, memory, true); !placed) return fail(placed.error());
  Node* node = reservation->n;
  Step s;
  s.id = sandbox_id;
  s.node = node;
  auto built = create_cold(s, o);
  if (!built) {
    log::warn("create " + s.id + " failed: " + built.error().message);
    (void)rollback(s);
    std::lock_guard lock(mu_);
    ++stats_.create_failures;
    return fail(built.error());
  }
  reservation->made = true;
  register_created(s, *built, o);
  return std::shared_ptr<Sandbox>(*built);
}

void ManagerCore::register_created(const Step& s, const std::shared_ptr<SandboxImpl>& sandbox,
                                   const CreateOptions& o) {
  {
    std::lock_guard lock(mu_);
    enroll_locked(s.id, sandbox, o.owner);
    busy_vmids_.erase(s.vmid);
    ++stats_.creates;
  }
  log::info("created " + s.id + " vmid=" + std::to_string(s.vmid) + " node=" + s.node->cfg.name +
            " address=" + s.address->to_string() + (o.internet ? " internet" : "") +
            (o.egress.allowlist() ? " allowlist" : ""));
}

// The warm pool or a clone: an address, then steps 1-8.
Result<std::shared_ptr<SandboxImpl>> ManagerCore::create_cold(Step& s, const CreateOptions& o) {
  s.template_vmid = template_for(o, *s.node);
  auto template_gib = template_disk(o, *s.node, s.template_vmid);
  if (!template_gib) return fail(template_gib.error());
  auto address = s.node->new_address();
  if (!address) return fail(address.error());
  s.address = *address;
  return build(s, o, *template_gib);
}

// Steps 1-8 of create (docs/architecture.md); an error leaves `s` for rollback().
Result<std::shared_ptr<SandboxImpl>> ManagerCore::build(Step& s, const CreateOptions& o,
                                                        double template_gib) {
  auto md = new_metadata(s, o);
  // 1. A stopped clone from the warm pool (default template only), else a clone (queued per
  // template).
  if (auto h = hook("clone"); !h) return fail(h.error());
  Node& n = *s.node;
  auto pooled = s.template_vmid == n.cfg.template_vmid ? take_pooled(n) : std::nullopt;
  if (pooled) {
    s.vmid = pooled->vmid;
    s.container_maybe = true;
    s.container_id = pooled->id;  // until the configure step writes our description
  } else {
    auto cloned = clone_template(s, [&](int vmid, pve::CloneRequest& req) {
      md.vmid = vmid;
      req.hostname = o.hostname.empty() ? "sandbox-" + std::to_string(vmid) : o.hostname;
      req.description = encode_description(md);
    });
    if (!cloned) return fail(cloned.error());
  }
  md.vmid = s.vmid;
  std::string hostname = o.hostname.empty() ? "sandbox-" + std::to_string(s.vmid) : o.hostname;
  {
    std::lock_guard lock(mu_);
    ++(pooled ? stats_.pool_hits : stats_.pool_misses);
    ++(pooled ? n.pool_hits : n.pool_misses);
  }
  if (pooled) pool_cv_.notify_all();  // refill

  // 2. Configure: resources, address, tag. With DHCP the address is still ours: the agent's
  // BIND publishes it as the node dnsmasq's reservation for this MAC.
  proto::Binding binding{port_name(s.vmid, cfg_.firewall), mac_for(*s.address), *s.address};
  if (auto h = hook("configure"); !h) return fail(h.error());
  if (auto r = configure(s, o, hostname, binding, pooled ? &md : nullptr, 0); !r)
    return fail(r.error());
  s.container_id.clear();
  // 3. Resize (Proxmox refuses a resize to the size the disk has).
  int disk_gb = o.disk_gb;
  if (o.disk_gb > 0 && static_cast<double>(o.disk_gb) != template_gib) {
    if (auto h = hook("resize"); !h) return fail(h.error());
    if (auto r = wait(pve_.resize(n.cfg.name, s.vmid, "rootfs", std::to_string(o.disk_gb) + "G"),
                      "resize");
        !r)
      return fail(r.error());
  }
  // 4-7. Bind, start, SSH, internet.
  if (auto r = bring_up(s, o, binding); !r) return fail(r.error());
  // 8. Ready: the only step that makes the container survive a restart (not a template
  // build's: it stays "creating" until it is sealed).
  if (!s.template_build) md.phase = SandboxMetadata::Phase::kReady;
  md.host_key = s.host_key;
  if (auto h = hook("ready"); !h) return fail(h.error());
  if (auto r = write_description(n, s.vmid, md); !r) return fail(r.error());

  if (disk_gb == 0) {
    auto c = pve_.config(n.cfg.name, s.vmid);
    if (c && c->count("rootfs")) disk_gb = size_gb(c->at("rootfs"));
  }
  auto sandbox = std::make_shared<SandboxImpl>(shared_from_this(), n, md, hostname, o.cpus,
                                               o.memory_mb, disk_gb, binding);
  if (s.ssh) sandbox->adopt_session(s.ssh);
  return sandbox;
}

// Resources, address and tag in one config write (never `features`); a pooled clone becomes
// this sandbox in the same atomic write (`md` given: its description).
Status ManagerCore::configure(Step& s, const CreateOptions& o, const std::string& hostname,
                              const proto::Binding& binding, const SandboxMetadata* md,
                              int cpuunits) {
  const NodeConfig& nc = s.node->cfg;
  std::string net0 = "name=eth0,bridge=" + nc.bridge + ",hwaddr=" + upper(binding.mac.to_string());
  if (cfg_.dhcp) {
    net0 += ",ip=dhcp";
  } else {
    net0 += ",ip=" + s.address->to_string() + "/" + std::to_string(nc.sandbox_cidr.prefix()) +
            ",gw=" + nc.gateway.to_string();
  }
  net0 += ",type=veth";
  if (cfg_.firewall) net0 += ",firewall=1";
  pve::Params params = {{"cores", std::to_string(o.cpus)},
                        {"memory", std::to_string(o.memory_mb)},
                        {"swap", "0"},
                        {"hostname", hostname},
                        {"net0", net0},
                        {"tags", std::string(kTag)}};
  if (md) params.emplace_back("description", encode_description(*md));
  if (cpuunits > 0) params.emplace_back("cpuunits", std::to_string(cpuunits));
  if (!o.volumes.empty()) {
    auto mounts = mount_params(o.volumes);
    if (!mounts) return fail(mounts.error());
    params.insert(params.end(), mounts->begin(), mounts->end());
  }
  auto conf = pve_.update_config(nc.name, s.vmid, params);
  if (!conf) return fail(pve_error(conf.error(), "configure"));
  return {};
}

// 4. The L2 guard before the first frame, 5. start, 6. SSH, 7. internet with a lease, 7b. the
// template's service (service.h).
Status ManagerCore::bring_up(Step& s, const CreateOptions& o, const proto::Binding& binding) {
  if (auto h = hook("bind"); !h) return h;
  if (auto r = bind(*s.node, binding); !r) return r;
  s.port = binding.port;
  if (auto h = hook("start"); !h) return h;
  if (auto r = wait(pve_.start(s.node->cfg.name, s.vmid), "start"); !r) return r;
  if (auto h = hook("ssh"); !h) return h;
  if (cfg_.wait_for_ssh) {
    auto ssh = wait_for_ssh(*s.address, &s.host_key, !s.template_build,
                            template_host_key(o.template_name));
    if (!ssh) return fail(ssh.error());
    s.ssh = *ssh;
  }
  if (auto r = start_egress(s, o); !r) return r;
  // 7b. Its template's service, started and ready (a build checks its own instead).
  if (!s.ssh || s.template_build) return {};
  if (auto h = hook("service"); !h) return h;
  return start_service(*s.ssh);
}

void ManagerCore::busy(int vmid, bool on) {
  std::lock_guard lock(mu_);
  if (on)
    busy_vmids_.insert(vmid);
  else
    busy_vmids_.erase(vmid);
}

CloneQueue& ManagerCore::clone_queue(int template_vmid) {
  std::lock_guard lock(mu_);
  auto& q = clone_queues_[template_vmid];
  if (!q) q = std::make_unique<CloneQueue>();
  return *q;
}

Status ManagerCore::clone_template(
    Step& s, const std::function<void(int vmid, pve::CloneRequest&)>& describe, CloneQueue::Who who,
    bool primary_only) {
  const int primary = s.template_vmid != 0 ? s.template_vmid : s.node->cfg.template_vmid;
  // A template on another node (shared storage) is cloned there, with this node as target;
  // its replicas live next to it.
  const std::string home = template_home(primary, *s.node);
  for (int attempt = 0;; ++attempt) {
    auto vmid = vmids_.acquire();
    if (!vmid) return fail(ErrorCode::kUnavailable, "no free VMID in the range");
    s.vmid = static_cast<int>(*vmid);
    busy(s.vmid, true);
    pve::CloneRequest req;
    if (home != s.node->cfg.name) req.target = s.node->cfg.name;
    req.new_vmid = s.vmid;
    req.pool = cfg_.pool;
    req.storage = cfg_.storage;
    if (cfg_.full_clone) req.full = true;
    describe(s.vmid, req);
    Status cloned;
    bool exists = false;
    int gone = 0;  // a replica that vanished behind our back
    {
      struct Source {  // the template or a replica, counted in flight while held
        Source(ManagerCore* core, int p, bool only) : m(core), vmid(core->take_source(p, only)) {}
        ~Source() { m->give_source(vmid); }
        Source(const Source&) = delete;
        Source& operator=(const Source&) = delete;
        ManagerCore* m;
        int vmid;
      } source(this, primary, primary_only);
      req.source_vmid = source.vmid;
      CloneQueue::Turn turn(clone_queue(req.source_vmid), who);
      auto lock_deadline = Clock::now() + cfg_.clone_lock_wait;
      auto delay = milliseconds(50);
      for (;;) {
        auto upid = pve_.clone(home, req);
        if (!upid && upid.error().is(pve::ErrorKind::kAlreadyExists)) {
          exists = true;
          break;
        }
        if (!upid && upid.error().is(pve::ErrorKind::kNotFound) && source.vmid != primary) {
          gone = source.vmid;
          break;
        }
        if (upid) s.container_maybe = true;
        // A transport failure may still have created it.
        if (!upid && upid.error().is(pve::ErrorKind::kTransport)) s.container_maybe = true;
        bool locked = !upid && upid.error().is(pve::ErrorKind::kLocked);
        if (locked && Clock::now() + delay < lock_deadline) {
          std::this_thread::sleep_for(delay);
          delay = std::min(delay * 2, milliseconds(1000));
          continue;
        }
        cloned = wait(upid, "clone");
        break;
      }
    }
    if (gone != 0) {  // out of use until a reconcile makes it again; another source
      drop_replica(primary, gone);
      vmids_.release(static_cast<std::uint32_t>(s.vmid));
      busy(s.vmid, false);
      s.vmid = 0;
      continue;
    }
    if (exists) {
      // Somebody else's: keep the VMID marked used, never touch that container.
      busy(s.vmid, false);
      s.vmid = 0;
      if (attempt < 16) continue;
      return fail(ErrorCode::kUnavailable, "no usable VMID after 16 attempts");
    }
    return cloned;
  }
}

}  // namespace pvs::lifecycle
