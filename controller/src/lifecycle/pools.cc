// The warm pool: per node, stopped clones of its template (phase "pooled") that a create on
// that node claims instead of cloning; a background thread refills the node short of the most.
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
      // The node short of the most that may take clones (online, agent up, not drained).
      auto pick = [&] {
        int deficit = 0;
        for (auto& n : nodes_) {
          int d = cfg_.warm_pool - pooled_on(*n);
          if (d > deficit && n->online && n->agent_ok && !n->drained) {
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
