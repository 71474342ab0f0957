// fork_bench: a fork of N from one sandbox holding a workspace, against N cold creates at once,
// on real containers (pvesim's lxc backend), in the same run (issue #49's figure). Needs root
// and the template rootfs (scripts/lxc-rootfs); not a ctest.
//
//   fork_bench [n=8] [rounds=3] [mib=100]
//
// 1. N cold creates at once (no pool), each until its first command: the time to all N.
// 2. One sandbox with `mib` MiB of random files in its home; `rounds` times: Manager::fork of N
//    (the base captured once, N linked clones of it at once), each fork until its first
//    command: the time to all N; every fork's workspace checksum is compared with the source's.
//    Then the forks are destroyed and a reconcile destroys the base.
// 3. A capture alone (Manager::capture_template), then deleted.
// Prints p50/p99 of each and the ratio N cold creates / fork of N.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
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

// N creates at once, each until its first command; the sandboxes made.
std::vector<std::shared_ptr<pvs::Sandbox>> cold_creates(pvs::Manager& m, int n) {
  std::vector<std::shared_ptr<pvs::Sandbox>> made(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      pvs::CreateOptions o;
      o.owner = "bench";
      auto sb = m.create(o);
      if (!sb) {
        errors[i] = sb.error().message;
        return;
      }
      made[i] = *sb;
      if (auto r = made[i]->exec("true"); !r) errors[i] = r.error().message;
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (!e.empty()) throw std::runtime_error("cold create: " + e);
  return made;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "fork_bench [n=8] [rounds=3] [mib=100]   (root; scripts/lxc-rootfs)", 3);
  const int n = args.count(1, 8), rounds = args.count(2, 3), mib = args.count(3, 100);
  try {
    pvs::test::StackOptions so;
    so.backend = "lxc";
    pvs::test::Stack stack(so);
    auto mc = stack.manager_config();
    mc.max_fork = std::max(mc.max_fork, n);
    auto manager = must(pvs::Manager::open(mc), "open the manager");
    std::printf("== fork_bench on real containers (pvesim lxc backend, %ld CPUs), N=%d\n",
                ::sysconf(_SC_NPROCESSORS_ONLN), n);

    std::vector<double> cold, forked, capture;
    for (int r = 0; r < rounds; ++r) {
      auto t = Clock::now();
      auto made = cold_creates(*manager, n);
      cold.push_back(ms_since(t));
      for (auto& sb : made) must(sb->destroy(), "destroy");
    }

    pvs::CreateOptions o;
    o.owner = "bench";
    auto src = must(manager->create(o), "create");
    auto t = Clock::now();
    run(*src, "mkdir -p ~/ws && for i in $(seq " + std::to_string(mib) +
                  "); do head -c 1048576 /dev/urandom > ~/ws/f$i; done; sync");
    double fill = ms_since(t);
    const std::string sum = run(*src, kSum);
    for (int r = 0; r < rounds; ++r) {
      t = Clock::now();
      auto forks = must(manager->fork(src->id(), n, "bench",
                                      [&](const std::string& base) {
                                        pvs::CreateOptions f;
                                        f.owner = "bench";
                                        f.template_name = base;
                                        return manager->create(f);
                                      }),
                        "fork");
      std::vector<std::thread> first;
      for (auto& f : forks) first.emplace_back([&f] { (void)f->exec("true"); });
      for (auto& th : first) th.join();
      forked.push_back(ms_since(t));
      for (auto& f : forks)
        if (run(*f, kSum) != sum) throw std::runtime_error("a fork's workspace differs");
      for (auto& f : forks) must(f->destroy(), "destroy");
      must(manager->reconcile(), "reconcile");
    }
    for (int r = 0; r < rounds; ++r) {
      t = Clock::now();
      auto c = must(manager->capture_template(src->id(), "", "bench"), "capture");
      capture.push_back(ms_since(t));
      must(manager->delete_template(c.name), "delete template");
    }
    must(src->destroy(), "destroy");
    for (const auto& c : manager->custom_templates())
      if (c.fork_base) throw std::runtime_error("a fork base was left: " + c.name);

    std::printf("workspace: %d MiB in %d files, written in %.0f ms; every fork identical\n", mib,
                mib, fill);
    print(("N=" + std::to_string(n) + " cold creates at once, to all answering").c_str(), cold);
    print(("fork of N=" + std::to_string(n) + ", to all answering").c_str(), forked);
    print("capture alone (snapshot, full clone, template)", capture);
    auto c = pvs::bench::stats(cold).p50, f = pvs::bench::stats(forked).p50;
    std::printf("N cold creates / fork of N (p50): %.2fx\n", c / f);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fork_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
