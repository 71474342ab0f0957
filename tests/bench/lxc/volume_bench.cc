// volume_bench: what a volume costs on real containers (pvesim's lxc backend), peers in the same
// run (issue #49, volumes). Needs root and the template rootfs (scripts/lxc-rootfs); not a
// ctest.
//
//   volume_bench [rounds=5] [mib=100]
//
// 1. Manager::create_volume (a linked clone of the holder template, its mp0 allocated and
//    formatted) and delete_volume.
// 2. A create that mounts a volume against one that does not, each until its first command.
//    Every sandbox stays until the end, so that none reuses a destroyed one's address (the
//    node's neighbour entry of a reused address can cost a second at start, either way).
// 3. `mib` MiB written (dd, conv=fsync) to the volume and to the root disk of the same sandbox.
// Prints p50/p99 of each and the ratios.
#include <unistd.h>

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

// A create of `options` until its first command: (ms, the sandbox).
std::pair<double, std::shared_ptr<pvs::Sandbox>> timed_create(pvs::Manager& m,
                                                              const pvs::CreateOptions& o) {
  auto t = Clock::now();
  auto sb = must(m.create(o), "create");
  run(*sb, "true");
  return {ms_since(t), sb};
}

double write_ms(pvs::Sandbox& sb, const std::string& file, int mib) {
  auto t = Clock::now();
  run(sb, "dd if=/dev/zero of=" + file + " bs=1M count=" + std::to_string(mib) +
              " conv=fsync status=none && rm -f " + file);
  return ms_since(t);
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "volume_bench [rounds=5] [mib=100]   (root; scripts/lxc-rootfs)", 2);
  const int rounds = args.count(1, 5), mib = args.count(2, 100);
  try {
    pvs::test::StackOptions so;
    so.backend = "lxc";
    so.volume_holder = true;
    pvs::test::Stack stack(so);
    auto mc = stack.manager_config();
    mc.volumes.holder_template_vmid = pvs::test::kVolumeHolderTemplate;
    auto manager = must(pvs::Manager::open(mc), "open the manager");
    std::printf("== volume_bench on real containers (pvesim lxc backend, %ld CPUs)\n",
                ::sysconf(_SC_NPROCESSORS_ONLN));

    std::vector<double> make, remove, plain, mounted, to_volume, to_root;
    std::vector<std::shared_ptr<pvs::Sandbox>> made;
    std::vector<std::string> volumes;
    for (int r = 0; r < rounds; ++r) {
      auto t = Clock::now();
      auto v = must(manager->create_volume({"bench" + std::to_string(r), 2, "bench", ""}),
                    "create volume");
      make.push_back(ms_since(t));
      volumes.push_back(v.id);
      pvs::CreateOptions o;
      o.owner = "bench";
      auto [without_ms, a] = timed_create(*manager, o);
      plain.push_back(without_ms);
      o.volumes = {{v.id, "/mnt/v", false}};
      auto [with_ms, b] = timed_create(*manager, o);
      mounted.push_back(with_ms);
      to_volume.push_back(write_ms(*b, "/mnt/v/blob", mib));
      to_root.push_back(write_ms(*b, "/root/blob", mib));
      made.push_back(a);
      made.push_back(b);
    }
    for (auto& sb : made) must(sb->destroy(), "destroy");
    for (const auto& id : volumes) {
      auto t = Clock::now();
      must(manager->delete_volume(id), "delete volume");
      remove.push_back(ms_since(t));
    }
    print("create_volume (holder clone, mp0 allocated)", make);
    print("delete_volume", remove);
    print("create, no volume, to its first command", plain);
    print("create with a volume, to its first command", mounted);
    print(("write " + std::to_string(mib) + " MiB to the volume (fsync)").c_str(), to_volume);
    print(("write " + std::to_string(mib) + " MiB to the root disk (fsync)").c_str(), to_root);
    auto p = [](const std::vector<double>& v) { return pvs::bench::stats(v).p50; };
    std::printf("create with a volume / without (p50): %.2fx\n", p(mounted) / p(plain));
    std::printf("write to the volume / to the root disk (p50): %.2fx\n", p(to_volume) / p(to_root));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "volume_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
