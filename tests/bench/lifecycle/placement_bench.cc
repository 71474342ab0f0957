// placement_bench: one placement decision over 16 nodes with 1,000 sandboxes between them
// (every filter passes, so each node is scored), p50/p99 over many decisions, against the peer:
// a bare scan for the node with the most free memory over the same views.
//
//   placement_bench [decisions=100000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "bench_args.h"
#include "placement.h"

namespace {

using Clock = std::chrono::steady_clock;

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "placement_bench [decisions=100000]\n"
                        "  one placement over 16 nodes / 1,000 sandboxes, vs a bare scan",
                        1);
  int n = args.count(1, 100000);
  std::mt19937 rng(42);
  std::vector<pvs::lifecycle::NodeView> nodes(16);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    auto& v = nodes[i];
    v.name = "pve" + std::to_string(i + 1);
    v.online = v.agent_ok = true;
    v.labels = {{"zone", i % 2 ? "a" : "b"}, {"disk", "nvme"}};
    v.mem_total = 256ull << 30;
    v.mem_used = (32ull + rng() % 128) << 30;
    v.sandboxes = 1000 / 16 + static_cast<int>(rng() % 8);
    v.max_sandboxes = 200;
  }
  pvs::lifecycle::PlacementRequest req;
  req.memory = 512ull << 20;
  req.node_selector = {{"disk", "nvme"}};
  std::vector<double> ours, peer;
  ours.reserve(static_cast<std::size_t>(n));
  peer.reserve(static_cast<std::size_t>(n));
  std::size_t sink = 0;
  for (int i = 0; i < n; ++i) {
    nodes[static_cast<std::size_t>(i) % nodes.size()].mem_reserved =
        (static_cast<std::uint64_t>(i) % 64) << 20;
    auto t = Clock::now();
    auto chosen = pvs::lifecycle::place(nodes, req);
    ours.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
    sink += chosen ? chosen->size() : 0;
    t = Clock::now();
    auto it = std::max_element(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
      return a.mem_total - a.mem_used - a.mem_reserved < b.mem_total - b.mem_used - b.mem_reserved;
    });
    peer.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
    sink += it->name.size();
  }
  std::printf("%d decisions, 16 nodes, ~1,000 sandboxes (us)   p50     p99\n", n);
  std::printf("  place() (filters + score + reasons)    %7.2f %7.2f\n", pct(ours, .5),
              pct(ours, .99));
  std::printf("  peer: bare max free memory scan        %7.2f %7.2f\n", pct(peer, .5),
              pct(peer, .99));
  std::printf("target p99 < 1000 us: %s (%.0fx under it); place()/peer p50 %.1fx  [%zu]\n",
              pct(ours, .99) < 1000 ? "met" : "MISSED", 1000 / pct(ours, .99),
              pct(ours, .5) / std::max(pct(peer, .5), 0.001), sink % 10);
  return 0;
}
