// SshSession versus OpenSSH, in the same run, against one private sshd on loopback
// (tests/support), logged in as a throw-away user whose shell is /bin/sh.
//
//   ssh_bench [--runs N] [--mib M] [--rounds R] [--pool C] [--split S] [--chunk-mib K] [--help]
//             (--mib 0 skips SFTP; C = SshConfig::exec_connections, S = transfer_connections,
//             K = transfer_chunk in MiB, their defaults)
//
// 1. `true` round trip: warm SshSession (untimed, with a 60 s timeout, and with the previous
//    per-command watchdog) vs `ssh` through a running ControlMaster; the "floor" is a local
//    fork+exec of `/bin/sh -c true` measured in the same run (what sshd must at least do per exec),
//    and ours minus floor is the overhead of everything else (client, SSH round trips, sshd's own
//    work).
// 2. SFTP upload/download of an M MiB random file (default 256): SshSession vs `sftp -b`
//    (OpenSSH's time excludes its connection set-up, measured with an empty batch).
// 3. 32 concurrent execs of `sleep 0.2` (and of `true`) on one session, and the same through
//    32 `ssh` clients on one ControlMaster.
// Prints the figures and ratios, with the cipher each side negotiated, the load average and CPU
// times; exits 1 if a target is missed (SFTP: 1.2x OpenSSH's sftp both ways where SshSession
// negotiated AES-GCM, libssh2 >= 1.11; 1.0x where the library has none).
#include "ssh_bench.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <optional>
#include <thread>

#include "bench_args.h"
#include "delay_proxy.h"
#include "ssh_bench_proc.h"
#include "support/sshd_client.h"
#include "support/user_procs.h"

