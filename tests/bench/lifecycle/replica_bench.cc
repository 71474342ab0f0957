// Template replicas on one node (realistic task durations, pvesim model backend, real agent and
// ruleset: pvs::test::Stack). Proxmox clones one source at a time, so one template makes one
// clone per vzclone (1.5 s): about 0.67 creates/s. With N replicas N clones run at once.
//
//   1. Sustained cold creates: `--concurrency` creates in flight at once (workers that create
//      and keep the sandbox), `--creates` x N in all, for N = 1, 2, 4 and 8 replicas. Prints
//      creates/s, the speed-up against 1 replica in the same run and its ratio to 0.8 x N (the
//      target), and the bound the creates in flight put on it: a create holds its place for the
//      clone and the start (1.5 s + 1.5 s), so C in flight make at most C / 3 s, whatever N is.
//   2. Sustained load on a hot pool of 8: creates arrive at `--rate` per second for
//      `--seconds` (each is destroyed once made); the pool refills `--refill` members at once.
//      Prints TTFC (create() to return: the model backend has no sshd, and a claimed member
//      hands over a live SSH session, so the first command adds one round trip in every case)
//      p50/p99 and the pool's misses (creates it did not serve: each a clone on the caller's
//      time), for 1 and 4 replicas.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "bench_args.h"
#include "pvesandbox/manager.h"
#include "sim.h"
#include "support/stack_fixture.h"
#include "timing.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::unique_ptr<pvs::Manager> open_or_exit(const pvs::ManagerConfig& c) {
  auto m = pvs::Manager::open(c);
  if (!m) {
    std::fprintf(stderr, "open: %s\n", m.error().message.c_str());
    std::exit(1);
  }
  return std::move(*m);
}

void realistic(pvs::test::Stack& stack, bool on) {
  for (auto& [type, ms] : pvesim::timing_profile("realistic"))
    stack.sim().set_task_ms(type, on ? ms : 0);
}

void destroy_all(std::vector<std::shared_ptr<pvs::Sandbox>>& boxes) {
  std::vector<std::thread> threads;
  for (auto& b : boxes)
    threads.emplace_back([&b] {
      if (b) (void)b->destroy();
    });
  for (auto& t : threads) t.join();
}

struct Sustained {
  int concurrency = 0;
  double seconds = 0;  // first create started to last one done
  double steady = 0;   // creates/s after the first C were done (no ramp-up)
  int failed = 0;
};

// One run: `concurrency` workers create until `creates` are made (each kept till the end).
Sustained run_creates(pvs::Manager& m, pvs::test::Stack& stack, int creates, int concurrency) {
  realistic(stack, true);
  std::vector<std::shared_ptr<pvs::Sandbox>> boxes(static_cast<std::size_t>(creates));
  std::vector<Clock::time_point> done;
  std::mutex mu;
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> workers;
  auto start = Clock::now();
  for (int w = 0; w < concurrency; ++w)
    workers.emplace_back([&] {
      for (int i; (i = next++) < creates;) {
        pvs::CreateOptions o;
        o.memory_mb = 256;  // 128 kept at once fit the simulated node's 64 GiB
        auto sb = m.create(o);
        if (!sb) {
          ++failed;
          continue;
        }
        boxes[static_cast<std::size_t>(i)] = *sb;
        std::lock_guard lock(mu);
        done.push_back(Clock::now());
      }
    });
  for (auto& t : workers) t.join();
  Sustained r;
  r.concurrency = concurrency;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.failed = failed;
  // From the C-th create done to the last: whole rounds of C in flight, or steady clones.
  std::sort(done.begin(), done.end());
  auto skip = std::min<std::size_t>(static_cast<std::size_t>(concurrency), done.size() / 2);
  if (done.size() > skip + 1 && skip > 0)
    r.steady = static_cast<double>(done.size() - skip) /
               std::chrono::duration<double>(done.back() - done[skip - 1]).count();
  realistic(stack, false);  // not timed: clean up quickly
  destroy_all(boxes);
  (void)m.reconcile();  // the node's memory as Proxmox now reports it, for the next run
  return r;
}

// One node with `replicas`; a run per entry of `concurrencies`. *setup: open() (the replicas).
std::vector<Sustained> sustained(int replicas, int creates, const std::vector<int>& concurrencies,
                                 double* setup) {
  pvs::test::StackOptions so;
  so.backend = "model";
  pvs::test::Stack stack(so);
  realistic(stack, true);
  auto c = stack.manager_config();
  c.max_sandboxes = creates + 1;
  c.template_replicas = replicas;
  auto setup_start = Clock::now();
  auto m = open_or_exit(c);  // makes the replicas
  *setup = std::chrono::duration<double>(Clock::now() - setup_start).count();
  std::vector<Sustained> out;
  for (int concurrency : concurrencies) out.push_back(run_creates(*m, stack, creates, concurrency));
  return out;
}

