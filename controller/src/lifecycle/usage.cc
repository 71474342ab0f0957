// Sandbox::usage(): Proxmox's RRD history of the sandbox's container, from its creation on, and
// the live status when the window reaches the present (pvesandbox/usage.h).
#include <algorithm>
#include <array>
#include <utility>

#include "core.h"

namespace pvs::lifecycle {
namespace {

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
