// The Sandbox handle: its info, exec and files over its SSH session, internet, snapshots, TTL,
// usage over time.
// State changes are serialised per sandbox (op_mutex) and recorded in the description.
#include <algorithm>
#include <array>
#include <utility>

#include "core.h"
#include "pvesandbox/common/log.h"

namespace pvs::lifecycle {

SandboxInfo SandboxImpl::info() const {
  std::lock_guard lock(mu_);
  SandboxInfo i;
  i.id = md_.id;
  i.vmid = md_.vmid;
  i.node = node_.cfg.name;
  i.hostname = hostname_;
  i.address = md_.address;
  i.phase = md_.phase;
  i.status = status_;
  i.internet = md_.internet;
  i.egress = egress_of(md_);
  i.cpus = cpus_;
  i.memory_mb = memory_mb_;
  i.disk_gb = disk_gb_;
  i.created_at = md_.created_at;
  i.expires_at = md_.expires_at;
  i.labels = md_.labels;
  i.owner = md_.owner;
  i.host_key = md_.host_key;
  i.on_expiry = md_.on_expiry;
  i.volumes = md_.volumes;
  return i;
}

void SandboxImpl::close_session() {
  std::shared_ptr<SshSession> ssh;
  {
    std::lock_guard lock(mu_);
    ssh = std::move(ssh_);
  }
  if (ssh) ssh->close();
}

Result<std::shared_ptr<SshSession>> SandboxImpl::session() {
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  if (auto woke = wake_if_paused(); !woke) return fail(woke.error());
  std::lock_guard lock(mu_);
  if (md_.phase == SandboxMetadata::Phase::kPaused) return fail(paused_error());
  if (!ssh_) {
    SshConfig sc = core_->config().ssh;
    sc.host = md_.address->to_string();
    if (!md_.host_key.empty()) {  // the sandbox's own key, learnt at create
      sc.host_key_policy = HostKeyPolicy::kPinned;
      sc.host_key_fingerprint = md_.host_key;
    }
    ssh_ = std::make_shared<SshSession>(sc);
  }
  return ssh_;
}

// OnExpiry::auto_resume: a paused sandbox is resumed (with its TTL of creation) before the call
// that needs it; a resume another call made meanwhile is as good (kConflict: not paused).
Status SandboxImpl::wake_if_paused() {
  {
    std::lock_guard lock(mu_);
    if (md_.phase != SandboxMetadata::Phase::kPaused || !md_.on_expiry.auto_resume) return {};
  }
  auto r = core_->resume(*this, std::chrono::seconds(0));
  if (r) {
    core_->count_auto_resume();
    log::info("auto-resumed " + id() + " for a data-plane call");
    return r;
  }
  return r.error().code == ErrorCode::kConflict && !paused() ? Status{} : r;
}

Error SandboxImpl::paused_error() const {
  return Error{ErrorCode::kConflict, "sandbox " + id() + " is paused; resume it first"};
}

Status SandboxImpl::write_metadata(const SandboxMetadata& md) {
  if (auto r = core_->write_description(node_, md_.vmid, md); !r) return r;
  std::lock_guard lock(mu_);
  md_ = md;
  return {};
}

Status SandboxImpl::set_egress(const Egress& wanted) {
  Egress to = wanted;
  if (to.allowlist()) normalize_egress_list(to.list);
  if (auto ok = validate_egress(to); !ok) return ok;
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  auto md = metadata();
  auto from = egress_of(md);
  bool in_effect = false;
  auto changed = core_->change_egress(node_, *md.address, from, to, &in_effect);
  if (!in_effect) return changed;
  // Recorded once the new egress is in place; a failed write puts the old one back.
  pvs::set_egress(md, to);
  if (auto w = write_metadata(md); !w) {
    bool back = false;
    (void)core_->change_egress(node_, *md.address, to, from, &back);
    return w;
  }
  return changed;
}

Result<EgressLog> SandboxImpl::egress_log() {
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  auto md = metadata();
  EgressLog log;
  if (!egress_of(md).allowlist() || !md.address) return log;
  // The node keys both logs by address, and addresses are reused (#46): nothing from before
  // this sandbox was created is its own. The agent forgets an address's lines and refusals when
  // its list goes; this is the second guard. It also drops the lines of a resolver window that
  // the address's last holder opened and that ended after the list changed hands.
  std::int64_t created_ms = md.created_at * 1000;
  auto lines = node_.agent.egress_log(*md.address);
  if (!lines) return fail(lines.error());
  log.names = std::move(*lines);
  std::erase_if(log.names, [&](const proto::EgressLogLine& l) { return l.window_ms < created_ms; });
  auto refused = node_.agent.egress_refused(*md.address);
  if (refused) {
    log.connections = std::move(*refused);
    std::erase_if(log.connections,
                  [&](const proto::RefusedConnection& c) { return c.first_ms < created_ms; });
  } else if (refused.error().code != ErrorCode::kConflict) {  // kConflict: an older ruleset
    return fail(refused.error());
  }
  return log;
}

Result<pve::ContainerStatus> SandboxImpl::status() {
  auto r = core_->pve().status(node_.cfg.name, md_.vmid);
  if (!r) return fail(pve_error(r.error(), "status"));
  set_status(r->status);
  return std::move(*r);
}

// Proxmox checks snapshot names only inside the task (a missing one fails the task with
// "snapshot 'x' does not exist", a taken one with "snapshot name 'x' already used"), which the
// client reports as a failed task (kInternal). Ask first, and map those task errors too, so
// that callers get kNotFound / kConflict.
Result<bool> SandboxImpl::has_snapshot(const std::string& name) {
  auto r = core_->pve().snapshots(node_.cfg.name, md_.vmid);
  if (!r) return fail(pve_error(r.error(), "snapshots"));
  return std::any_of(r->begin(), r->end(),
                     [&](const pve::Snapshot& s) { return !s.is_current && s.name == name; });
}

namespace {
Status snapshot_result(Status r, const std::string& name) {
  if (r) return r;
  const auto& m = r.error().message;
  if (m.find("does not exist") != std::string::npos)
    return fail(ErrorCode::kNotFound, "no snapshot " + name);
  if (m.find("already used") != std::string::npos)
    return fail(ErrorCode::kConflict, "snapshot " + name + " exists already");
  return r;
}
}  // namespace

Status SandboxImpl::snapshot(const std::string& name, const std::string& description) {
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  if (auto ok = no_volumes(metadata()); !ok) return ok;
  auto taken = core_->pve().snapshots(node_.cfg.name, md_.vmid);
  if (!taken) return fail(pve_error(taken.error(), "snapshots"));
  int count = 0;
  for (const auto& s : *taken) {
    if (s.is_current) continue;
    if (s.name == name) return fail(ErrorCode::kConflict, "snapshot " + name + " exists already");
    ++count;
  }
  if (int max = core_->config().max_snapshots; count >= max)
    return fail(ErrorCode::kConflict, "sandbox " + id() + " has " + std::to_string(count) +
                                          " snapshots, the most it may keep (max_snapshots " +
                                          std::to_string(max) + "); delete one first");
  return snapshot_result(
      core_->wait(core_->pve().create_snapshot(node_.cfg.name, md_.vmid, name, description),
                  "snapshot"),
      name);
}

Result<std::vector<SnapshotInfo>> SandboxImpl::snapshots() {
  auto r = core_->pve().snapshots(node_.cfg.name, md_.vmid);
  if (!r) return fail(pve_error(r.error(), "snapshots"));
  std::vector<SnapshotInfo> out;
  for (auto& s : *r)
    if (!s.is_current) out.push_back({s.name, s.description, s.snaptime});
  return out;
}

Status SandboxImpl::rollback(const std::string& name) {
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  auto exists = has_snapshot(name);
  if (!exists) return fail(exists.error());
  if (!*exists) return fail(ErrorCode::kNotFound, "no snapshot " + name);
  if (paused()) return fail(paused_error());  // a rollback starts the container
  close_session();
  if (auto r = snapshot_result(
          core_->wait(core_->pve().rollback_snapshot(node_.cfg.name, md_.vmid, name, true),
                      "rollback"),
          name);
      !r)
    return r;
  // The snapshot's config carries the description of its time: write today's back.
  return write_metadata(metadata());
}

Status SandboxImpl::delete_snapshot(const std::string& name) {
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  auto exists = has_snapshot(name);
  if (!exists) return fail(exists.error());
  if (!*exists) return fail(ErrorCode::kNotFound, "no snapshot " + name);
  return snapshot_result(
      core_->wait(core_->pve().delete_snapshot(node_.cfg.name, md_.vmid, name), "delete snapshot"),
      name);
}

Status SandboxImpl::extend_ttl(std::chrono::seconds ttl) {
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  if (ttl.count() <= 0) return fail(ErrorCode::kInvalidArgument, "ttl must be positive");
  if (paused()) return fail(paused_error());  // its paused TTL runs; resume takes a ttl
  ttl = std::min(ttl, core_->config().max_ttl);
  auto md = metadata();
  md.expires_at = now_unix() + ttl.count();
  return write_metadata(md);
}

Status SandboxImpl::destroy() {
  return core_->destroy(*this);
}

Result<ExecResult> SandboxImpl::exec(std::string command, ExecOptions options) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  auto r = (*ssh)->exec(std::move(command), std::move(options));
  if (!r) return fail(r.error());
  return std::move(*r);
}