namespace ssh_bench {
namespace {

using namespace std::chrono_literals;

struct SeriesCpu {
  double client = 0, sshd = 0, shells = 0, orphans = 0;  // ms per exec
  int left = 0;  // processes left in the sandbox right after the first exec returned
};

// Three ways to run `true`: untimed, with a 60 s timeout (the session's watchdog guards it),
// and for comparison the guard SshSession used before (a watchdog per command, double-forked
// beside it: `sleep 1`, then `tail --pid` under `timeout`), sent as an untimed command.
struct Variant {
  std::chrono::milliseconds timeout;
  std::string command;
};
const Variant kVariants[3] = {
    {0ms, "true"},
    {60000ms, "true"},
    {0ms,
     "printf '\\036pvs:%s\\036' \"$$\" >&2\n( (sleep 1; kill -0 $$ || exit 0; timeout 69 tail "
     "--pid=$$ -s 1 -f /dev/null; r=$?; if [ $r = 124 ]; then kill -s KILL -- -$$; elif [ $r "
     "!= 0 ]; then sleep 69; kill -0 $$ && kill -s KILL -- -$$; fi) & ) </dev/null >/dev/null "
     "2>&1 &\ntrue"}};

// What a command leaves running in the sandbox once it returned (sshd's own processes and
// the session's watchdog aside).
int left_behind(const Bench& b) {
  int n = 0;
  for (const auto& cmd : pvs::test::user_commands(pvs::test::home_uid(b.sshd.home())))
    n += cmd.starts_with("sshd") || cmd.find("session's watchdog") != std::string::npos ? 0 : 1;
  return n;
}

double exec_once(Bench& b, const Variant& v) {
  pvs::ExecOptions o;
  o.timeout = v.timeout;
  auto t0 = Clock::now();
  auto r = b.session.exec(v.command, o);
  double ms = ms_since(t0);
  if (!r || r->exit_code != 0) {
    std::fprintf(
        stderr, "exec failed: %s\n",
        r ? ("exit " + std::to_string(r->exit_code)).c_str() : r.error().to_string().c_str());
    std::exit(2);
  }
  return ms;
}

// Wall time: untimed and timed interleaved, so that they see the same load; then untimed and
// the previous guard interleaved, apart, since the previous guard's watchdogs go on working in
// the background for a second after each command and would slow whatever runs next.
struct ExecWall {
  std::vector<double> ours, timed, previous, untimed_beside_previous;
};
ExecWall exec_wall(Bench& b) {
  ExecWall w;
  for (int i = 0; i < b.runs + 10; ++i) {
    double untimed = exec_once(b, kVariants[0]), timed = exec_once(b, kVariants[1]);
    if (i >= 10) w.ours.push_back(untimed), w.timed.push_back(timed);
  }
  for (int i = 0; i < b.runs + 10; ++i) {
    double before = exec_once(b, kVariants[0]), ms = exec_once(b, kVariants[2]);
    if (i >= 10) w.untimed_beside_previous.push_back(before), w.previous.push_back(ms);
  }
  return w;
}

// CPU time: each variant on its own (counted per process tree).
SeriesCpu cpu_series(Bench& b, const Variant& v) {
  SeriesCpu cpu;
  const int n = std::max(20, b.runs / 2);
  std::this_thread::sleep_for(1500ms);  // watchdogs of earlier execs end first
  reap_orphans();
  double cpu0 = process_cpu_ms();
  double orphans0 = children_cpu_ms();
  TreeCpu remote0 = tree_cpu(b.sshd.pid());
  for (int i = 0; i < n; ++i) {
    exec_once(b, v);
    if (i == 0) cpu.left = left_behind(b);
  }
  cpu.client = (process_cpu_ms() - cpu0) / n;
  std::this_thread::sleep_for(1500ms);  // the last watchdogs end within a second
  TreeCpu remote1 = tree_cpu(b.sshd.pid());
  reap_orphans();
  cpu.sshd = (remote1.own - remote0.own) / n;
  cpu.shells = (remote1.children - remote0.children) / n;
  cpu.orphans = (children_cpu_ms() - orphans0) / n;
  return cpu;
}

// The floor: what sshd must at least do per exec (fork, exec the login shell, reap it), and
// its CPU per exec in `cpu`.
std::vector<double> floor_series(const Bench& b, double* cpu) {
  std::vector<double> floor;
  const double cpu0 = children_cpu_ms();
  for (int i = 0; i < b.runs + 10; ++i) {
    auto t0 = Clock::now();
    int rc = run({"/bin/sh", "-c", "true"});
    double ms = ms_since(t0);
    if (rc != 0) std::exit(2);
    if (i >= 10) floor.push_back(ms);
  }
  *cpu = (children_cpu_ms() - cpu0) / (b.runs + 10);
  return floor;
}

void start_master(Bench& b) {
  b.cm = b.dir + "/cm.sock";
  std::vector<std::string> master = {"ssh"};
  master.insert(master.end(), b.ssh_opts.begin(), b.ssh_opts.end());
  master.insert(master.end(), {"-M", "-N", "-S", b.cm, "-p", b.port, b.target});
  b.master_pid = spawn(master);
  for (int i = 0; i < 500 && access(b.cm.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(10ms);
}

std::vector<double> controlmaster_series(Bench& b) {
  std::vector<double> theirs;
  for (int i = 0; i < b.runs / 2 + 5; ++i) {
    auto t0 = Clock::now();
    int rc = run(b.ssh_client("true"));
    double t = ms_since(t0);
    if (rc != 0) {
      std::fprintf(stderr, "ssh via ControlMaster failed (%d)\n", rc);
      b.ok = false;
      break;
    }
    if (i >= 5) theirs.push_back(t);
  }
  return theirs;
}

void report_exec(Bench& b, const ExecWall& w, const std::vector<double>& floor, double floor_cpu,
                 const SeriesCpu (&cpu)[3], const std::vector<double>& theirs) {
  double ours_p50 = median(w.ours), timed_p50 = median(w.timed), floor_p50 = median(floor);
  std::printf("exec `true`, warm session (n=%zu): p50 %.2f ms  p90 %.2f  p99 %.2f\n", w.ours.size(),
              ours_p50, percentile(w.ours, 0.9), percentile(w.ours, 0.99));
  std::printf("  same, timeout 60 s        (n=%zu): p50 %.2f ms  p90 %.2f  p99 %.2f\n",
              w.timed.size(), timed_p50, percentile(w.timed, 0.9), percentile(w.timed, 0.99));
  std::printf(
      "  floor: local fork+exec of `/bin/sh -c true` p50 %.2f ms (CPU %.2f ms); ours - floor = "
      "%.2f ms (timed: %.2f ms)\n",
      floor_p50, floor_cpu, ours_p50 - floor_p50, timed_p50 - floor_p50);
  std::printf(
      "  previous guard (a watchdog per command; a series of its own, interleaved with untimed) "
      "p50 %.2f ms  p90 %.2f\n",
      median(w.previous), percentile(w.previous, 0.9));
  std::printf(
      "  timed - untimed p50 = %+.2f ms (target within 0.1 ms); previous guard - untimed %+.2f "
      "ms\n",
      timed_p50 - ours_p50, median(w.previous) - median(w.untimed_beside_previous));
  std::printf(
      "  processes left in the sandbox right after a command: untimed %d, timed %d, previous "
      "guard %d\n",
      cpu[0].left, cpu[1].left, cpu[2].left);
  const char* names[3] = {"untimed", "timed", "previous guard"};
  for (int v = 0; v < 3; ++v) {
    std::printf(
        "  CPU per exec, %s: client %.2f ms, sshd %.2f ms, login shell %.2f ms, watchdog "
        "%.2f ms\n",
        names[v], cpu[v].client, cpu[v].sshd, cpu[v].shells, cpu[v].orphans);
  }
  if (theirs.empty()) return;
  double theirs_p50 = median(theirs);
  std::printf("ssh via ControlMaster     (n=%zu): p50 %.2f ms  p90 %.2f  p99 %.2f\n", theirs.size(),
              theirs_p50, percentile(theirs, 0.9), percentile(theirs, 0.99));
  double ratio = ours_p50 / theirs_p50;
  std::printf("  ratio ours/OpenSSH p50 = %.2fx untimed, %.2fx timed (target <= 0.30x) %s\n", ratio,
              timed_p50 / theirs_p50, ratio <= 0.30 ? "OK" : "MISSED");
  b.ok = b.ok && ratio <= 0.30;
}

// 32 concurrent execs of `cmd` per round, on the session or through 32 `ssh` clients: the
// wall time of each round.
std::vector<double> ours_concurrent(Bench& b, const char* cmd, std::chrono::milliseconds timeout) {
  std::vector<double> totals;
  pvs::ExecOptions o;
  o.timeout = timeout;
  for (int round = 0; round < b.rounds; ++round) {
    auto t0 = Clock::now();
    std::vector<std::future<pvs::Result<pvs::ExecResult>>> fs;
    for (int i = 0; i < 32; ++i) fs.push_back(b.session.exec_async(cmd, o));
    for (auto& f : fs) {
      auto r = f.get();
      if (!r || r->exit_code != 0) b.ok = false;
    }
    totals.push_back(ms_since(t0));
  }
  return totals;
}

std::vector<double> theirs_concurrent(Bench& b, const char* cmd) {
  std::vector<double> totals;
  for (int round = 0; round < b.rounds; ++round) {
    auto t0 = Clock::now();
    std::vector<pid_t> pids;
    for (int i = 0; i < 32; ++i) pids.push_back(spawn(b.ssh_client(cmd)));
    for (pid_t p : pids) {
      if (p < 0 || wait_exit(p) != 0) b.ok = false;
    }
    totals.push_back(ms_since(t0));
  }
  return totals;
}

}  // namespace

std::vector<std::string> Bench::ssh_client(const std::string& cmd) const {
  std::vector<std::string> args = {"ssh"};
  args.insert(args.end(), ssh_opts.begin(), ssh_opts.end());
  args.insert(args.end(), {"-S", cm, "-p", port, target, cmd});
  return args;
}

void bench_exec(Bench& b) {
  std::printf("load average at start: %s\n", load_average().c_str());
  // Orphaned remote processes (the timed execs' watchdogs) are reparented to this process, so
  // that their CPU time can be counted.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  ExecWall wall = exec_wall(b);
  SeriesCpu cpu[3] = {cpu_series(b, kVariants[0]), cpu_series(b, kVariants[1]),
                      cpu_series(b, kVariants[2])};
  double floor_cpu = 0;
  std::vector<double> floor = floor_series(b, &floor_cpu);
  start_master(b);
  report_exec(b, wall, floor, floor_cpu, cpu, controlmaster_series(b));
}

void bench_concurrent(Bench& b) {
  std::printf("load average now: %s\n", load_average().c_str());
  for (const char* cmd : {"sleep 0.2", "true"}) {
    const bool is_sleep = std::string(cmd) == "sleep 0.2";
    auto untimed = ours_concurrent(b, cmd, 0ms);
    auto timed = ours_concurrent(b, cmd, 60000ms);
    auto peer = theirs_concurrent(b, cmd);
    std::printf(
        "32 concurrent `%s`, median of %d: SshSession %.0f ms (max %.0f, %d connections), "
        "timeout 60 s %.0f ms; ssh via ControlMaster %.0f ms -> %.2fx%s\n",
        cmd, b.rounds, median(untimed), *std::max_element(untimed.begin(), untimed.end()),
        b.session.stats().exec_connections, median(timed), median(peer),
        median(untimed) / median(peer),
        is_sleep
            ? (median(untimed) <= 500 ? " (target <= 500 ms) OK" : " (target <= 500 ms) MISSED")
            : "");
    if (is_sleep) b.ok = b.ok && median(untimed) <= 500;
  }
}

}  // namespace ssh_bench

int main(int argc, char** argv) {
  pvs::bench::Args cli(
      argc, argv,
      "ssh_bench [--runs N=200] [--mib M=256] [--rounds R=5] [--pool C=3]\n"
      "          [--split S=4] [--chunk-mib K=16] [--rtt-ms T=0]\n"
      "  SshSession vs OpenSSH against a private sshd on loopback: exec round\n"
      "  trip over R rounds of N, SFTP of an M MiB file (0 skips it) in K MiB\n"
      "  chunks over S connections, 32 concurrent execs over C connections\n"
      "  (SshConfig::exec_connections, transfer_connections, transfer_chunk);\n"
      "  T > 0: every connection through a relay that adds T ms of round trip",
      0, {"--runs", "--mib", "--rounds", "--pool", "--split", "--chunk-mib", "--rtt-ms"});
  pvs::test::SshdFixture sshd;
  pvs::SshConfig cfg = pvs::test::client_config(sshd);
  // Before any thread starts: the relay is a child process.
  const int rtt = cli.count("--rtt-ms", 0, 0, 1000);
  std::optional<ssh_bench::DelayProxy> relay;
  std::vector<std::string> alias;
  if (rtt > 0) {
    relay.emplace(sshd.port(), std::chrono::milliseconds(rtt) / 2);
    cfg.port = relay->port();
    // OpenSSH checks the host key under the sshd's own address.
    alias = {"-o", "HostKeyAlias=[" + sshd.host() + "]:" + std::to_string(sshd.port())};
    std::printf("every connection through a relay adding %d ms of round trip\n", rtt);
  }
  cfg.exec_connections = cli.count("--pool", pvs::SshConfig{}.exec_connections, 1, 64);
  cfg.transfer_connections = cli.count("--split", pvs::SshConfig{}.transfer_connections, 1, 64);
  cfg.transfer_chunk =
      static_cast<std::size_t>(cli.count(
          "--chunk-mib", static_cast<int>(pvs::SshConfig{}.transfer_chunk >> 20), 1, 1024))
      << 20;
  pvs::SshSession session(cfg);
  if (auto c = session.connect(); !c) {
    std::fprintf(stderr, "connect: %s\n", c.error().to_string().c_str());
    return 2;
  }
  ssh_bench::Bench b{
      .sshd = sshd,
      .cfg = cfg,
      .session = session,
      .runs = cli.count("--runs", 200),
      .mib = static_cast<std::size_t>(cli.count("--mib", 256, 0, 65536)),
      .rounds = cli.count("--rounds", 5),
      .dir = sshd.dir(),
      .port = std::to_string(cfg.port),
      .target = sshd.user() + "@" + sshd.host(),
      .ssh_opts = {"-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i",
                   sshd.client_key_path(), "-o", "UserKnownHostsFile=" + sshd.known_hosts_path(),
                   "-o", "StrictHostKeyChecking=yes"},
  };
  b.ssh_opts.insert(b.ssh_opts.end(), alias.begin(), alias.end());
  ssh_bench::bench_exec(b);
  if (b.mib > 0) ssh_bench::bench_sftp(b);
  ssh_bench::bench_concurrent(b);
  if (b.master_pid > 0) {
    kill(b.master_pid, SIGTERM);
    ssh_bench::wait_exit(b.master_pid);
  }
  std::printf("load average at end: %s\n", ssh_bench::load_average().c_str());
  std::printf("%s\n", b.ok ? "all targets met" : "SOME TARGETS MISSED");
  return b.ok ? 0 : 1;
}
