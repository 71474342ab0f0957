// Keystroke latency of a terminal, against OpenSSH in the same run, on a private loopback sshd:
//   1. echo:   Terminal::write one key, until a raw-output watcher sees its echo (what a
//              WebSocket client waits for, minus the WebSocket hop)
//   2. screen: Terminal::send one key, until wait() sees it rendered on the screen (what an
//              agent's input + wait pays, minus HTTP)
//   3. peer:   `ssh -tt` through a running ControlMaster (a session with a pty running `cat`),
//              one key written to its stdin until its echo comes back on its stdout
// Each types into `cat` on a pty (the tty echoes each key at once); p50/p99 and the ratios.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench_args.h"
#include "pvesandbox/ssh_session.h"
#include "pvesandbox/terminal.h"
#include "support/sshd_fixture.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}
void report(const char* what, const std::vector<double>& v) {
  std::printf("%-44s (n=%zu): p50 %.3f ms  p99 %.3f ms\n", what, v.size(), percentile(v, 0.5),
              percentile(v, 0.99));
}

pid_t spawn(const std::vector<std::string>& argv, int in_fd, int out_fd) {
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Reads from fd until `want` more bytes containing `key` arrived (or 5 s).
bool read_echo(int fd, char key) {
  auto deadline = Clock::now() + 5s;
  char buf[256];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return false;
    if (std::find(buf, buf + n, key) != buf + n) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv, "terminal_bench [keystrokes=300]");
  const int n = args.count(1, 300);
  signal(SIGPIPE, SIG_IGN);
  pvs::test::SshdFixture sshd;
  pvs::SshConfig cfg;
  cfg.host = sshd.host();
  cfg.port = sshd.port();
  cfg.user = sshd.user();
  cfg.private_key_file = sshd.client_key_path();
  cfg.host_key_fingerprint = sshd.host_key_fingerprint();
  pvs::SshSession ssh(cfg);
  pvs::TerminalOptions o;
  o.command = "cat";
  auto term = pvs::Terminal::open(ssh, o);
  if (!term) {
    std::fprintf(stderr, "terminal: %s\n", term.error().message.c_str());
    return 1;
  }
  auto& t = **term;
  // 1. raw echo through a watcher.
  auto watcher = t.watch(1 << 20);
  std::vector<double> echo, screen, peer;
  for (int i = 0; i < n + 20; ++i) {
    const char key = static_cast<char>('a' + i % 26);
    auto t0 = Clock::now();
    (void)t.write(std::string(1, key));
    bool seen = false;
    while (!seen && ms_since(t0) < 5000) {
      std::string got = watcher->next(5000ms);
      seen = got.find(key) != std::string::npos;
    }
    if (i >= 20) echo.push_back(ms_since(t0));
    if (i % 60 == 59) (void)t.send({pvs::InputItem::key("C-u")});  // keep the line short
  }
  // 2. key -> rendered screen: one 'x' more on a fresh line each time (Enter starts one; cat
  // prints the line back).
  int col = 60;
  for (int i = 0; i < n + 20; ++i) {
    if (col == 60) {
      (void)t.send({pvs::InputItem::key("Enter")});
      t.wait({std::nullopt, 100ms, 2s});
      col = 0;
    }
    ++col;
    pvs::WaitCondition w;
    w.pattern = std::regex("(^|\n)x{" + std::to_string(col) + "}(\n|$)");
    w.timeout = 5s;
    auto t0 = Clock::now();
    (void)t.send({pvs::InputItem::text("x")});
    auto r = t.wait(w);
    if (r.outcome != pvs::WaitOutcome::kMatched) {
      std::fprintf(stderr, "screen: no echo (%s); screen:\n%s\n",
                   std::string(to_string(r.outcome)).c_str(), t.screen().text().c_str());
      return 1;
    }
    if (i >= 20) screen.push_back(ms_since(t0));
  }
  t.close();
  // 3. ssh -tt through a ControlMaster.
  const std::string dir = sshd.dir(), cm = dir + "/term-cm.sock",
                    port = std::to_string(sshd.port());
  const std::vector<std::string> opts = {"-F", "/dev/null",
                                         "-o", "BatchMode=yes",
                                         "-o", "IdentitiesOnly=yes",
                                         "-i", sshd.client_key_path(),
                                         "-o", "UserKnownHostsFile=" + sshd.known_hosts_path(),
                                         "-o", "StrictHostKeyChecking=yes",
                                         "-p", port};
  const std::string target = sshd.user() + "@" + sshd.host();
  int null_fd = open("/dev/null", O_RDWR);
  std::vector<std::string> master = {"ssh", "-M", "-N", "-S", cm};
  master.insert(master.end(), opts.begin(), opts.end());
  master.push_back(target);
  pid_t master_pid = spawn(master, null_fd, null_fd);
  for (int i = 0; i < 500 && access(cm.c_str(), F_OK) != 0; ++i) std::this_thread::sleep_for(10ms);
  int to_ssh[2], from_ssh[2];
  if (pipe(to_ssh) != 0 || pipe(from_ssh) != 0) return 1;
  std::vector<std::string> client = {"ssh", "-tt", "-S", cm};
  client.insert(client.end(), opts.begin(), opts.end());
  client.insert(client.end(), {target, "cat"});
  pid_t client_pid = spawn(client, to_ssh[0], from_ssh[1]);
  close(to_ssh[0]);
  close(from_ssh[1]);
  std::this_thread::sleep_for(300ms);
  for (int i = 0; i < n + 20; ++i) {
    const char key = static_cast<char>('a' + i % 26);
    auto t0 = Clock::now();
    if (write(to_ssh[1], &key, 1) != 1 || !read_echo(from_ssh[0], key)) {
      std::fprintf(stderr, "ssh -tt: no echo\n");
      break;
    }
    if (i >= 20) peer.push_back(ms_since(t0));
    if (i % 60 == 59) {
      char cu = 0x15;  // C-u
      if (write(to_ssh[1], &cu, 1) != 1) break;
    }
  }
  close(to_ssh[1]);
  kill(client_pid, SIGTERM);
  waitpid(client_pid, nullptr, 0);
  kill(master_pid, SIGTERM);
  waitpid(master_pid, nullptr, 0);
  report("keystroke -> echo (Terminal watcher)", echo);
  report("keystroke -> rendered screen (send + wait)", screen);
  report("keystroke -> echo (ssh -tt, ControlMaster)", peer);
  double peer50 = percentile(peer, 0.5);
  if (peer50 > 0) {
    std::printf("ratio p50: echo %.2fx, screen %.2fx of ssh -tt (lower is faster)\n",
                percentile(echo, 0.5) / peer50, percentile(screen, 0.5) / peer50);
  }
  return 0;
}
