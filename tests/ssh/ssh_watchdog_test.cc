// The session's watchdog (controller/src/ssh/ssh_watchdog.cc, docs/ssh.md): its script run by
// the machine's /bin/sh on processes the test starts, and SshSession's use of it against a real
// OpenSSH sshd (tests/support).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pvesandbox/ssh_session.h"
#include "support/eventually.h"
#include "support/sshd_client.h"
#include "support/sshd_fixture.h"
#include "support/user_procs.h"

namespace pvs {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using test::SshdFixture;

constexpr const char* kWatchdog = "pve-sandbox: the session's watchdog";

// A child of the test that sleeps; `leader`: in a process group of its own (as a login shell
// under sshd), else in the test's.
pid_t sleeper(bool leader) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (leader) ::setsid();
    ::execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// True if `pid` (a child) has ended by now: reaped, and `*signal` set to what killed it.
bool ended(pid_t pid, int* signal) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return false;
  *signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return true;
}

// The script, run by /bin/sh with `lines` as its input, which then ends (the "connection").
struct Script {
  explicit Script(const std::string& lines) {
    int in[2], out[2];
    EXPECT_EQ(::pipe(in), 0);
    EXPECT_EQ(::pipe(out), 0);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      const std::string script(ssh_detail::session_watchdog_script());
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    answers = out[0];
    EXPECT_EQ(::write(in[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
    ::close(in[1]);
  }
  ~Script() { ::close(answers); }
  // What it printed, up to its end.
  std::string printed() const {
    std::string all;
    char buf[256];
    for (ssize_t n; (n = ::read(answers, buf, sizeof buf)) > 0;) all.append(buf, n);
    return all;
  }
  pid_t pid = -1;
  int answers = -1;
};

// After EOF the script kills a registered group whose leader outlives its guard, and nothing
// else: not a group let go ("- PGID"), not a process that leads no group, not a group before
// its guard; it exits once nothing is left to guard. It answers "+" to each registration it
// holds (the session counts those as watched), none to a process that leads no group.
TEST(WatchdogScript, KillsWhatOutlivesItsGuardAfterEofAndNothingElse) {
  const pid_t due = sleeper(true), let_go = sleeper(true), later = sleeper(true);
  const pid_t member = sleeper(false);
  // Each leader has run setsid before it is registered (its start time is read then).
  ASSERT_TRUE(eventually([&] { return ::getpgid(due) == due && ::getpgid(let_go) == let_go; }));
  ASSERT_TRUE(eventually([&] { return ::getpgid(later) == later; }));
  Script script("+ " + std::to_string(due) + " 1\n+ " + std::to_string(let_go) + " 1\n- " +
                std::to_string(let_go) + "\n+ " + std::to_string(member) + " 1\n+ " +
                std::to_string(later) + " 3600\n");
  int signal = 0;
  ASSERT_TRUE(eventually([&] { return ended(due, &signal); })) << "the due group lives on";
  EXPECT_EQ(signal, SIGKILL);
  EXPECT_FALSE(ended(let_go, &signal));
  EXPECT_FALSE(ended(member, &signal));
  EXPECT_FALSE(ended(later, &signal));
  EXPECT_FALSE(ended(script.pid, &signal)) << "it still guards `later`";
  // `later` ends by itself: nothing is left to guard, and the script ends.
  ::kill(later, SIGTERM);
  ASSERT_TRUE(eventually([&] { return ended(later, &signal); }));
  ASSERT_TRUE(eventually([&] { return ended(script.pid, &signal); }));
  EXPECT_EQ(signal, 0);
  EXPECT_EQ(script.printed(), "+\n+\n+\n");
  for (pid_t p : {let_go, member}) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
}

class SshWatchdogTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sshd_ = new SshdFixture(); }
  static void TearDownTestSuite() {
    delete sshd_;
    sshd_ = nullptr;
  }
  static SshConfig config() { return test::client_config(*sshd_); }
  static uid_t uid() { return test::home_uid(sshd_->home()); }
  static ExecOptions timed(std::chrono::milliseconds t) {
    ExecOptions o;
    o.timeout = t;
    return o;
  }
  static SshdFixture* sshd_;
};

SshdFixture* SshWatchdogTest::sshd_ = nullptr;

// Timed commands that run long enough to be registered share their connection's one
// watchdog; nothing runs beside a command, so nothing is left once it returns; the watchdog
// ends with the connection when it guards nothing.
TEST_F(SshWatchdogTest, TimedCommandsShareOneWatchdogAndLeaveNothing) {
  SshConfig c = config();
  c.exec_connections = 1;
  auto s = std::make_unique<SshSession>(c);
  for (int i = 0; i < 3; ++i) {
    auto r = s->exec("sleep 0.2; echo " + std::to_string(i), timed(30s));
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->out, std::to_string(i) + "\n");
  }
  std::vector<std::future<Result<ExecResult>>> burst;
  for (int i = 0; i < 6; ++i) burst.push_back(s->exec_async("sleep 0.2", timed(30s)));
  for (auto& f : burst) EXPECT_TRUE(f.get());
  // One whose registration had not gone out when it ended is never registered.
  EXPECT_TRUE(eventually([&] { return s->stats().watched >= 1; }));
  EXPECT_LE(s->stats().watched, 9u);
  EXPECT_EQ(test::user_commands_matching(uid(), {kWatchdog}).size(), 1u)
      << test::user_commands_matching(uid(), {kWatchdog}).size() << " watchdogs";
  for (const auto& cmd : test::user_commands(uid())) {  // sshd's own: "sshd:", "sshd-session:"
    const bool expected = cmd.find(kWatchdog) != std::string::npos || cmd.starts_with("sshd");
    EXPECT_TRUE(expected) << "left behind: " << cmd;
  }
  s->close();
  EXPECT_TRUE(test::wait_until_gone(uid(), {kWatchdog}, 10s));
}

