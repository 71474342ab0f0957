// pause_bench: pause and resume of real containers (pvesim's lxc backend) holding a workspace,
// against a cold create, in the same run (issue #49's figures). Needs root and the template
// rootfs (scripts/lxc-rootfs); not a ctest.
//
//   pause_bench [cycles=10] [creates=5] [mib=100]
//
// 1. Cold create to first command (no pool): `creates` times.
// 2. One sandbox with `mib` files of 1 MiB of random bytes in its home; `cycles` times: pause,
//    resume (until its SSH answers on its own host key), the first command after it; the
//    workspace's SHA-256 is compared after every resume (every byte kept).
// 3. The same with on_expiry pause + auto_resume: the first command on a paused sandbox resumes
//    it; its time is what an agent's next message waits.
// Prints p50/p99 of each and the ratio cold create / resume to first command (target >= 3x).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_args.h"
#include "bench_stats.h"
#include "lxc/sandbox_steps.h"
#include "pvesandbox/manager.h"
#include "support/stack_fixture.h"

namespace {

using pvs::bench::Clock;
using pvs::bench::ms_since;
using pvs::bench::must;
using pvs::bench::print;
using pvs::bench::run;

constexpr const char* kSum = "cat ~/ws/* | sha256sum";

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(
      argc, argv, "pause_bench [cycles=10] [creates=5] [mib=100]   (root; scripts/lxc-rootfs)", 3);
  const int cycles = args.count(1, 10), creates = args.count(2, 5), mib = args.count(3, 100);
  try {
    pvs::test::StackOptions so;
    so.backend = "lxc";
    pvs::test::Stack stack(so);
    auto mc = stack.manager_config();
    mc.max_paused = std::chrono::hours(1);
    auto manager = must(pvs::Manager::open(mc), "open the manager");
    std::printf("== pause_bench on real containers (pvesim lxc backend, %ld CPUs)\n",
                ::sysconf(_SC_NPROCESSORS_ONLN));

    std::vector<double> cold;
    for (int i = 0; i < creates; ++i) {
      auto t = Clock::now();
      auto sb = must(manager->create({}), "create");
      run(*sb, "true");
      cold.push_back(ms_since(t));
      must(sb->destroy(), "destroy");
    }

    pvs::CreateOptions o;
    o.pause_on_expiry = true;
    o.auto_resume = true;
    auto sb = must(manager->create(o), "create");
    auto t = Clock::now();
    run(*sb, "mkdir -p ~/ws && for i in $(seq " + std::to_string(mib) +
                 "); do head -c 1048576 /dev/urandom > ~/ws/f$i; done; sync");
    double fill = ms_since(t);
    const std::string sum = run(*sb, kSum);
    std::vector<double> pause, resume, first, woken;
    for (int i = 0; i < cycles; ++i) {
      t = Clock::now();
      must(sb->pause(), "pause");
      pause.push_back(ms_since(t));
      t = Clock::now();
      must(sb->resume(), "resume");
      resume.push_back(ms_since(t));
      run(*sb, "true");
      first.push_back(ms_since(t));
      if (run(*sb, kSum) != sum) throw std::runtime_error("the workspace changed across a pause");
    }
    for (int i = 0; i < cycles; ++i) {
      must(sb->pause(), "pause");
      t = Clock::now();
      run(*sb, "true");  // auto_resume: this call resumes it
      woken.push_back(ms_since(t));
      if (run(*sb, kSum) != sum) throw std::runtime_error("the workspace changed across a pause");
    }
    must(sb->destroy(), "destroy");

    std::printf(
        "workspace: %d MiB in %d files, written in %.0f ms; identical after all %d cycles\n", mib,
        mib, fill, 2 * cycles);
    print("cold create to first command", cold);
    print("pause (stop, disk kept)", pause);
    print("resume (until SSH answers)", resume);
    print("resume to first command", first);
    print("auto-resume: first command on a paused one", woken);
    auto c = pvs::bench::stats(cold).p50, r = pvs::bench::stats(first).p50;
    std::printf("cold create / resume to first command (p50): %.2fx (target >= 3x) %s\n", c / r,
                c / r >= 3.0 ? "MET" : "MISSED");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pause_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
