// audit_tail_bench: GET /v1/audit's reader (read_audit_tail, backwards in 64 KiB blocks) on a
// large audit log of real records, against two peers in the same run: GNU `tail -n N` (also
// reads backwards; includes its fork+exec) and a naive forward read of the whole file keeping
// the last N lines (what a reader without seeking costs). Prints medians and ratios.
//
//   audit_tail_bench [log_mb=256] [runs=15]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "api/audit/audit_tail.h"
#include "bench_args.h"
#include "core/observability/audit.h"

namespace {

using namespace pvs::service;
using Clock = std::chrono::steady_clock;

double median_ms(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double time_ms(const std::function<void()>& fn) {
  auto t0 = Clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A log of `mb` MiB: realistic exec records, one sandbox.create every 50 lines.
std::size_t write_log(const std::string& path, int mb) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::size_t lines = 0, bytes = 0;
  while (bytes < static_cast<std::size_t>(mb) << 20) {
    AuditRecord r;
    r.request_id = "6b43a47f-" + std::to_string(lines);
    r.token = "ci-runner";
    r.remote = "127.0.0.1";
    r.action = lines % 50 == 0 ? "sandbox.create" : "sandbox.exec";
    r.sandbox = "sb-4f2a9c1e0b7d";
    r.params_json =
        R"({"command":"make test -j4","cwd":"/root","env_names":["CI"],"stdin_bytes":0})";
    r.status = 200;
    r.duration_ms = 5012;
    std::string line = AuditLog::format(r, 1764160000000 + static_cast<std::int64_t>(lines));
    out << line;
    bytes += line.size();
    ++lines;
  }
  return lines;
}

void run_tail(const std::string& path, int n) {
  std::fflush(stdout);  // the child must not print our buffer again
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout)) _exit(127);
    execlp("tail", "tail", "-n", std::to_string(n).c_str(), path.c_str(), nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::fprintf(stderr, "tail failed\n");
}

std::size_t forward_read(const std::string& path, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(std::move(line));
    if (last.size() > n) last.pop_front();
  }
  return last.size();
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "audit_tail_bench [log_mb=256] [runs=15]\n"
                        "  read_audit_tail vs tail -n vs a forward read, on a generated log",
                        2);
  int mb = args.count(1, 256, 1, 65536);
  int runs = args.count(2, 15, 1, 1000);
  std::string dir = std::filesystem::temp_directory_path() / "pvs-audit-tail-bench-XXXXXX";
  if (!mkdtemp(dir.data())) return 1;
  std::string path = dir + "/audit.log";
  std::size_t lines = write_log(path, mb);
  std::printf("log: %d MiB, %zu records (page cache warm after the first run)\n", mb, lines);
  forward_read(path, 1);  // warm the page cache for everyone

  std::vector<double> ours100, ours1000, filtered, tail100, fwd100;
  for (int i = 0; i < runs; ++i) {  // interleaved
    AuditTailOptions o;
    ours100.push_back(time_ms([&] { (void)read_audit_tail(path, o); }));
    o.limit = 1000;
    ours1000.push_back(time_ms([&] { (void)read_audit_tail(path, o); }));
    AuditTailOptions f;
    f.action = "sandbox.create";  // 1 in 50: 5,000 lines looked at for 100
    filtered.push_back(time_ms([&] { (void)read_audit_tail(path, f); }));
    tail100.push_back(time_ms([&] { run_tail(path, 100); }));
    fwd100.push_back(time_ms([&] { forward_read(path, 100); }));
  }
  double o100 = median_ms(ours100), t100 = median_ms(tail100), f100 = median_ms(fwd100);
  std::printf("%-48s %10.3f ms\n", "read_audit_tail limit=100", o100);
  std::printf("%-48s %10.3f ms\n", "read_audit_tail limit=1000", median_ms(ours1000));
  std::printf("%-48s %10.3f ms\n", "read_audit_tail limit=100 action=sandbox.create",
              median_ms(filtered));
  std::printf("%-48s %10.3f ms\n", "peer: tail -n 100 (fork+exec included)", t100);
  std::printf("%-48s %10.3f ms\n", "peer: forward read of the whole file", f100);
  std::printf("ratio read_audit_tail/tail -n: %.3f   read_audit_tail/forward read: %.5f\n",
              o100 / t100, o100 / f100);
  std::filesystem::remove_all(dir);
  return 0;
}
