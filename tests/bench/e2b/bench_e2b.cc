// bench_e2b: the E2B-compatible API's cost (docs/e2b.md). Starts the netns stack (pvesim, the
// real agent and nftables) and the pve-sandbox-controller binary with a hot pool, installs the
// pinned `e2b` SDK (tests/e2b/client/package-lock.json) into the build tree, and runs
// e2b_bench.mjs, which prints the figures: commands.run('echo') through the SDK vs REST exec
// (p50 ratio, target <= 1.2x, issue #50), and create -> first command through the SDK on a hot
// pool (target p50 <= 10 ms) with its split. Not a ctest; run it by hand as root.
//
// --backend lxc: on real containers (pvesim's lxc backend, the rootfs of scripts/lxc-rootfs;
// root's shell is bash there, the netns stand-in's user has /bin/sh).
//
// --refill-delay-ms N: hot_pool.refill_delay_ms (0: a claim starts its refill at once).
//
// Usage: bench_e2b [--runs N] [--creates N] [--backend netns|lxc] [--refill-delay-ms N]
#include <string>

#include "bench_args.h"
#include "e2b_bench_run.h"
#include "http/auth.h"

int main(int argc, char** argv) {
  using namespace pvs;
  bench::Args args(
      argc, argv,
      "bench_e2b [--runs N] [--creates N] [--backend netns|lxc] [--refill-delay-ms N]\n"
      "  commands.run('echo') "
      "through the e2b SDK vs REST exec, and create -> first command on a hot pool "
      "(netns or lxc stack; root, node)",
      0, {"--runs", "--creates", "--backend", "--refill-delay-ms"});
  int runs = args.count("--runs", 200, 1, 100000);
  int creates = args.count("--creates", 20, 1, 1000);
  int refill_delay = args.count("--refill-delay-ms", 0, 0, 60000);
  bench::BenchStack where;
  where.options.backend = args.choice("--backend", "netns", {"netns", "lxc"});
  const char* key = "e2b_00112233445566778899aabbccddeeff";
  return bench::run_e2b_bench(
      PVS_E2B_BENCH_SCRIPT, {std::to_string(runs), std::to_string(creates)},
      "auth:\n  tokens:\n    - {name: bench, sha256: " + service::sha256_hex("tok-bench") +
          ", e2b_key_sha256: " + service::sha256_hex(key) + ", max_sandboxes: 16}\n" +
          "http:\n  threads: 64\nlog_level: error\n" + "hot_pool:\n  refill_delay_ms: " +
          std::to_string(refill_delay) + "\n  profiles:\n    - {name: small, size: 2}\n",
      {std::string("E2B_API_KEY=") + key, "PVS_TOKEN=tok-bench", "PVS_PROFILE=small"}, {}, where);
}