// A timed command is registered only once it has run 50 ms (ssh_exec.cc, kWatchAfter): short
// ones send nothing but their pid marker, and a connection that only ran short ones has no
// watchdog. How many ran that long depends on the machine: those that did are counted (a
// command's duration includes its wait for a channel, so it is at least its run).
TEST_F(SshWatchdogTest, ShortTimedCommandsAreNeverRegistered) {
  ASSERT_TRUE(test::wait_until_gone(uid(), {kWatchdog}, 10s));
  SshConfig c = config();
  c.exec_connections = 1;
  SshSession s(c);
  unsigned long long longer = 0;
  for (int i = 0; i < 20; ++i) {
    auto r = s.exec("true", timed(30s));
    ASSERT_TRUE(r) << r.error().to_string();
    longer += r->duration >= 50ms ? 1 : 0;
  }
  EXPECT_LT(longer, 20u) << "no `true` ended within 50 ms: nothing was shown";
  if (longer == 0) {
    EXPECT_TRUE(test::user_commands_matching(uid(), {kWatchdog}).empty())
        << "a watchdog started for commands that never needed one";
  }
  // One that runs longer is registered; the watchdog answers in order, so once its answer is
  // in, every earlier registration's is too.
  ASSERT_TRUE(s.exec("sleep 0.2", timed(30s)));
  ASSERT_TRUE(eventually([&] { return s.stats().watched >= 1; }));
  EXPECT_LE(s.stats().watched, longer + 1);
}

// A watchdog that gave its channel up to a waiting command, with a registration it never sent,
// starts again when a command's channel is freed: the long command is guarded while it runs.
TEST_F(SshWatchdogTest, ARegistrationOutlivesAWatchdogThatGaveWay) {
  SshConfig c = config();
  c.max_channels = 2;
  c.spare_channels = 0;
  c.exec_connections = 1;
  SshSession s(c);
  std::promise<void> a_started, c_started;
  auto when = [](std::promise<void>& p) {
    auto told = std::make_shared<bool>(false);
    ExecOptions o = timed(30s);
    o.on_output = [&p, told](ExecStream, std::string_view) {
      if (!std::exchange(*told, true)) p.set_value();
    };
    return o;
  };
  auto a = s.exec_async("echo a; sleep 60", when(a_started));
  auto c2 = s.exec_async("echo c; sleep 1", when(c_started));
  a_started.get_future().wait();
  c_started.get_future().wait();
  // Both are registered by now and the watchdog waits for a channel; the next command waits
  // too and makes it give way.
  std::this_thread::sleep_for(200ms);
  auto b = s.exec_async("echo b");
  EXPECT_TRUE(c2.get());
  EXPECT_TRUE(b.get());
  EXPECT_TRUE(eventually([&] { return s.stats().watched >= 1; }, 10s))
      << "the long command was left unguarded";
  EXPECT_EQ(a.wait_for(0s), std::future_status::timeout);
  s.close();  // its sleep goes with the test's user
  EXPECT_FALSE(a.get());
}

