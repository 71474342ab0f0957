// Container steps shared by create, destroy and reconcile: waiting for a Proxmox task, writing
// the description, destroying a container that is ours.
#include <thread>

#include "core.h"

namespace pvs::lifecycle {

Status ManagerCore::wait(const pve::Result<std::string>& upid, std::string_view what) {
  if (!upid) return fail(pve_error(upid.error(), what));
  // A failed status poll says nothing about the task, which runs on: poll again until the
  // deadline (giving up early would roll back while the task still works, e.g. a start).
  auto deadline = Clock::now() + cfg_.task_timeout;
  auto delay = milliseconds(100);
  for (;;) {
    pve::WaitOptions w;
    w.timeout = std::max(milliseconds(1),
                         std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    w.poll_initial = std::min(milliseconds(20), cfg_.task_poll_max);
    w.poll_max = cfg_.task_poll_max;
    auto done = pve_.wait_task(*upid, w);
    if (done) return {};
    auto kind = pve::kind_of(done.error());
    bool poll_failed = kind == pve::ErrorKind::kServer || kind == pve::ErrorKind::kTransport ||
                       kind == pve::ErrorKind::kProtocol || kind == pve::ErrorKind::kTimeout;
    if (!poll_failed || Clock::now() + delay >= deadline)
      return fail(pve_error(done.error(), what));
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, milliseconds(1000));
  }
}

Status ManagerCore::write_description(const Node& n, int vmid, const SandboxMetadata& md) {
  auto r = pve_.update_config(n.cfg.name, vmid, {{"description", encode_description(md)}});
  if (!r) return fail(pve_error(r.error(), "write metadata"));
  return {};
}

Status ManagerCore::destroy_container(const Node& n, int vmid, const std::string& id) {
  // Stop and delete are safe to repeat (not running / not found count as done), so a failed
  // attempt is retried a few times before the reconciler has to take over.
  auto delay = milliseconds(50);
  Status r;
  for (int attempt = 0; attempt < 8; ++attempt) {
    r = destroy_container_once(n, vmid, id);
    if (r || r.error().code == ErrorCode::kPermissionDenied) return r;
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, milliseconds(1000));
  }
  return r;
}

Status ManagerCore::destroy_container_once(const Node& n, int vmid, const std::string& id) {
  auto conf = pve_.config(n.cfg.name, vmid);
  if (!conf) {
    if (conf.error().is(pve::ErrorKind::kNotFound)) return {};
    return fail(pve_error(conf.error(), "read config of " + std::to_string(vmid)));
  }
  auto desc = conf->find("description");
  auto md = decode_description(desc == conf->end() ? "" : desc->second);
  bool ours = md ? (md->id == id || id.empty())
                 : (id.empty() && md.error().code == ErrorCode::kInvalidArgument);
  if (!ours)
    return fail(ErrorCode::kPermissionDenied,
                "container " + std::to_string(vmid) + " is not this sandbox's; left alone");
  auto stop = pve_.stop(n.cfg.name, vmid);
  if (!stop) {
    auto k = pve::kind_of(stop.error());
    if (k == pve::ErrorKind::kNotFound) return {};
    if (k != pve::ErrorKind::kNotRunning) return fail(pve_error(stop.error(), "stop"));
  } else if (auto w = wait(stop, "stop"); !w) {
    if (w.error().code == ErrorCode::kNotFound) return {};
    // A stop task that failed because the CT stopped meanwhile is fine; destroy decides.
  }
  pve::DestroyOptions d;
  d.purge = true;
  d.destroy_unreferenced_disks = true;
  auto del = pve_.destroy(n.cfg.name, vmid, d);
  if (!del && del.error().is(pve::ErrorKind::kNotFound)) return {};
  if (auto w = wait(del, "destroy"); !w) {
    // The task may have failed because the container is gone already.
    auto again = pve_.status(n.cfg.name, vmid);
    if (!again && again.error().is(pve::ErrorKind::kNotFound)) return {};
    return w;
  }
  return {};
}

}  // namespace pvs::lifecycle
