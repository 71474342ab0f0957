// tti_bench: time to interactive by ComputeSDK's published method (docs/operations.md, "TTI
// (ComputeSDK's method)"). Starts the netns stack (pvesim, the real agent and nftables) and the
// pve-sandbox-controller binary with a hot pool of the default template, installs the pinned
// `computesdk` and `@computesdk/e2b` (tests/bench/e2b/tti/package-lock.json) into the build
// tree, and runs tti/tti_bench.mjs: create -> the method's identity probe -> `node -v`,
// sequential, staggered (200 ms apart) and in bursts; median, p95, p99, success rate and the
// method's score per mode, and the floor (the same commands in a running sandbox). Not a ctest;
// run it by hand as root.
//
// The netns stand-in's sandboxes run on the host's file system, so `node -v` finds the host's
// node, and they share its /var/tmp, where the probe's marker of an earlier sandbox is then
// counted instead of failing the iteration (PVS_TTI_REUSE_CHECK=0).
//
// Usage: tti_bench [--sequential N] [--staggered N] [--stagger-ms N] [--burst N]
//                  [--burst-rounds N] [--floor N] [--pool N] [--threads N] [--nodes N]
//
// --nodes N (> 1): the stack as a cluster of N simulated nodes (stack_fixture.h, "Cluster":
// each node its own namespace, bridge, ruleset and agent; the controller and the client in a
// namespace of their own, reaching the sandboxes through each node's forward chain).
#include <string>
#include <utility>
#include <vector>

#include "bench_args.h"
#include "e2b_bench_run.h"
#include "http/auth.h"

int main(int argc, char** argv) {
  using namespace pvs;
  bench::Args args(argc, argv,
                   "tti_bench [--sequential N] [--staggered N] [--stagger-ms N] [--burst N] "
                   "[--burst-rounds N] [--floor N] [--pool N] [--threads N] [--nodes N]\n  time to "
                   "interactive by "
                   "ComputeSDK's method through computesdk + @computesdk/e2b, with the floor "
                   "(netns stack or a cluster of N nodes, hot pool; root, node)",
                   0,
                   {"--sequential", "--staggered", "--stagger-ms", "--burst", "--burst-rounds",
                    "--floor", "--pool", "--threads", "--nodes"});
  std::vector<std::string> script_args;
  const std::pair<const char*, int> counts[] = {{"--sequential", 30},  {"--staggered", 30},
                                                {"--stagger-ms", 200}, {"--burst", 8},
                                                {"--burst-rounds", 3}, {"--floor", 30}};
  for (auto [option, fallback] : counts) {
    script_args.insert(script_args.end(),
                       {option, std::to_string(args.count(option, fallback, 0, 1000))});
  }
  int pool = args.count("--pool", 8, 1, 256);
  int threads = args.count("--threads", 64, 1, 1024);  // http.threads
  bench::BenchStack where;
  where.options.nodes = args.count("--nodes", 1, 1, 8);
  const char* key = "e2b_7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e";
  // An admin token: the script reads the pool's claims and misses (GET /v1/pools).
  return bench::run_e2b_bench(
      PVS_TTI_BENCH_SCRIPT, script_args,
      "auth:\n  tokens:\n    - {name: tti, sha256: " + service::sha256_hex("tok-tti") +
          ", e2b_key_sha256: " + service::sha256_hex(key) + ", max_sandboxes: 512, admin: true}\n" +
          "http:\n  threads: " + std::to_string(threads) + "\nlog_level: error\n" +
          "hot_pool:\n  profiles:\n    - {name: small, size: " + std::to_string(pool) + "}\n",
      {std::string("E2B_API_KEY=") + key, "PVS_TOKEN=tok-tti", "PVS_TTI_REUSE_CHECK=0",
       "PVS_TTI_NODES=" + std::to_string(where.options.nodes)},
      {PVS_TTI_CLIENT_DIR, PVS_TTI_NODE_DIR, "@computesdk/e2b"}, where);
}