void SandboxImpl::exec_then(std::string command, ExecOptions options, ExecDone done) {
  auto ssh = session();
  if (!ssh) return done(fail(ssh.error()));
  (*ssh)->exec_then(std::move(command), std::move(options), std::move(done));
}

Status SandboxImpl::write_file(const std::string& path, std::string_view data, std::uint32_t mode) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  UploadOptions o;
  o.mode = mode;
  auto r = (*ssh)->upload(path, data, o);
  if (!r) return fail(r.error());
  return {};
}

Result<std::string> SandboxImpl::read_file(const std::string& path, std::uint64_t max_size) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  DownloadOptions o;
  o.max_size = max_size;
  auto r = (*ssh)->download(path, o);
  if (!r) return fail(r.error());
  return std::move(*r);
}

Status SandboxImpl::upload(const std::string& path, std::istream& in, const UploadOptions& options,
                           std::optional<std::uint64_t> size_hint) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  (void)size_hint;  // SshSession sizes its pipeline itself
  auto r = (*ssh)->upload(path, in, options);
  if (!r) return fail(r.error());
  return {};
}

Result<std::uint64_t> SandboxImpl::download(const std::string& path, std::ostream& out,
                                            const DownloadOptions& options) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  auto r = (*ssh)->download(path, out, options);
  if (!r) return fail(r.error());
  return *r;
}

