// Pause and resume in the filesystem mode (docs/design/pause.md): pause records phase "paused"
// first, then stops the container (its disk kept); resume starts it, waits until its SSH
// answers on its own pinned host key, then records phase "ready". A crash between the two
// steps of either leaves "paused" recorded with the container maybe running: the next
// reconcile stops it (settle_paused), or a resume first takes it as started. Recovery adopts a
// paused sandbox (reconcile.cc).
#include <algorithm>

#include "core.h"
#include "pvesandbox/common/log.h"
#include "service.h"

namespace pvs::lifecycle {

Status SandboxImpl::pause(PauseMode mode) {
  return core_->pause(*this, mode);
}

Status SandboxImpl::resume(std::chrono::seconds ttl) {
  return core_->resume(*this, ttl);
}

namespace {

// The VMID busy for the reconciler while an operation runs.
class BusyVmid {
 public:
  explicit BusyVmid(std::function<void(bool)> set) : set_(std::move(set)) { set_(true); }
  ~BusyVmid() { set_(false); }
  BusyVmid(const BusyVmid&) = delete;
  BusyVmid& operator=(const BusyVmid&) = delete;

 private:
  std::function<void(bool)> set_;
};

}  // namespace

Status ManagerCore::pause(SandboxImpl& sb, PauseMode mode) {
  if (mode != PauseMode::kFilesystem)
    return fail(ErrorCode::kInvalidArgument,
                "pause mode memory is not supported: Proxmox has no supported call that keeps a "
                "container's processes and memory (docs/design/pause.md); use mode filesystem "
                "(files are kept, processes end)");
  std::lock_guard op(sb.op_mutex());
  if (sb.destroyed()) return fail(ErrorCode::kNotFound, "sandbox " + sb.id() + " is destroyed");
  auto phase = sb.metadata().phase;
  if (phase == SandboxMetadata::Phase::kPaused)
    return fail(ErrorCode::kConflict, "sandbox " + sb.id() + " is paused already");
  if (phase != SandboxMetadata::Phase::kReady)
    return fail(ErrorCode::kConflict, "sandbox " + sb.id() + " is being destroyed");
  if (auto st = owner_admits(sb, true); !st) return st;
  BusyVmid guard([&](bool on) { busy(sb.vmid(), on); });
  return timed(pause_times_, [&] { return pause_steps(sb); });
}

void ManagerCore::set_owner_limits(Manager::OwnerLimits limits) {
  std::lock_guard lock(mu_);
  owner_limits_ = std::move(limits);
}

// The owner's sandboxes counted now (the one asking as it is: running before a pause, paused
// before a resume), then its limits asked outside the lock.
Status ManagerCore::owner_admits(const SandboxImpl& sb, bool pausing) {
  Manager::OwnerLimits limits;
  std::size_t running = 0, paused = 0;
  const std::string owner = sb.metadata().owner;
  {
    std::lock_guard lock(mu_);
    if (!owner_limits_) return {};
    limits = owner_limits_;
    if (auto ids = owned_.find(owner); ids != owned_.end())
      for (const auto& id : ids->second)  // the owner's only, not every sandbox
        if (auto other = registry_.find(id);
            other != registry_.end() && !other->second->destroyed())
          (other->second->paused() ? paused : running) += 1;
  }
  return limits(owner, pausing, running, paused);
}

Status ManagerCore::pause_expired(SandboxImpl& sb) {
  std::lock_guard op(sb.op_mutex());
  auto md = sb.metadata();
  // Looked at again under the lock: extended (extend_ttl), resumed or destroyed since the scan.
  bool ended = md.expires_at != 0 && md.expires_at <= now_unix();
  if (sb.destroyed() || md.phase != SandboxMetadata::Phase::kReady || !ended) return {};
  BusyVmid guard([&](bool on) { busy(sb.vmid(), on); });
  auto r = timed(pause_times_, [&] { return pause_steps(sb, md.on_expiry.ttl); });
  if (r) {
    std::lock_guard lock(mu_);
    ++stats_.expired_paused;
  }
  return r;
}

void ManagerCore::count_auto_resume() {
  std::lock_guard lock(mu_);
  ++stats_.auto_resumes;
}

Status ManagerCore::pause_steps(SandboxImpl& sb, std::int64_t ttl_left) {
  Node& n = sb.node();
  auto was = sb.metadata();
  auto md = was;
  auto now = now_unix();
  md.phase = SandboxMetadata::Phase::kPaused;
  if (ttl_left >= 0)
    md.ttl_left = ttl_left;
  else
    md.ttl_left = md.expires_at == 0 ? 0 : std::max<std::int64_t>(1, md.expires_at - now);
  md.expires_at = now + cfg_.max_paused.count();
  Status r = hook("pause:mark");
  if (r) r = write_description(n, sb.vmid(), md);
  if (!r) return r;
  sb.set_metadata(md);
  sb.close_session();
  r = hook("pause:stop");
  if (r) r = stop_paused(sb);
  if (!r) {
    // Still running: recorded as ready again if the description can be written (else it stays
    // paused, and the next reconcile stops it).
    if (write_description(n, sb.vmid(), was)) sb.set_metadata(was);
    return r;
  }
  sb.set_status("stopped");
  log::info("paused " + sb.id() + " vmid=" + std::to_string(sb.vmid()));
  return {};
}

// Stops the container; one already stopped is fine.
Status ManagerCore::stop_paused(SandboxImpl& sb) {
  auto stop = pve_.stop(sb.node().cfg.name, sb.vmid());
  if (!stop && pve::kind_of(stop.error()) == pve::ErrorKind::kNotRunning) return {};
  return wait(stop, "stop");
}

Status ManagerCore::settle_paused(SandboxImpl& sb) {
  std::lock_guard op(sb.op_mutex());
  if (sb.destroyed() || !sb.paused()) return {};  // resumed or destroyed meanwhile
  BusyVmid guard([&](bool on) { busy(sb.vmid(), on); });
  log::warn("sandbox " + sb.id() + " is paused but its container runs; stopping it");
  sb.close_session();
  auto r = stop_paused(sb);
  if (r) sb.set_status("stopped");
  return r;
}

Status ManagerCore::resume(SandboxImpl& sb, seconds ttl) {
  if (ttl.count() < 0) return fail(ErrorCode::kInvalidArgument, "ttl must not be negative");
  std::lock_guard op(sb.op_mutex());
  if (sb.destroyed()) return fail(ErrorCode::kNotFound, "sandbox " + sb.id() + " is destroyed");
  if (!sb.paused()) return fail(ErrorCode::kConflict, "sandbox " + sb.id() + " is not paused");
  if (auto st = owner_admits(sb, false); !st) return st;
  BusyVmid guard([&](bool on) { busy(sb.vmid(), on); });
  return timed(resume_times_, [&] { return resume_steps(sb, ttl); });
}

Status ManagerCore::resume_steps(SandboxImpl& sb, seconds ttl) {
  Node& n = sb.node();
  auto md = sb.metadata();
  Status r = hook("resume:start");
  if (r) {
    auto start = pve_.start(n.cfg.name, sb.vmid());
    if (start || pve::kind_of(start.error()) != pve::ErrorKind::kAlreadyRunning)
      r = wait(start, "start");
  }
  if (!r) return r;
  sb.set_status("running");
  auto ssh = reconnect(md);
  auto now = now_unix();
  std::int64_t left = ttl.count() > 0 ? ttl.count() : md.ttl_left;
  md.phase = SandboxMetadata::Phase::kReady;
  md.expires_at = left > 0 ? now + std::min<std::int64_t>(left, cfg_.max_ttl.count()) : 0;
  md.ttl_left = 0;
  if (ssh && *ssh) r = start_service(**ssh);  // its template's service, if it has one
  if (ssh && r) r = hook("resume:mark");
  if (ssh && r) r = write_description(n, sb.vmid(), md);
  if (!ssh || !r) {
    if (ssh && *ssh) (*ssh)->close();
    // Paused again: stopped, so that it costs nothing until the next resume.
    if (auto s = stop_paused(sb); s) sb.set_status("stopped");
    return ssh ? r : fail(ssh.error());
  }
  sb.set_metadata(md);
  if (*ssh) sb.adopt_session(std::move(*ssh));
  log::info("resumed " + sb.id() + " vmid=" + std::to_string(sb.vmid()));
  return {};
}

Result<std::shared_ptr<SshSession>> ManagerCore::reconnect(const SandboxMetadata& md) {
  if (!cfg_.wait_for_ssh) return std::shared_ptr<SshSession>();
  auto deadline = Clock::now() + cfg_.ssh_ready_timeout;
  SshConfig sc = cfg_.ssh;
  sc.host = md.address->to_string();
  if (!md.host_key.empty()) {  // its own key, learnt at create
    sc.host_key_policy = HostKeyPolicy::kPinned;
    sc.host_key_fingerprint = md.host_key;
  }
  // Short connects while it boots, then the session it keeps with the configured timeouts.
  SshConfig probe = sc;
  probe.connect_timeout = std::min(probe.connect_timeout, milliseconds(2000));
  auto first = connect_until(probe, deadline);
  if (!first) return first;
  (*first)->close();
  return connect_until(sc, std::max(deadline, Clock::now() + sc.connect_timeout));
}

}  // namespace pvs::lifecycle
