// bench_e2b_streams: #46 finding 2 under load. Starts the netns stack (pvesim, the real agent
// and nftables) and the pve-sandbox-controller binary with two tenants under the packaged
// per-token limits (16 requests, 4 streams; 32 HTTP workers), installs the pinned `e2b` SDK
// (tests/e2b/client/package-lock.json) into the build tree, and runs e2b_streams_bench.mjs: one
// tenant opens and drops hundreds of process.Process/Connect streams on a process that keeps
// writing, while the other's REST exec, E2B commands.run and MCP exec keep answering. It prints
// the victim's latencies before, during and after, the abuser's outcome, and the controller's
// RSS before and after. Not a ctest; run it by hand as root.
//
// Usage: bench_e2b_streams [--connects N] [--concurrency N] [--rounds N]
#include <unistd.h>

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
                   "bench_e2b_streams [--connects N] [--concurrency N] [--rounds N]\n  one tenant "
                   "opens and drops Connects while another's REST, E2B and MCP calls are timed; "
                   "the controller's RSS before and after (netns stack; root, node)",
                   0, {"--connects", "--concurrency", "--rounds"});
  int connects = args.count("--connects", 500, 1, 100000);
  int concurrency = args.count("--concurrency", 50, 1, 1000);
  int rounds = args.count("--rounds", 30, 1, 100000);
  std::string error =
      test::npm_install_once(PVS_E2B_CLIENT_DIR, PVS_E2B_NODE_DIR, "package.json", "e2b");
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  std::filesystem::copy_file(PVS_E2B_STREAMS_SCRIPT,
                             std::string(PVS_E2B_NODE_DIR) + "/e2b_streams_bench.mjs",
                             std::filesystem::copy_options::overwrite_existing);
  test::Stack stack;
  std::uint16_t port = test::free_port();
  const char* abuser_key = "e2b_abababababababababababababababababab";
  const char* victim_key = "e2b_0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f";
  std::string config = stack.dir() + "/controller.yaml";
  std::ofstream(config) << test::stack_controller_yaml(stack, port, stack.dir())
                        << "auth:\n  max_requests_per_token: 16\n  max_streams_per_token: 4\n"
                        << "  tokens:\n    - {name: abuser, sha256: "
                        << service::sha256_hex("tok-abuser")
                        << ", e2b_key_sha256: " << service::sha256_hex(abuser_key) << "}\n"
                        << "    - {name: victim, sha256: " << service::sha256_hex("tok-victim")
                        << ", e2b_key_sha256: " << service::sha256_hex(victim_key) << "}\n"
                        << "http:\n  threads: 32\nlog_level: error\n";
  std::string why;
  pid_t pid = test::start_controller(PVS_CONTROLLER_BIN, config, stack.dir(), port, &why);
  if (pid <= 0) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return 1;
  }
  std::string base = "http://127.0.0.1:" + std::to_string(port);
  auto r = test::run_captured(
      {"node", std::string(PVS_E2B_NODE_DIR) + "/e2b_streams_bench.mjs", std::to_string(connects),
       std::to_string(concurrency), std::to_string(rounds)},
      stack.dir(), "",
      {"E2B_API_URL=" + base + "/e2b", "E2B_SANDBOX_URL=" + base + "/e2b/envd",
       std::string("E2B_API_KEY=") + victim_key, std::string("PVS_ABUSER_KEY=") + abuser_key,
       std::string("PVS_VICTIM_KEY=") + victim_key, "PVS_VICTIM_TOKEN=tok-victim",
       "PVS_URL=" + base, "PVS_CONTROLLER_PID=" + std::to_string(pid)});
  std::fputs(r.out.c_str(), stdout);
  std::fputs(r.err.c_str(), stderr);
  test::stop_controller(pid);
  return r.exit_code;
}