Result<DirListing> SandboxImpl::list_dir(const std::string& path, const ListOptions& options) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  auto r = (*ssh)->list_dir(path, options);
  if (!r) return fail(r.error());
  return std::move(*r);
}

Result<SftpAttributes> SandboxImpl::stat(const std::string& path) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  auto r = (*ssh)->stat(path);
  if (!r) return fail(r.error());
  return *r;
}

Result<std::string> SandboxImpl::realpath(const std::string& path) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  auto r = (*ssh)->realpath(path);
  if (!r) return fail(r.error());
  return std::move(*r);
}

Result<std::unique_ptr<PtyChannel>> SandboxImpl::open_pty(PtyOptions options) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  auto r = (*ssh)->open_pty(std::move(options));
  if (!r) return fail(r.error());
  return r;
}

Result<std::unique_ptr<TcpTunnel>> SandboxImpl::open_tunnel(TunnelOptions options) {
  auto ssh = session();
  if (!ssh) return fail(ssh.error());
  auto r = (*ssh)->open_tunnel(std::move(options));
  if (!r) return fail(r.error());
  return r;
}

// The route transport (routes.h): the node's agent opens (address, port) in the ruleset for the
// controller while the stream lives; the stream is a plain TCP connection to the sandbox.
Result<std::unique_ptr<PortStream>> SandboxImpl::open_route(RouteOptions options) {
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  if (options.port == 0 || options.lease.count() < 1 ||
      options.lease.count() > proto::kMaxRouteSeconds)
    return ssh_fail(SshErrc::kInvalidArgument, "route: a port 1..65535 and a lease of 1..300 s");
  if (auto woke = wake_if_paused(); !woke) return fail(woke.error());
  auto md = metadata();
  if (md.phase == SandboxMetadata::Phase::kPaused) return fail(paused_error());
  if (!md.address) return fail(ErrorCode::kConflict, "sandbox " + id() + " has no address");
  auto lease = node_.routes.acquire(*md.address, options.port, options.lease);
  if (!lease) return fail(lease.error());
  return open_routed_stream(*md.address, options, std::move(*lease), core_);
}