struct Load {
  std::vector<double> ttfc_ms;
  int failed = 0;
  std::uint64_t claims = 0, misses = 0;
  double fill_seconds = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

Load load(int replicas, double rate, int seconds, int refill) {
  pvs::test::StackOptions so;
  so.backend = "model";
  pvs::test::Stack stack(so);
  realistic(stack, true);
  auto c = stack.manager_config();
  c.background = true;
  c.max_sandboxes = 1000;
  pvs::HotPoolProfile p;
  p.name = "hot";
  p.size = 8;
  p.memory_mb = 512;
  p.template_replicas = replicas;
  c.hot_pools = {p};
  c.hot_pool_refill_parallel = refill;
  c.hot_pool_check_interval = milliseconds(500);
  auto fill_start = Clock::now();
  auto m = open_or_exit(c);
  Load r;
  while (m->pools()[0].ready < 8) std::this_thread::sleep_for(milliseconds(20));
  r.fill_seconds = std::chrono::duration<double>(Clock::now() - fill_start).count();
  std::mutex mu;
  std::vector<std::thread> arrivals, destroys;
  auto start = Clock::now();
  int total = static_cast<int>(rate * seconds);
  for (int i = 0; i < total; ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(i / rate)));
    arrivals.emplace_back([&] {
      auto t0 = Clock::now();
      auto sb = m->create({});
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      std::lock_guard lock(mu);
      if (!sb) {
        ++r.failed;
        return;
      }
      r.ttfc_ms.push_back(ms);
      destroys.emplace_back([s = *sb] { (void)s->destroy(); });
    });
  }
  for (auto& t : arrivals) t.join();
  auto pool = m->pools()[0];
  r.claims = pool.claims;
  r.misses = pool.misses;
  realistic(stack, false);
  for (auto& t : destroys) t.join();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(
      argc, argv,
      "replica_bench [--creates N] [--concurrency C] [--rate PER_MINUTE] [--seconds S]\n"
      "              [--refill R] [--part 1|2]\n"
      "  template replicas on one simulated node, realistic task durations; needs root.\n"
      "  1: --creates (16) x N cold creates, --concurrency (16) in flight, with N = 1/2/4/8\n"
      "     replicas; with 8 also C/2 and C/4 in flight\n"
      "  2: creates arriving at --rate (90 a minute) for --seconds (60) against a hot pool\n"
      "     of 8 refilled --refill (8) at once, with 1 and 4 replicas",
      0, {"--creates", "--concurrency", "--rate", "--seconds", "--refill", "--part"});
  int creates = args.count("--creates", 16);
  int concurrency = args.count("--concurrency", 16, 1, 256);
  double rate = args.count("--rate", 90, 1, 6000) / 60.0;
  int seconds = args.count("--seconds", 60, 1, 3600);
  int refill = args.count("--refill", 8, 1, 16);
  int part = args.count("--part", 0, 0, 2);
  const double clone_s = 1.5, start_s = 1.5;
  if (part != 2) {
    std::printf(
        "1. %d x N cold creates per run, one node, realistic durations (vzclone %.1f s, vzstart "
        "%.1f s);\n   creates/s from the C-th create done to the last (no ramp-up)\n",
        creates, clone_s, start_s);
    std::printf("%-8s %6s %8s %9s %10s %7s %9s %9s %9s  %s\n", "replicas", "in_fl", "setup_s",
                "seconds", "creates/s", "failed", "speedup", "vs0.8xN", "bound/s", "bounded by");
    double base = 0;
    auto row = [&](int n, double setup, const Sustained& r) {
      if (n == 1 && base == 0) base = r.steady;
      double clones = n / clone_s, flight = r.concurrency / (clone_s + start_s);
      const char* by = clones < flight   ? "clones: N / vzclone"
                       : clones > flight ? "in flight: C / (vzclone + vzstart)"
                                         : "both";
      std::printf("%-8d %6d %8.1f %9.2f %10.2f %7d %8.2fx %9.2f %9.2f  %s\n", n, r.concurrency,
                  setup, r.seconds, r.steady, r.failed, r.steady / base,
                  r.steady / base / (0.8 * n), std::min(clones, flight), by);
      std::fflush(stdout);
    };
    for (int n : {1, 2, 4, 8}) {
      double setup = 0;
      // With 8 replicas, also fewer creates in flight: where starts bound the rate.
      std::vector<int> cs = {concurrency};
      if (n == 8)
        for (int c : {concurrency / 2, concurrency / 4})
          if (c >= 1) cs.push_back(c);
      auto runs = sustained(n, creates * n, cs, &setup);
      for (auto& r : runs) row(n, setup, r);
    }
    std::printf(
        "   C creates in flight (each holds its place for the clone and the start) bound the\n"
        "   rate once N >= C x vzclone / (vzclone + vzstart) = %.1f replicas at C = %d\n",
        concurrency * clone_s / (clone_s + start_s), concurrency);
  }
  if (part != 1) {
    std::printf("2. creates at %.2f/s for %d s against a hot pool of 8 (refill %d at once)\n", rate,
                seconds, refill);
    std::printf("%-8s %8s %9s %8s %8s %8s %11s %11s\n", "replicas", "fill_s", "arrivals", "claims",
                "misses", "failed", "ttfc_p50ms", "ttfc_p99ms");
    std::fflush(stdout);
    for (int n : {1, 4}) {
      auto r = load(n, rate, seconds, refill);
      std::printf("%-8d %8.1f %9d %8llu %8llu %8d %11.1f %11.1f\n", n, r.fill_seconds,
                  static_cast<int>(rate * seconds), static_cast<unsigned long long>(r.claims),
                  static_cast<unsigned long long>(r.misses), r.failed, percentile(r.ttfc_ms, 0.5),
                  percentile(r.ttfc_ms, 0.99));
      std::fflush(stdout);
    }
  }
  return 0;
}
