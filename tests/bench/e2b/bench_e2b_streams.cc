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
#include <string>

#include "bench_args.h"
#include "e2b_bench_run.h"
#include "http/auth.h"

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
  const char* abuser_key = "e2b_abababababababababababababababababab";
  const char* victim_key = "e2b_0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f";
  return bench::run_e2b_bench(
      PVS_E2B_STREAMS_SCRIPT,
      {std::to_string(connects), std::to_string(concurrency), std::to_string(rounds)},
      "auth:\n  max_requests_per_token: 16\n  max_streams_per_token: 4\n"
      "  tokens:\n    - {name: abuser, sha256: " +
          service::sha256_hex("tok-abuser") +
          ", e2b_key_sha256: " + service::sha256_hex(abuser_key) +
          "}\n    - {name: victim, sha256: " + service::sha256_hex("tok-victim") +
          ", e2b_key_sha256: " + service::sha256_hex(victim_key) +
          "}\nhttp:\n  threads: 32\nlog_level: error\n",
      {std::string("E2B_API_KEY=") + victim_key, std::string("PVS_ABUSER_KEY=") + abuser_key,
       std::string("PVS_VICTIM_KEY=") + victim_key, "PVS_VICTIM_TOKEN=tok-victim"});
}
