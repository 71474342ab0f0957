// The create/destroy loop the netns-stack benchmarks share: a fresh pvs::test::Stack (real sshd
// per sandbox, real agent and ruleset, zero-duration Proxmox tasks), one Manager, n creates each
// followed by its destroy, timed one by one.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "pvesandbox/manager.h"
#include "support/stack_fixture.h"

namespace pvs::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

inline double p50(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Run {
  std::vector<double> create, destroy;
};

// `adjust` may change the stack's ManagerConfig; false (with a message) if anything failed.
inline bool create_destroy_loop(const test::StackOptions& so, int n, const char* what, Run* out,
                                const std::function<void(ManagerConfig&)>& adjust = {}) {
  test::Stack stack(so);
  auto config = stack.manager_config();
  if (adjust) adjust(config);
  auto m = Manager::open(config);
  if (!m) {
    std::fprintf(stderr, "open: %s\n", m.error().message.c_str());
    return false;
  }
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    auto sb = (*m)->create({});
    if (!sb) {
      std::fprintf(stderr, "create (%s): %s\n", what, sb.error().message.c_str());
      return false;
    }
    out->create.push_back(ms_since(t));
    t = Clock::now();
    if (!(*sb)->destroy()) return false;
    out->destroy.push_back(ms_since(t));
  }
  return true;
}

}  // namespace pvs::bench
