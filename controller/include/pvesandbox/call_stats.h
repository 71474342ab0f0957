// Latencies and outcomes of the calls the lifecycle makes to one peer, as /metrics shows them.
#pragma once

#include <array>
#include <cstdint>

namespace pvs {

// Calls to one peer (the Proxmox API, Proxmox tasks or the agent), for /metrics.
struct CallStats {
  // Upper bounds of the latency histogram's buckets in milliseconds; one more bucket is +Inf.
  static constexpr std::array<std::uint32_t, 11> kBucketBoundsMs{1,   5,   10,   25,   50,  100,
                                                                 250, 500, 1000, 2500, 5000};
  std::uint64_t count = 0;   // calls completed
  std::uint64_t errors = 0;  // of which failed (any error, including "not found")
  double sum_seconds = 0;    // total latency of all calls
  // Cumulative, as Prometheus wants them: buckets[i] = calls that took <= kBucketBoundsMs[i]
  // milliseconds; buckets[11] (le="+Inf") == count.
  std::array<std::uint64_t, kBucketBoundsMs.size() + 1> buckets{};
};

}  // namespace pvs
