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

// 64 creates at once on `m`, one thread each, into `boxes` (a failed one stays null); the wall
// time in ms.
double create_64(pvs::Manager& m, std::vector<std::shared_ptr<pvs::Sandbox>>& boxes) {
  boxes.assign(64, nullptr);
  std::vector<std::thread> threads;
  auto t = Clock::now();
  for (int i = 0; i < 64; ++i)
    threads.emplace_back([&, i] {
      auto sb = m.create({});
      if (sb) boxes[i] = *sb;
    });
  for (auto& th : threads) th.join();
  return ms_since(t);
}

int made(const std::vector<std::shared_ptr<pvs::Sandbox>>& boxes) {
  return static_cast<int>(std::count_if(boxes.begin(), boxes.end(), [](auto& b) { return !!b; }));
}

struct Series {
  std::vector<double> create, destroy;
};

// The peer: the bare Proxmox calls of one create (clone, config, start) and one destroy (stop,
// destroy), `n` times.
bool peer_series(pvs::pve::Client& pve, int n, Series& s) {
  for (int i = 0; i < n; ++i) {
    int vmid = 11000 + (i % 500);
    auto t = Clock::now();
    pvs::pve::CloneRequest req;
    req.source_vmid = 9000;
    req.new_vmid = vmid;
    req.pool = "pve-sandbox";
    auto u = pve.clone("pve", req);
    if (!u || !pve.wait_task(*u)) return false;
    if (!pve.update_config("pve", vmid, {{"cores", "1"}, {"memory", "512"}, {"swap", "0"}}))
      return false;
    auto started = pve.start("pve", vmid);
    if (!started || !pve.wait_task(*started)) return false;
    s.create.push_back(ms_since(t));
    t = Clock::now();
    auto stopped = pve.stop("pve", vmid);
    if (!stopped || !pve.wait_task(*stopped)) return false;
    pvs::pve::DestroyOptions d;
    d.purge = true;
    auto x = pve.destroy("pve", vmid, d);
    if (!x || !pve.wait_task(*x)) return false;
    s.destroy.push_back(ms_since(t));
  }
  return true;
}

bool manager_series(pvs::Manager& m, int n, Series& s) {
  for (int i = 0; i < n; ++i) {
    pvs::CreateOptions o;
    o.internet = true;
    auto t = Clock::now();
    auto sb = m.create(o);
    if (!sb) {
      std::fprintf(stderr, "create: %s\n", sb.error().message.c_str());
      return false;
    }
    s.create.push_back(ms_since(t));
    t = Clock::now();
    if (!(*sb)->destroy()) return false;
    s.destroy.push_back(ms_since(t));
  }
  return true;
}

void report_series(int n, const Series& ours, const Series& peer) {
  auto row = [](const char* what, const std::vector<double>& v) {
    std::printf("  %-40s %8.2f %8.2f %8.2f\n", what, pct(v, .5), pct(v, .9), pct(v, .99));
  };
  std::printf("zero-duration tasks, %d iterations (ms)         p50      p90      p99\n", n);
  row("Manager::create (clone..ready, +agent)", ours.create);
  row("peer: bare clone+config+start", peer.create);
  row("Sandbox::destroy (revoke..purge)", ours.destroy);
  row("peer: bare stop+destroy", peer.destroy);
  std::printf(
      "  controller overhead p50: create %+.2f ms (ratio %.2f), destroy %+.2f ms (ratio %.2f)\n",
      pct(ours.create, .5) - pct(peer.create, .5), pct(ours.create, .5) / pct(peer.create, .5),
      pct(ours.destroy, .5) - pct(peer.destroy, .5), pct(ours.destroy, .5) / pct(peer.destroy, .5));
}

// 64 concurrent creates with realistic task durations, and the controller's memory per sandbox.
void concurrent_cold(pvs::test::Stack& stack, pvs::Manager& m) {
  stack.sim().set_task_ms("vzclone", 200);
  stack.sim().set_task_ms("vzstart", 300);
  stack.sim().set_task_ms("vzstop", 100);
  stack.sim().set_task_ms("vzdestroy", 100);
  long rss_before = rss_kb();
  std::vector<std::shared_ptr<pvs::Sandbox>> boxes;
  double wall = create_64(m, boxes);
  long rss_after = rss_kb();
  int ok = made(boxes);
  std::printf(
      "64 concurrent creates (clone 200 ms serial per template, start 300 ms): %d ok in "
      "%.0f ms = %.1f creates/s (serial-clone bound: %.1f/s)\n",
      ok, wall, ok * 1000.0 / wall, 1000.0 / 200);
  std::printf("controller memory per live sandbox: %.1f KiB (RSS %ld -> %ld KiB, %d sandboxes)\n",
              static_cast<double>(rss_after - rss_before) / std::max(ok, 1), rss_before, rss_after,
              ok);
  destroy_all(boxes);
}

// The same 64 concurrent creates from a full warm pool of 64 stopped clones.
bool concurrent_pooled(pvs::ManagerConfig cfg) {
  cfg.warm_pool = 64;
  auto manager = pvs::Manager::open(cfg);
  if (!manager) return false;
  auto& m = **manager;
  auto fill_start = Clock::now();
  while (m.stats().pooled < 64 && ms_since(fill_start) < 120000)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double fill_ms = ms_since(fill_start);
  std::vector<std::shared_ptr<pvs::Sandbox>> boxes;
  double wall = create_64(m, boxes);
  int ok = made(boxes);
  std::printf(
      "64 concurrent creates from a warm pool of 64 (filled in %.0f ms): %d ok in %.0f ms = "
      "%.1f creates/s (%llu from the pool)\n",
      fill_ms, ok, wall, ok * 1000.0 / wall, static_cast<unsigned long long>(m.stats().pool_hits));
  destroy_all(boxes);
  return true;
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
  Series peer, ours;
  if (!peer_series(**client, n, peer)) return 2;
  {
    auto manager = pvs::Manager::open(cfg);
    if (!manager) {
      std::fprintf(stderr, "open: %s\n", manager.error().message.c_str());
      return 1;
    }
    if (!manager_series(**manager, n, ours)) return 3;
    report_series(n, ours, peer);
    concurrent_cold(stack, **manager);
  }
  if (!concurrent_pooled(cfg)) return 4;
  cfg.warm_pool = 0;  // recovery destroys the refilled pool
  (void)pvs::Manager::open(cfg);
  return 0;
}
