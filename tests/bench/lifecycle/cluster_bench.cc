// Cluster scaling: 64 concurrent cold creates (clone, configure, bind, start; realistic task
// durations) on 1, 2 and 4 simulated nodes, each node with its own template, namespace,
// ruleset and real agent (pvs::test::Stack cluster mode, model backend: no sshd). Clones of
// one template are serial on Proxmox, so one node caps the create rate; N nodes give N clone
// queues. Prints creates/s per cluster size and the scaling factor against one node (target:
// >= 0.8 x N).
//
//   cluster_bench [creates=64]
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>
#include <vector>

#include "bench_args.h"
#include "pvesandbox/manager.h"
#include "sim.h"
#include "support/stack_fixture.h"
#include "timing.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  double seconds = 0;
  int failed = 0;
  std::map<std::string, int> per_node;
};

Run burst(int nodes, int creates) {
  pvs::test::StackOptions so;
  so.backend = "model";
  so.nodes = nodes;
  pvs::test::Stack stack(so);
  for (auto& [type, ms] : pvesim::timing_profile("realistic")) stack.sim().set_task_ms(type, ms);
  auto c = stack.manager_config();
  c.max_sandboxes = creates + 1;
  auto m = pvs::Manager::open(c);
  if (!m) {
    std::fprintf(stderr, "open: %s\n", m.error().message.c_str());
    std::exit(1);
  }
  std::vector<std::shared_ptr<pvs::Sandbox>> boxes(static_cast<std::size_t>(creates));
  std::vector<std::thread> threads;
  auto start = Clock::now();
  for (int i = 0; i < creates; ++i)
    threads.emplace_back([&, i] {
      auto sb = (*m)->create({});
      if (sb) boxes[static_cast<std::size_t>(i)] = *sb;
    });
  for (auto& t : threads) t.join();
  Run r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& b : boxes) {
    if (!b) {
      ++r.failed;
      continue;
    }
    ++r.per_node[b->info().node];
  }
  // Not timed: destroy everything so the next cluster starts clean.
  for (auto& p : pvesim::timing_profile("realistic")) stack.sim().set_task_ms(p.first, 0);
  threads.clear();
  for (auto& b : boxes)
    threads.emplace_back([&b] {
      if (b) (void)b->destroy();
    });
  for (auto& t : threads) t.join();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "cluster_bench [creates=64]\n"
                        "  concurrent cold creates on 1, 2 and 4 simulated nodes (realistic task\n"
                        "  durations, a template per node); needs root",
                        1);
  int creates = args.count(1, 64);
  std::printf("%d concurrent cold creates, realistic task durations, model backend\n", creates);
  std::printf("%-6s %10s %10s %8s %10s  %s\n", "nodes", "seconds", "creates/s", "failed",
              "vs 1 node", "per node");
  double base = 0;
  for (int nodes : {1, 2, 4}) {
    Run r = burst(nodes, creates);
    double rate = (creates - r.failed) / r.seconds;
    if (nodes == 1) base = rate;
    std::string spread;
    for (auto& [node, n] : r.per_node) spread += node + "=" + std::to_string(n) + " ";
    std::printf("%-6d %10.2f %10.2f %8d %9.2fx  %s\n", nodes, r.seconds, rate, r.failed,
                rate / base, spread.c_str());
    if (nodes > 1) std::printf("       scaling %.2f x N (target >= 0.8)\n", rate / base / nodes);
  }
  return 0;
}
