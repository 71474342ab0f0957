// bench_sessions: what keeping E2B sessions in e2b.sessions_file costs (docs/e2b.md, "Sessions
// across restarts"), beside the peer, the same registry in memory only, in the same run:
//   1. SessionRegistry::ensure of a new sandbox (what an E2B create adds), p50/p99 in µs, with
//      and without the file (the file is written by the registry's writer thread, off this path)
//   2. the writer's cost: one encode + atomic replace of a file of N sessions, and how long a
//      burst of `--burst` ensures takes to reach the disk (flush), with and without the file
// Not a ctest; any user (a temporary directory).
//
// Usage: bench_sessions [--sessions N] [--burst N]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "bench_args.h"
#include "bench_stats.h"
#include "e2b/refusing_sandbox.h"
#include "e2b/session_store.h"
#include "pvesandbox/common/io.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace pvs::service::e2b;

double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

std::string sandbox_id(int i) {
  char id[32];
  std::snprintf(id, sizeof id, "sb-%012x", i);
  return id;
}

// ensure() of `n` new sandboxes: the per-call times, then the time until the file holds them.
std::pair<std::vector<double>, double> ensure_all(SessionRegistry& r, int from, int n) {
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(n));
  for (int i = from; i < from + n; ++i) {
    auto sb = std::make_shared<RefusingSandbox>(sandbox_id(i), "bench");
    auto t = Clock::now();
    r.ensure(sb, "base", {{"A", "1"}});
    us.push_back(us_since(t));
  }
  auto t = Clock::now();
  r.flush();
  return {us, us_since(t)};
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "bench_sessions [--sessions N] [--burst N]\n  the cost of "
                        "e2b.sessions_file beside the in-memory registry",
                        0, {"--sessions", "--burst"});
  const int sessions = args.count("--sessions", 1000, 1, 1000000);
  const int burst = args.count("--burst", 64, 1, 100000);
  auto dir =
      std::filesystem::temp_directory_path() / ("pvs-bench-sessions-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "e2b-sessions.json").string();

  SessionRegistry memory;
  SessionRegistry kept(file);
  auto [mem_us, mem_flush] = ensure_all(memory, 0, sessions);
  auto [file_us, file_flush] = ensure_all(kept, 0, sessions);
  auto m = pvs::bench::stats(mem_us), f = pvs::bench::stats(file_us);
  std::printf("SessionRegistry::ensure of a new sandbox, %d sessions\n", sessions);
  std::printf("  memory only (the peer)   p50 %.2f us  p99 %.2f us\n", m.p50, m.p99);
  std::printf("  with the sessions file   p50 %.2f us  p99 %.2f us  (%.2fx)\n", f.p50, f.p99,
              f.p50 / m.p50);
  std::printf("  until the file held all  %.0f us after the last ensure\n", file_flush);

  SessionFile contents;
  for (int i = 0; i < sessions; ++i)
    contents.sessions.push_back({sandbox_id(i),
                                 std::string(43, 't'),
                                 "base",
                                 {{"A", "1"}},
                                 "bench",
                                 std::string(43, 'u'),
                                 "",
                                 "pve"});
  std::vector<double> write_us;
  std::size_t bytes = 0;
  for (int i = 0; i < 20; ++i) {
    auto t = Clock::now();
    std::string text = SessionStore::encode(contents);
    bytes = text.size();
    (void)pvs::write_file_atomic(file + ".w", text, {.mode = 0600});
    write_us.push_back(us_since(t));
  }
  auto w = pvs::bench::stats(write_us);
  std::printf("one write of the file (encode + atomic replace), %d sessions, %zu bytes\n", sessions,
              bytes);
  std::printf("  p50 %.0f us  p99 %.0f us\n", w.p50, w.p99);

  auto [bm, bm_flush] = ensure_all(memory, sessions, burst);
  auto [bf, bf_flush] = ensure_all(kept, sessions, burst);
  auto bms = pvs::bench::stats(bm), bfs = pvs::bench::stats(bf);
  std::printf("a burst of %d creates on top of %d sessions\n", burst, sessions);
  std::printf("  memory only      ensure p50 %.2f us\n", bms.p50);
  std::printf("  sessions file    ensure p50 %.2f us; on disk %.0f us after the last\n", bfs.p50,
              bf_flush);
  (void)mem_flush;
  (void)bm_flush;
  std::filesystem::remove_all(dir);
  return 0;
}
