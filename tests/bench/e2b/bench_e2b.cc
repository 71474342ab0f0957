// bench_e2b: the E2B-compatible API's cost (docs/e2b.md). Starts the netns stack (pvesim, the
// real agent and nftables) and the pve-sandbox-controller binary with a hot pool, installs the
// pinned `e2b` SDK (tests/e2b/client/package-lock.json) into the build tree, and runs
// e2b_bench.mjs, which prints the figures: commands.run('echo') through the SDK vs REST exec
// (p50 ratio, target <= 1.5x), and create -> first command through the SDK on a hot pool
// (target p50 <= 30 ms). Not a ctest; run it by hand as root.
//
// Usage: bench_e2b [--runs N] [--creates N]
#include <cstdio>
#include <fstream>
#include <string>

#include "bench_args.h"
#include "http/auth.h"
#include "service/support/node_e2e_support.h"
#include "support/stack_fixture.h"

int main(int argc, char** argv) {
  using namespace pvs;
  bench::Args args(argc, argv,
                   "bench_e2b [--runs N] [--creates N]\n  commands.run('echo') through the e2b "
                   "SDK vs REST exec, and create -> first command on a hot pool (netns stack; "
                   "root, node)",
                   0, {"--runs", "--creates"});
  int runs = args.count("--runs", 200, 1, 100000);
  int creates = args.count("--creates", 20, 1, 1000);
  std::string error =
      test::npm_install_once(PVS_E2B_CLIENT_DIR, PVS_E2B_NODE_DIR, "package.json", "e2b");
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  std::filesystem::copy_file(PVS_E2B_BENCH_SCRIPT, std::string(PVS_E2B_NODE_DIR) + "/e2b_bench.mjs",
                             std::filesystem::copy_options::overwrite_existing);
  test::Stack stack;
  std::uint16_t port = test::free_port();
  const char* key = "e2b_00112233445566778899aabbccddeeff";
  std::string config = stack.dir() + "/controller.yaml";
  std::ofstream(config) << test::stack_controller_yaml(stack, port, stack.dir())
                        << "auth:\n  tokens:\n    - {name: bench, sha256: "
                        << service::sha256_hex("tok-bench")
                        << ", e2b_key_sha256: " << service::sha256_hex(key)
                        << ", max_sandboxes: 16}\n"
                        << "http:\n  threads: 64\nlog_level: error\n"
                        << "hot_pool:\n  profiles:\n    - {name: small, size: 2}\n";
  std::string why;
  pid_t pid = test::start_controller(PVS_CONTROLLER_BIN, config, stack.dir(), port, &why);
  if (pid <= 0) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 1;
  }
  std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto r =
      test::run_captured({"node", std::string(PVS_E2B_NODE_DIR) + "/e2b_bench.mjs",
                          std::to_string(runs), std::to_string(creates)},
                         stack.dir(), "",
                         {"E2B_API_URL=" + base + "/e2b", "E2B_SANDBOX_URL=" + base + "/e2b/envd",
                          std::string("E2B_API_KEY=") + key, "PVS_URL=" + base,
                          "PVS_TOKEN=tok-bench", "PVS_PROFILE=small"});
  std::fputs(r.out.c_str(), stdout);
  std::fputs(r.err.c_str(), stderr);
  test::stop_controller(pid);
  return r.exit_code;
}
