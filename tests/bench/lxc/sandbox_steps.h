// What the lxc benches (pause_bench, fork_bench) share: wall time, a p50/p99 line, a command
// that must exit 0 and a Result or Status that must hold (each throws std::runtime_error).
#pragma once

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_stats.h"
#include "pvesandbox/manager.h"

namespace pvs::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

inline void print(const char* what, const std::vector<double>& v) {
  auto s = stats(v);
  std::printf("  %-44s p50 %7.0f ms  p99 %7.0f ms  (n=%zu)\n", what, s.p50, s.p99, v.size());
}

inline std::string run(Sandbox& sb, const std::string& command) {
  auto r = sb.exec(command);
  if (!r) throw std::runtime_error(command + ": " + r.error().message);
  if (r->exit_code != 0)
    throw std::runtime_error(command + ": exit " + std::to_string(r->exit_code));
  return r->out;
}

template <typename T>
T must(Result<T> r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + ": " + r.error().message);
  return std::move(*r);
}

inline void must(const Status& s, const char* what) {
  if (!s) throw std::runtime_error(std::string(what) + ": " + s.error().message);
}

}  // namespace pvs::bench
