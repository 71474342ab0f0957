// interp_bench: E2B's code interpreter on real containers (issue #48). Starts the stack with
// pvesim's lxc backend and the test mirror's internet (StackOptions::egress) and the
// pve-sandbox-controller binary, builds code-interpreter-v1 from the shipped recipe
// (templates/code-interpreter) as lxc_code_interpreter_test does (tests/lxc/
// code_interpreter_template.h: about a minute), waits for its hot pool, and runs
// interp_bench.mjs with the pinned @e2b/code-interpreter SDK (tests/e2b/client): create -> the
// first runCode('1+1') result (target p50 < 50 ms) with its split and the controller's share,
// and runCode vs commands.run("python3 -c ...") in one sandbox. Not a ctest; run it by hand as
// root after the lxc fixtures (ctest -L lxc -R 'lxc_rootfs|lxc_debs').
//
// Usage: interp_bench [--creates N] [--runs N] [--pool N]
#include <cstdio>
#include <filesystem>
#include <string>

#include "bench_args.h"
#include "e2b_bench_run.h"
#include "http/auth.h"
#include "lxc/code_interpreter_template.h"

int main(int argc, char** argv) {
  using namespace pvs;
  bench::Args args(argc, argv,
                   "interp_bench [--creates N] [--runs N] [--pool N]\n  @e2b/code-interpreter: "
                   "create -> first runCode('1+1') on a hot pool of code-interpreter-v1, and "
                   "runCode vs commands.run (lxc stack; root, node, the lxc fixtures)",
                   0, {"--creates", "--runs", "--pool"});
  int creates = args.count("--creates", 10, 1, 1000);
  int runs = args.count("--runs", 50, 1, 100000);
  int pool = args.count("--pool", 1, 1, 8);
  if (!std::filesystem::is_directory(PVS_LXC_DEBS)) {
    std::fprintf(stderr, "no %s: run ctest -L lxc -R 'lxc_rootfs|lxc_debs' first\n", PVS_LXC_DEBS);
    return 1;
  }
  const char* key = "e2b_1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c";
  const char* token = "tok-interp";
  bench::BenchStack where;
  where.options.backend = "lxc";
  where.options.egress = true;
  where.prepare = [&](test::Stack& stack, std::uint16_t port) {
    test::CodeInterpreterBuild b{PVS_CODE_INTERPRETER_DIR, PVS_APT_REPO_SCRIPT, PVS_LXC_DEBS, pool};
    std::string error = test::build_code_interpreter(stack, port, token, b);
    if (error.empty()) std::printf("code-interpreter-v1 built in %.1f s\n", b.seconds);
    return error;
  };
  // An admin token: templates are built through REST and the script reads GET /v1/pools.
  return bench::run_e2b_bench(
      PVS_INTERP_BENCH_SCRIPT, {std::to_string(creates), std::to_string(runs)},
      "auth:\n  tokens:\n    - {name: interp, sha256: " + service::sha256_hex(token) +
          ", e2b_key_sha256: " + service::sha256_hex(key) + ", admin: true}\n" +
          "http:\n  threads: 64\nlog_level: error\n",
      {std::string("E2B_API_KEY=") + key, std::string("PVS_TOKEN=") + token}, {}, where);
}
