// What a sandbox's own SSH host key costs a create: the same create/destroy loop on the netns
// stack with ssh.per_sandbox_host_keys on (ssh-keygen in the sandbox, then a second connection
// pinned to the new key) and off (the template's key kept). The peer: `ssh-keygen -t ed25519`
// alone, run here n times.
//
//   lifecycle_host_key_bench [iterations=30]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_args.h"
#include "stack_loop.h"

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "lifecycle_host_key_bench [iterations=30]\n"
                        "  create/destroy with per-sandbox host keys on vs off, and ssh-keygen",
                        1);
  int n = args.count(1, 30);
  using pvs::bench::p50;
  pvs::bench::Run own, shared;
  auto keys = [](bool on) { return [on](pvs::ManagerConfig& c) { c.per_sandbox_host_keys = on; }; };
  if (!pvs::bench::create_destroy_loop({}, n, "template key", &shared, keys(false)) ||
      !pvs::bench::create_destroy_loop({}, n, "own key", &own, keys(true)))
    return 1;
  std::vector<double> keygen;
  std::string dir = "/tmp/pvs-keygen-bench." + std::to_string(::getpid());
  for (int i = 0; i < n; ++i) {
    auto t = pvs::bench::Clock::now();
    std::string cmd = "rm -rf " + dir + " && mkdir " + dir + " && ssh-keygen -q -t ed25519 -N '' " +
                      "-C '' -f " + dir + "/k && ssh-keygen -l -f " + dir + "/k.pub >/dev/null";
    if (std::system(cmd.c_str()) != 0) return 1;
    keygen.push_back(pvs::bench::ms_since(t));
  }
  std::system(("rm -rf " + dir).c_str());
  std::printf("netns stack, zero-duration tasks, %d iterations, p50 (ms)\n", n);
  std::printf("  create, template's host key kept   %8.2f\n", p50(shared.create));
  std::printf("  create, the sandbox's own key      %8.2f  (%+.2f ms, ratio %.2f)\n",
              p50(own.create), p50(own.create) - p50(shared.create),
              p50(own.create) / p50(shared.create));
  std::printf("  destroy, template / own key        %8.2f / %.2f\n", p50(shared.destroy),
              p50(own.destroy));
  std::printf("  peer: ssh-keygen + fingerprint     %8.2f\n", p50(keygen));
  return 0;
}
