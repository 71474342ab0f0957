// The resolver's one clock: milliseconds of the monotonic clock, for deadlines and windows.
#pragma once

#include <chrono>
#include <cstdint>

namespace pvs::resolver {

inline std::int64_t mono_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace pvs::resolver
