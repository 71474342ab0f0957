// The warm pool: stopped clones of the template (phase "pooled") that a create claims instead
// of cloning; a background thread refills it.
#include "core.h"
#include "pvesandbox/common/log.h"

namespace pvs::lifecycle {

std::optional<ManagerCore::Pooled> ManagerCore::take_pooled() {
  std::lock_guard lock(mu_);
  if (pool_.empty()) return std::nullopt;
  auto p = pool_.front();
  pool_.pop_front();
  busy_vmids_.insert(p.vmid);
  return p;
}

Status ManagerCore::fill_pool_once() {
  Step s;
  SandboxMetadata md;
  md.id = "pool-" + random_hex(12);
  md.phase = SandboxMetadata::Phase::kPooled;
  md.created_at = now_unix();
  md.labels[std::string(kPoolTemplateLabel)] = std::to_string(cfg_.template_vmid);
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
  pool_.push_back({s.vmid, md.id});
  busy_vmids_.erase(s.vmid);
  return {};
}

void ManagerCore::pool_loop() {
  auto backoff = milliseconds(500);
  for (;;) {
    {
      std::unique_lock lock(mu_);
      // Also wakes periodically: a reconcile may have dropped pooled containers.
      pool_cv_.wait_for(lock, seconds(5), [&] {
        return pool_stop_ || static_cast<int>(pool_.size()) < cfg_.warm_pool;
      });
      if (pool_stop_) return;
      if (static_cast<int>(pool_.size()) >= cfg_.warm_pool) continue;
    }
    if (auto r = fill_pool_once(); !r) {
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
