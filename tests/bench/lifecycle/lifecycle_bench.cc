// Lifecycle benchmark on the whole stack (pvs::test::Stack, model backend, real agent and
// ruleset): controller overhead of create/destroy beyond Proxmox's work, compared with the
// peer: the bare ProxmoxClient calls a create/destroy needs (clone, config, start / stop,
// destroy) issued directly. Also throughput of 64 concurrent creates with realistic task
// durations, and controller memory per live sandbox.
//
//   lifecycle_bench [iterations=100]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_args.h"
#include "pvesandbox/manager.h"
#include "pvesandbox/proxmox_client.h"
#include "sim.h"
#include "support/stack_fixture.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

long rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return 0;
}

// Destroys the sandboxes concurrently (one thread each).
void destroy_all(std::vector<std::shared_ptr<pvs::Sandbox>>& boxes) {
  std::vector<std::thread> threads;
  for (auto& b : boxes)
    threads.emplace_back([&b] {
      if (b) (void)b->destroy();
    });
  for (auto& th : threads) th.join();
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "lifecycle_bench [iterations=100]\n"
                        "  create/destroy overhead over the bare Proxmox calls, 64 concurrent\n"
                        "  creates (cold and from a warm pool), memory per sandbox",
                        1);
  int n = args.count(1, 100);
  pvs::test::StackOptions so;
  so.backend = "model";
  pvs::test::Stack stack(so);
  auto cfg = stack.manager_config();
  auto client = pvs::pve::Client::create(cfg.proxmox);
  if (!client) return 1;
  auto& pve = **client;

  // Peer: the bare Proxmox calls of one create and one destroy.
  std::vector<double> peer_create, peer_destroy;
  for (int i = 0; i < n; ++i) {
    int vmid = 11000 + (i % 500);
    auto t = Clock::now();
    pvs::pve::CloneRequest req;
    req.source_vmid = 9000;
    req.new_vmid = vmid;
    req.pool = "pve-sandbox";
    auto u = pve.clone("pve", req);
    if (!u || !pve.wait_task(*u)) return 2;
    if (!pve.update_config("pve", vmid, {{"cores", "1"}, {"memory", "512"}, {"swap", "0"}}))
      return 2;
    auto s = pve.start("pve", vmid);
    if (!s || !pve.wait_task(*s)) return 2;
    peer_create.push_back(ms_since(t));
    t = Clock::now();
    auto st = pve.stop("pve", vmid);
    if (!st || !pve.wait_task(*st)) return 2;
    pvs::pve::DestroyOptions d;
    d.purge = true;
    auto x = pve.destroy("pve", vmid, d);
    if (!x || !pve.wait_task(*x)) return 2;
    peer_destroy.push_back(ms_since(t));
  }

  auto manager = pvs::Manager::open(cfg);
  if (!manager) {
    std::fprintf(stderr, "open: %s\n", manager.error().message.c_str());
    return 1;
  }
  auto& m = **manager;
  std::vector<double> create, destroy;
  for (int i = 0; i < n; ++i) {
    pvs::CreateOptions o;
    o.internet = true;
    auto t = Clock::now();
    auto sb = m.create(o);
    if (!sb) {
      std::fprintf(stderr, "create: %s\n", sb.error().message.c_str());
      return 3;
    }
    create.push_back(ms_since(t));
    t = Clock::now();
    if (!(*sb)->destroy()) return 3;
    destroy.push_back(ms_since(t));
  }
  std::printf("zero-duration tasks, %d iterations (ms)         p50      p90      p99\n", n);
  std::printf("  Manager::create (clone..ready, +agent)   %8.2f %8.2f %8.2f\n", pct(create, .5),
              pct(create, .9), pct(create, .99));
  std::printf("  peer: bare clone+config+start            %8.2f %8.2f %8.2f\n",
              pct(peer_create, .5), pct(peer_create, .9), pct(peer_create, .99));
  std::printf("  Sandbox::destroy (revoke..purge)         %8.2f %8.2f %8.2f\n", pct(destroy, .5),
              pct(destroy, .9), pct(destroy, .99));
  std::printf("  peer: bare stop+destroy                  %8.2f %8.2f %8.2f\n",
              pct(peer_destroy, .5), pct(peer_destroy, .9), pct(peer_destroy, .99));
  std::printf(
      "  controller overhead p50: create %+.2f ms (ratio %.2f), destroy %+.2f ms (ratio %.2f)\n",
      pct(create, .5) - pct(peer_create, .5), pct(create, .5) / pct(peer_create, .5),
      pct(destroy, .5) - pct(peer_destroy, .5), pct(destroy, .5) / pct(peer_destroy, .5));

  // 64 concurrent creates with realistic task durations.
  stack.sim().set_task_ms("vzclone", 200);
  stack.sim().set_task_ms("vzstart", 300);
  stack.sim().set_task_ms("vzstop", 100);
  stack.sim().set_task_ms("vzdestroy", 100);
  long rss_before = rss_kb();
  std::vector<std::shared_ptr<pvs::Sandbox>> boxes(64);
  std::vector<std::thread> threads;
  auto t = Clock::now();
  for (int i = 0; i < 64; ++i)
    threads.emplace_back([&, i] {
      auto sb = m.create({});
      if (sb) boxes[i] = *sb;
    });
  for (auto& th : threads) th.join();
  double wall = ms_since(t);
  long rss_after = rss_kb();
  int ok = static_cast<int>(std::count_if(boxes.begin(), boxes.end(), [](auto& b) { return !!b; }));
  std::printf(
      "64 concurrent creates (clone 200 ms serial per template, start 300 ms): %d ok in "
      "%.0f ms = %.1f creates/s (serial-clone bound: %.1f/s)\n",
      ok, wall, ok * 1000.0 / wall, 1000.0 / 200);
  std::printf("controller memory per live sandbox: %.1f KiB (RSS %ld -> %ld KiB, %d sandboxes)\n",
              static_cast<double>(rss_after - rss_before) / std::max(ok, 1), rss_before, rss_after,
              ok);
  destroy_all(boxes);
  manager->reset();

  // The same 64 concurrent creates from a full warm pool of 64 stopped clones.
  auto pooled_cfg = cfg;
  pooled_cfg.warm_pool = 64;
  auto pooled_manager = pvs::Manager::open(pooled_cfg);
  if (!pooled_manager) return 4;
  auto& pm = **pooled_manager;
  auto fill_start = Clock::now();
  while (pm.stats().pooled < 64 && ms_since(fill_start) < 120000)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double fill_ms = ms_since(fill_start);
  std::fill(boxes.begin(), boxes.end(), nullptr);
  threads.clear();
  t = Clock::now();
  for (int i = 0; i < 64; ++i)
    threads.emplace_back([&, i] {
      auto sb = pm.create({});
      if (sb) boxes[i] = *sb;
    });
  for (auto& th : threads) th.join();
  wall = ms_since(t);
  ok = static_cast<int>(std::count_if(boxes.begin(), boxes.end(), [](auto& b) { return !!b; }));
  auto st = pm.stats();
  std::printf(
      "64 concurrent creates from a warm pool of 64 (filled in %.0f ms): %d ok in %.0f ms = "
      "%.1f creates/s (%llu from the pool)\n",
      fill_ms, ok, wall, ok * 1000.0 / wall, static_cast<unsigned long long>(st.pool_hits));
  destroy_all(boxes);
  pooled_manager->reset();
  cfg.warm_pool = 0;  // recovery destroys the refilled pool
  (void)pvs::Manager::open(cfg);
  return 0;
}