TEST_F(SshWatchdogTest, KillsTheGroupWhenTheControllerIsGone) {
  std::promise<void> started;
  bool told = false;
  auto s = std::make_unique<SshSession>(config());
  ExecOptions o = timed(1s);
  o.on_output = [&](ExecStream, std::string_view d) {
    if (!told && d.find("started") != std::string_view::npos) {
      told = true;
      started.set_value();
    }
  };
  auto f = s->exec_async("echo started; sh -c 'sleep 1001 & sleep 1001'", o);
  started.get_future().wait();
  // The watchdog answered: it holds the registration (sshd drops what it has not yet passed on
  // when the connection ends, so an unanswered one may never have reached it).
  ASSERT_TRUE(eventually([&] { return s->stats().watched >= 1; }));
  // The controller "dies": the connection goes away without the timeout's kill.
  s->close();
  auto r = f.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().ssh, SshErrc::kClosed);
  s.reset();
  std::this_thread::sleep_for(1500ms);  // past the timeout: nobody killed them yet
  int sleeps = 0;
  for (const auto& cmd : test::user_commands(uid())) {
    sleeps += cmd.rfind("sleep 1001", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(sleeps, 2);
  // The guard (timeout + 10 s after the start, polling each second) kills the whole group;
  // the margin is for a loaded CI machine (sanitizers, parallel tests).
  EXPECT_TRUE(test::wait_until_gone(uid(), {"sleep 1001"}, 25s)) << "the guard did not fire";
  EXPECT_TRUE(test::wait_until_gone(uid(), {kWatchdog}, 5s)) << "the watchdog did not end";
}

// A connection that drops while only the watchdog runs on it is noticed (a hot pool's idle
// member whose container stopped must not look connected).
TEST_F(SshWatchdogTest, ADropWhileOnlyTheWatchdogRunsIsNoticed) {
  SshConfig c = config();
  c.exec_connections = 1;
  c.spare_channels = 0;
  SshSession s(c);
  auto r = s.exec("sleep 0.2", timed(30s));  // registered: long enough for the round trip
  ASSERT_TRUE(r) << r.error().to_string();
  ASSERT_TRUE(eventually([&] { return s.stats().watched >= 1; }));
  ASSERT_TRUE(s.is_connected());
  for (const auto& [pid, cmd] : test::user_processes(uid())) {
    if (cmd.starts_with("sshd")) ::kill(pid, SIGKILL);  // the connection's sshd session
  }
  EXPECT_TRUE(eventually([&] { return !s.is_connected(); }, 10s)) << "the drop went unnoticed";
}

// At a channel limit of one the watchdog never keeps a command from its channel: it waits, or
// gives its channel up to the next command.
TEST_F(SshWatchdogTest, GivesWayAtTheChannelLimit) {
  for (int limit : {1, 2}) {
    SshConfig c = config();
    c.max_channels = limit;
    c.spare_channels = 0;
    c.exec_connections = 1;
    SshSession s(c);
    std::vector<std::future<Result<ExecResult>>> runs;
    // Each runs past the 50 ms after which it is registered: the watchdog wants a channel.
    for (int i = 0; i < 6; ++i) runs.push_back(s.exec_async("sleep 0.1; echo ok", timed(30s)));
    for (auto& f : runs) {
      ASSERT_EQ(f.wait_for(30s), std::future_status::ready) << "limit " << limit;
      auto r = f.get();
      ASSERT_TRUE(r) << r.error().to_string();
      EXPECT_EQ(r->out, "ok\n");
    }
    auto again = s.exec("echo again", timed(30s));
    ASSERT_TRUE(again) << again.error().to_string();
    EXPECT_EQ(again->out, "again\n");
  }
}

}  // namespace
}  // namespace pvs
