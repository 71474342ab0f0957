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
// --nodes N (> 1): the stack as a cluster of N simulated nodes (stack_fixture.h, "Cluster":
// each node its own namespace, bridge, ruleset and agent; the controller and the client in a
// namespace of their own, reaching the sandboxes through each node's forward chain).
//
// --backend lxc: real containers (pvesim's lxc backend, after the lxc fixtures: ctest -L lxc -R
// lxc_rootfs) from a template with node, `node-v1` (tti/node-recipe.yaml: Debian's nodejs,
// fetched once into the build tree with tests/lxc/apt-repo.sh and built on the stack's package
// mirror, about a minute), hot-pooled with --pool members; the reuse check is on.
//
// --member-cpuunits N: hot_pool.member_cpuunits (the CPU weight pool members are made at; 10,
// the packaged controller.yaml's, by default; 0: the default weight, as without the setting). On
// lxc it is what decides whether a refill competes with the sandboxes just handed out.
// --refill-delay-ms N: hot_pool.refill_delay_ms (100, the packaged value, by default; 0: a claim
// starts its refill at once).
//
// Usage: tti_bench [--sequential N] [--staggered N] [--stagger-ms N] [--burst N]
//                  [--burst-rounds N] [--floor N] [--pool N] [--threads N] [--nodes N]
//                  [--backend netns|lxc] [--member-cpuunits N] [--refill-delay-ms N]
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench_args.h"
#include "e2b_bench_run.h"
#include "http/auth.h"
#include "lxc/code_interpreter_template.h"

namespace {

// The node template on the lxc stack (its packages fetched), its hot pool full: "" or what
// failed.
std::string build_node_template(pvs::test::Stack& stack, std::uint16_t port,
                                const std::string& token, int pool) {
  using namespace pvs::test;
  std::string recipe = slurp(PVS_TTI_NODE_RECIPE);
  const std::string size_line = "pool_size: 8\n";
  auto at = recipe.find(size_line);
  if (at == std::string::npos)
    return std::string(PVS_TTI_NODE_RECIPE) + ": no \"" + size_line + "\"";
  recipe.replace(at, size_line.size(), "pool_size: " + std::to_string(pool) + "\n");
  std::string reply;
  double seconds = 0;
  std::string error = build_on_mirror(stack, port, token, PVS_APT_REPO_SCRIPT, PVS_TTI_DEBS, recipe,
                                      "node-v1", pool, &reply, &seconds);
  if (error.empty()) std::printf("node-v1 built in %.1f s\n", seconds);
  return error;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pvs;
  bench::Args args(
      argc, argv,
      "tti_bench [--sequential N] [--staggered N] [--stagger-ms N] [--burst N] "
      "[--burst-rounds N] [--floor N] [--pool N] [--threads N] [--nodes N] "
      "[--backend netns|lxc] [--member-cpuunits N] [--refill-delay-ms N]\n  time to interactive by "
      "ComputeSDK's method "
      "through computesdk + "
      "@computesdk/e2b, with the floor (netns stack, a cluster of N nodes, or real containers; "
      "hot pool; root, node)",
      0,
      {"--sequential", "--staggered", "--stagger-ms", "--burst", "--burst-rounds", "--floor",
       "--pool", "--threads", "--nodes", "--backend", "--member-cpuunits", "--refill-delay-ms"});
  std::vector<std::string> script_args;
  const std::pair<const char*, int> counts[] = {{"--sequential", 30},  {"--staggered", 30},
                                                {"--stagger-ms", 200}, {"--burst", 8},
                                                {"--burst-rounds", 3}, {"--floor", 30}};
  for (auto [option, fallback] : counts) {
    const int max = std::string_view(option) == "--stagger-ms" ? 60000 : 1000;
    script_args.insert(script_args.end(),
                       {option, std::to_string(args.count(option, fallback, 0, max))});
  }
  int pool = args.count("--pool", 8, 1, 256);
  int threads = args.count("--threads", 64, 1, 1024);                 // http.threads
  int cpuunits = args.count("--member-cpuunits", 10, 0, 10000);       // the packaged value
  int refill_delay = args.count("--refill-delay-ms", 100, 0, 60000);  // the packaged value
  bench::BenchStack where;
  where.options.nodes = args.count("--nodes", 1, 1, 8);
  where.options.backend = args.choice("--backend", "netns", {"netns", "lxc"});
  const bool lxc = where.options.backend == "lxc";
  if (lxc && where.options.nodes > 1) args.fail("--backend lxc runs on one node");
  const char* key = "e2b_7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e";
  const std::string token = "tok-tti";
  std::vector<std::string> env = {std::string("E2B_API_KEY=") + key, "PVS_TOKEN=" + token,
                                  "PVS_TTI_NODES=" + std::to_string(where.options.nodes)};
  // An admin token: the script reads the pool's claims and misses (GET /v1/pools), and the lxc
  // stack's template is built through REST.
  std::string yaml = "auth:\n  tokens:\n    - {name: tti, sha256: " + service::sha256_hex(token) +
                     ", e2b_key_sha256: " + service::sha256_hex(key) +
                     ", max_sandboxes: 512, admin: true}\n" +
                     "http:\n  threads: " + std::to_string(threads) + "\nlog_level: error\n" +
                     "hot_pool:\n  member_cpuunits: " + std::to_string(cpuunits) +
                     "\n  refill_delay_ms: " + std::to_string(refill_delay) + "\n";
  if (lxc) {
    // nodejs and what it needs, on the host's network before the stack (whose internet takes
    // over the test addresses) starts.
    auto fetched = test::run_captured(
        {PVS_APT_REPO_SCRIPT, "--fetch", PVS_TTI_DEBS, PVS_LXC_ROOTFS, PVS_TTI_NODE_RECIPE}, ".",
        "", {});
    if (fetched.exit_code != 0) {
      std::fprintf(stderr, "apt-repo.sh --fetch: %s%s\n", fetched.out.c_str(), fetched.err.c_str());
      return 1;
    }
    where.options.egress = true;  // the package mirror
    where.prepare = [&](test::Stack& stack, std::uint16_t port) {
      return build_node_template(stack, port, token, pool);
    };
    env.push_back("PVS_TTI_TEMPLATE=node-v1");
  } else {
    yaml += "  profiles:\n    - {name: small, size: " + std::to_string(pool) + "}\n";
    env.push_back("PVS_TTI_REUSE_CHECK=0");
  }
  return bench::run_e2b_bench(PVS_TTI_BENCH_SCRIPT, script_args, yaml, env,
                              {PVS_TTI_CLIENT_DIR, PVS_TTI_NODE_DIR, "@computesdk/e2b"}, where);
}