namespace {

// Sandbox::usage() (pvesandbox/usage.h): Proxmox's RRD history of the container from its
// creation on, then the live status when the window reaches the present.

// The finest of Proxmox's timeframes whose 70 rows reach back `span` seconds.
std::string_view timeframe_for(std::int64_t span) {
  static constexpr std::array<std::pair<std::int64_t, std::string_view>, 4> kReach = {
      {{70 * 60, "hour"}, {70 * 1800, "day"}, {70 * 10800, "week"}, {70 * 43200, "month"}}};
  for (const auto& [reach, name] : kReach)
    if (span <= reach) return name;
  return "year";
}

UsageSample from_rrd(const pve::RrdPoint& p) {
  UsageSample s;
  s.time = p.time;
  s.cpu = std::clamp(p.cpu, 0.0, 1.0);
  s.cpus = p.maxcpu;
  s.mem = static_cast<std::int64_t>(p.mem);
  s.maxmem = static_cast<std::int64_t>(p.maxmem);
  s.disk = static_cast<std::int64_t>(p.disk);
  s.maxdisk = static_cast<std::int64_t>(p.maxdisk);
  return s;
}

}  // namespace

Result<std::vector<UsageSample>> SandboxImpl::usage(std::int64_t since, std::int64_t until) {
  if (since > until)
    return fail(ErrorCode::kInvalidArgument, "the window's start is after its end");
  std::int64_t created = 0;
  int vmid = 0;
  {
    std::lock_guard lock(mu_);
    created = md_.created_at;
    vmid = md_.vmid;
  }
  std::int64_t now = now_unix();
  std::int64_t from = std::max(since, created);
  std::vector<UsageSample> out;
  if (from > until) return out;  // the window ended before the sandbox began
  auto rows = core_->pve().rrddata(node_.cfg.name, vmid, timeframe_for(now - from));
  if (!rows) return fail(pve_error(rows.error(), "rrddata"));
  for (const auto& p : *rows)
    if (p.has_data && p.time > created && p.time >= since && p.time <= until)
      out.push_back(from_rrd(p));
  if (until < now || since > now) return out;
  auto live = status();
  if (!live) return fail(live.error());
  if (live->status != "running") return out;  // paused: nothing runs, nothing to sample
  UsageSample s;
  // Never older than the history's newest row: Proxmox's clock is not ours (another host, or
  // here std::time's coarse clock a few milliseconds behind the one pvesim reads).
  s.time = out.empty() ? now_unix() : std::max(now_unix(), out.back().time);
  s.cpu = std::clamp(live->cpu, 0.0, 1.0);
  s.cpus = live->cpus;
  s.mem = live->mem;
  s.maxmem = live->maxmem;
  s.disk = live->disk;
  s.maxdisk = live->maxdisk;
  s.live = true;
  out.push_back(s);
  return out;
}

}  // namespace pvs::lifecycle
