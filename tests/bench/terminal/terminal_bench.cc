// Keystroke latency of a terminal, against OpenSSH in the same run, on a private loopback sshd:
//   1. echo:   Terminal::write one key, until a raw-output watcher sees its echo (what a
//              WebSocket client waits for, minus the WebSocket hop)
//   2. screen: Terminal::send one key, until wait() sees it rendered on the screen (what an
//              agent's input + wait pays, minus HTTP)
//   3. peer:   `ssh -tt` through a running ControlMaster (a session with a pty running `cat`),
//              one key written to its stdin until its echo comes back on its stdout
// Each types into `cat` on a pty (the tty echoes each key at once); p50/p99 and the ratios.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_args.h"
#include "pvesandbox/ssh_session.h"
#include "pvesandbox/terminal.h"
#include "ssh_tt_peer.h"
#include "support/sshd_client.h"
#include "support/sshd_fixture.h"

namespace {

using namespace std::chrono_literals;
using pvs::bench::Clock;
using pvs::bench::ms_since;
using pvs::bench::percentile;
using pvs::bench::report;

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv, "terminal_bench [keystrokes=300]", 1);
  const int n = args.count(1, 300);
  signal(SIGPIPE, SIG_IGN);
  pvs::test::SshdFixture sshd;
  pvs::SshSession ssh(pvs::test::client_config(sshd));
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
  // A letter per line: the finished lines above (typed and printed back) are other letters, so
  // only the line being typed can match (the same letter is 52 rows up, off the screen).
  int col = 60, line = 0;
  for (int i = 0; i < n + 20; ++i) {
    if (col == 60) {
      (void)t.send({pvs::InputItem::key("Enter")});
      t.wait({std::nullopt, 100ms, 2s});
      col = 0;
      ++line;
    }
    ++col;
    const std::string letter(1, static_cast<char>('a' + line % 26));
    pvs::WaitCondition w;
    w.pattern = std::regex("(^|\n)" + letter + "{" + std::to_string(col) + "}(\n|$)");
    w.timeout = 5s;
    auto t0 = Clock::now();
    (void)t.send({pvs::InputItem::text(letter)});
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
  pvs::bench::SshTtPeer ssh_tt({sshd.host(), sshd.port(), sshd.user(), sshd.client_key_path(),
                                sshd.known_hosts_path(), sshd.dir()});
  if (!ssh_tt.ok()) {
    std::fprintf(stderr, "ssh -tt through a ControlMaster did not start\n");
    return 1;
  }
  for (int i = 0; i < n + 20; ++i) {
    const double ms = ssh_tt.type(static_cast<char>('a' + i % 26));
    if (ms < 0) {
      std::fprintf(stderr, "ssh -tt: no echo\n");
      return 1;
    }
    if (i >= 20) peer.push_back(ms);
    if (i % 60 == 59) ssh_tt.clear_line();
  }
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
