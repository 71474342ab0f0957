// A sample's mean, median and 99th percentile, as the service benches print them.
//
//   std::vector<double> ms;  ...  auto s = pvs::bench::stats(ms);   // s.p50, s.p99, s.mean
#pragma once

#include <algorithm>
#include <vector>

namespace pvs::bench {

struct Stats {
  double mean, p50, p99;
};

inline Stats stats(std::vector<double> v) {
  if (v.empty()) return {0, 0, 0};
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  return {sum / static_cast<double>(v.size()), v[v.size() / 2], v[v.size() * 99 / 100]};
}

}  // namespace pvs::bench
