// What a sandbox used over time: Sandbox::usage() (manager.h), GET /v1/sandboxes/{id}/usage and
// E2B's getMetrics.
//
// The history is Proxmox's own: pvestatd records each container's CPU, memory and disk into its
// RRD, and the controller reads it back (GET .../lxc/{vmid}/rrddata), so keeping a history costs
// nothing until it is asked for. Each sample is an average over a step that ends at `time`: a
// minute over the last hour, 30 minutes over the last day (Proxmox's "day" timeframe), then 3
// hours, 12 hours and a week. Only steps since the sandbox was created count (a VMID's RRD
// outlives its containers, and a hot pool member idled before its claim), and the newest
// sample is the live status/current when the window reaches the present.
#pragma once

#include <cstdint>

namespace pvs {

struct UsageSample {
  std::int64_t time = 0;  // unix seconds: the end of the step, or the moment of a live sample
  double cpu = 0;         // share of `cpus` in use, 0..1, averaged over the step
  double cpus = 0;        // cores it may use
  std::int64_t mem = 0, maxmem = 0;    // bytes
  std::int64_t disk = 0, maxdisk = 0;  // bytes of its root file system
  bool live = false;                   // the current status rather than an RRD step
};

}  // namespace pvs
