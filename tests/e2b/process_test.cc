// The data plane's processes (controller/service/e2b/processes.h) on a real sshd: exec and pty,
// the pid marker, stdin through the FIFO, signals to the process group, late subscribers.
#include "e2b/filesystem/dir_watch.h"
#include "e2b/filesystem/fs_ops.h"
#include "e2b/filesystem/watchers.h"
#include "e2b/processes.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <Poco/JSON/Parser.h>

#include "e2b/base64.h"
#include "e2b/refusing_sandbox.h"
#include "pvesandbox/common/unique_fd.h"
#include "support/sshd_client.h"
#include "support/sshd_fixture.h"

namespace pvs::service::e2b {
namespace {

using namespace std::chrono_literals;

// A Sandbox on a bare SshSession: what the processes use (exec, pty), the rest refused.
class SshSandbox : public RefusingSandbox {
 public:
  explicit SshSandbox(SshConfig c) : ssh_(std::move(c)) {}
  Result<ExecResult> exec(std::string command, ExecOptions options) override {
    return ssh_.exec(std::move(command), std::move(options));
  }
  void exec_then(std::string command, ExecOptions options, ExecDone done) override {
    ssh_.exec_then(std::move(command), std::move(options), std::move(done));
  }
  Result<std::unique_ptr<PtyChannel>> open_pty(PtyOptions options) override {
    return ssh_.open_pty(std::move(options));
  }
  Result<DirListing> list_dir(const std::string& path, const ListOptions& options) override {
    return ssh_.list_dir(path, options);
  }
  Result<SftpAttributes> stat(const std::string& path) override { return ssh_.stat(path); }
  bool is_connected() const override { return ssh_.is_connected(); }

 private:
  SshSession ssh_;
};

struct Collected {
  std::uint32_t pid = 0;
  std::string stdout_text, stderr_text, pty_text;
  std::optional<int> exit_code;
  std::string status;
  std::vector<std::string> raw;
};

Collected collect(EventQueue& q, std::chrono::milliseconds timeout = 20s) {
  Collected c;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    auto m = q.next(200ms);
    if (!m) {
      if (q.finished()) break;
      continue;
    }
    c.raw.push_back(*m);
    auto ev = Poco::JSON::Parser().parse(*m).extract<Poco::JSON::Object::Ptr>()->getObject("event");
    if (auto s = ev->getObject("start")) c.pid = s->getValue<std::uint32_t>("pid");
    if (auto d = ev->getObject("data")) {
      for (auto [name, out] :
           {std::pair{"stdout", &c.stdout_text}, {"stderr", &c.stderr_text}, {"pty", &c.pty_text}})
        if (d->has(name)) *out += base64_decode(d->getValue<std::string>(name)).value_or("?");
    }
    if (auto e = ev->getObject("end")) {
      c.exit_code = e->getValue<int>("exitCode");
      c.status = e->getValue<std::string>("status");
    }
  }
  return c;
}

class ProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sshd_ = new test::SshdFixture();
    sandbox_ = std::make_shared<SshSandbox>(test::client_config(*sshd_));
  }
  static void TearDownTestSuite() {
    sandbox_.reset();
    delete sshd_;
  }
  void SetUp() override { table_ = std::make_shared<ProcessTable>(sandbox_); }
  void TearDown() override { table_->shutdown(); }

  std::shared_ptr<Process> start(std::string script, bool stdin_open = false,
                                 std::optional<PtySize> pty = std::nullopt,
                                 std::shared_ptr<EventQueue> q = nullptr) {
    StartRequest r;
    r.process = {"/bin/sh", {"-c", std::move(script)}, {{"B", "call"}}, std::nullopt};
    r.stdin_open = stdin_open;
    r.pty = pty;
    StartOptions o;
    o.default_env = {{"A", "sandbox"}, {"B", "sandbox"}};
    o.timeout = 30s;
    auto p = table_->start(r, o, q ? q : std::make_shared<EventQueue>());
    EXPECT_TRUE(p) << p.error().message;
    return p ? *p : nullptr;
  }

  static test::SshdFixture* sshd_;
  static std::shared_ptr<SshSandbox> sandbox_;
  std::shared_ptr<ProcessTable> table_;
};
test::SshdFixture* ProcessTest::sshd_ = nullptr;
std::shared_ptr<SshSandbox> ProcessTest::sandbox_;

TEST_F(ProcessTest, OutputExitCodeAndEnvironment) {
  auto q = std::make_shared<EventQueue>();
  auto p = start("echo out $A $B; echo err >&2; exit 3", false, std::nullopt, q);
  ASSERT_TRUE(p);
  auto c = collect(*q);
  EXPECT_GT(c.pid, 0u);
  EXPECT_EQ(c.pid, p->pid());
  EXPECT_EQ(c.stdout_text, "out sandbox call\n");
  EXPECT_EQ(c.stderr_text, "err\n");  // the pid marker is taken out
  EXPECT_EQ(c.exit_code, 3);
  EXPECT_EQ(c.status, "exit status 3");
  ASSERT_FALSE(c.raw.empty());
  EXPECT_NE(c.raw.front().find("\"start\""), std::string::npos);
  EXPECT_NE(c.raw.back().find("\"end\""), std::string::npos);
}

// `bash -l -c CMD` as the E2B SDK sends it, through `table` (default env A=sandbox): stdout.
std::string run_login(ProcessTable& table, const std::string& cmd, bool snapshot = true,
                      std::vector<std::pair<std::string, std::string>> envs = {},
                      bool stdin_open = false, std::optional<int>* exit_code = nullptr) {
  StartRequest r;
  r.process = {"/bin/bash", {"-l", "-c", cmd}, std::move(envs), std::nullopt};
  r.stdin_open = stdin_open;
  StartOptions o;
  o.default_env = {{"A", "sandbox"}};
  o.timeout = 30s;
  o.login_snapshot = snapshot;
  auto q = std::make_shared<EventQueue>();
  auto p = table.start(r, o, q);
  EXPECT_TRUE(p) << p.error().message;
  auto c = collect(*q);
  if (exit_code) *exit_code = c.exit_code;
  return c.stdout_text;
}

// The profile runs once, later commands reuse its environment, a per-command env or a changed
// profile brings the login shell back; the snapshot is the user's alone (home: the user's).
void expect_login_snapshot(ProcessTable& table, const std::string& home) {
  const std::string runs = home + "/profile-runs";
  auto profile = [&](const std::string& value) {
    std::ofstream(home + "/.profile", std::ios::trunc)
        << "echo run >> \"$HOME/profile-runs\"\nexport FROM_PROFILE=" << value << "\n";
  };
  auto run_count = [&] {
    std::ifstream in(runs);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  auto login = [&](const std::string& cmd, bool snapshot = true,
                   std::vector<std::pair<std::string, std::string>> envs = {}) {
    return run_login(table, cmd, snapshot, std::move(envs));
  };
  profile("one");
  EXPECT_EQ(login("echo $FROM_PROFILE $A"), "one sandbox\n");
  EXPECT_EQ(run_count(), 1);
  EXPECT_EQ(login("echo $FROM_PROFILE $A; echo \"$PVS_E2B_LOGIN\""), "one sandbox\n\n");
  EXPECT_EQ(login("echo $FROM_PROFILE $A"), "one sandbox\n");
  EXPECT_EQ(run_count(), 1);  // the profile ran once
  EXPECT_EQ(login("echo $FROM_PROFILE $C", true, {{"C", "x"}}), "one x\n");
  EXPECT_EQ(run_count(), 2);  // a per-command env: a login shell
  EXPECT_EQ(login("echo $FROM_PROFILE", false), "one\n");
  EXPECT_EQ(run_count(), 3);  // snapshots off: a login shell
  profile("two");
  EXPECT_EQ(login("echo $FROM_PROFILE $A"), "two sandbox\n");
  EXPECT_EQ(login("echo $FROM_PROFILE $A"), "two sandbox\n");
  EXPECT_EQ(run_count(), 4);  // changed once, read once
  // The snapshot is the user's alone and keeps nothing of one connection.
  bool found = false;
  for (const auto& e : std::filesystem::directory_iterator(home + "/.cache/pve-sandbox")) {
    found = true;
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text.find("SSH_CONNECTION"), std::string::npos);
    EXPECT_NE(text.find("FROM_PROFILE=\"two\""), std::string::npos);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(std::filesystem::status(home + "/.cache/pve-sandbox").permissions() &
                std::filesystem::perms::others_all,
            std::filesystem::perms::none);
  std::filesystem::remove(home + "/.profile");
}

// A user whose shell is /bin/sh: the command runs in an `exec`ed bash.
TEST_F(ProcessTest, LoginShellsRunFromTheSnapshotUntilAProfileChanges) {
  expect_login_snapshot(*table_, sshd_->home());
}

// A user whose shell is bash (root's in a container): from the snapshot the command runs in
// the shell sshd started, with nothing of the launch script left in it, as bash -c would.
TEST(ProcessBashUserTest, FromTheSnapshotTheCommandRunsInTheUsersBash) {
  test::SshdOptions options;
  options.login_shell = "/bin/bash";
  test::SshdFixture sshd(options);
  auto table =
      std::make_shared<ProcessTable>(std::make_shared<SshSandbox>(test::client_config(sshd)));
  expect_login_snapshot(*table, sshd.home());
  // No second bash: the command's shell is the one sshd started with the launch script.
  EXPECT_EQ(run_login(*table, "tr '\\0' ' ' </proc/$$/cmdline | grep -c '^k=login-'"), "1\n");
  EXPECT_EQ(run_login(*table, "echo \"[$k$n$p]\" $FROM_PROFILE $A; echo \"$0\""),
            "[] two sandbox\n/bin/bash\n");
  std::optional<int> code;
  EXPECT_EQ(run_login(*table, "echo a; false", true, {}, false, &code), "a\n");
  EXPECT_EQ(code, 1);
  EXPECT_EQ(run_login(*table, "exit 7", true, {}, false, &code), "");
  EXPECT_EQ(code, 7);
  EXPECT_EQ(run_login(*table, "f() { echo \"in $1\"; }; f x | tr a-z A-Z", true, {}, true, &code),
            "IN X\n");  // with stdin open: in the FIFO's subshell
  EXPECT_EQ(code, 0);
  table->shutdown();
}

TEST_F(ProcessTest, StdinThroughTheFifoThenEof) {
  auto q = std::make_shared<EventQueue>();
  auto p = start("cat; echo done", true, std::nullopt, q);
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->send_input(*sandbox_, "ping\n", false));
  ASSERT_TRUE(p->send_input(*sandbox_, "pong\n", false));
  ASSERT_TRUE(p->close_stdin(*sandbox_));
  auto late = p->send_input(*sandbox_, "late\n", false);
  ASSERT_FALSE(late) << "input after CloseStdin is refused";
  EXPECT_EQ(late.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(p->close_stdin(*sandbox_)) << "a second close is a no-op";
  auto c = collect(*q);
  EXPECT_EQ(c.stdout_text, "ping\npong\ndone\n");
  EXPECT_EQ(c.exit_code, 0);
  const std::string fifo = stdin_fifo(c.pid);
  auto left = sandbox_->exec("ls " + fifo + " " + fifo + ".close 2>/dev/null", {});
  ASSERT_TRUE(left);
  EXPECT_EQ(left->out, "") << "the FIFOs are removed at the end";
}

TEST_F(ProcessTest, InputWithoutStdinIsRefused) {
  auto p = start("sleep 5");
  ASSERT_TRUE(p);
  auto st = p->send_input(*sandbox_, "x", false);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(p->signal(*sandbox_, 9));
}

TEST_F(ProcessTest, SignalKillsTheGroupAndLateSubscribers) {
  auto p = start("sleep 60 & sleep 60; echo never");
  ASSERT_TRUE(p);
  auto found = table_->find(Selector{p->pid(), std::nullopt});
  EXPECT_EQ(found, p);
  EXPECT_EQ(table_->running().size(), 1u);
  auto late = *p->subscribe();
  auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(p->signal(*sandbox_, 9));
  auto c = collect(*late);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 45s);  // well short of the 60 s sleep
  EXPECT_EQ(c.pid, p->pid());
  EXPECT_EQ(c.exit_code, -1);
  EXPECT_EQ(c.status, "signal: killed");
  EXPECT_EQ(c.stdout_text, "");
  // The sleeps are gone with their group.
  auto rest =
      sandbox_->exec("pgrep -g " + std::to_string(c.pid) + " -f 'sleep 60' || echo none", {});
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->out, "none\n");
  EXPECT_FALSE(table_->find(Selector{c.pid, std::nullopt}));
  auto after = *p->subscribe();  // ended: start and end at once
  auto c2 = collect(*after, 2s);
  EXPECT_EQ(c2.exit_code, -1);
}

// A sandbox killed (E2B kill, REST destroy) while a background command runs: shutdown kills
// the command's group instead of waiting for it to end (it would wait 10 minutes here).
TEST_F(ProcessTest, ShutdownKillsWhatStillRuns) {
  auto q = std::make_shared<EventQueue>();
  auto p = start("sleep 613; echo never", false, std::nullopt, q);
  ASSERT_TRUE(p);
  auto done = std::async(std::launch::async, [this] { table_->shutdown(); });
  ASSERT_EQ(done.wait_for(120s), std::future_status::ready) << "shutdown waited for the command";
  auto c = collect(*q);
  EXPECT_EQ(c.status, "signal: killed");
  auto rest = sandbox_->exec("pgrep -fx 'sleep 613' || echo none", {});
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->out, "none\n");
}

TEST_F(ProcessTest, Pty) {
  auto q = std::make_shared<EventQueue>();
  auto p = start("stty size; read line; echo got:$line", false, PtySize{100, 30}, q);
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->send_input(*sandbox_, "abc\r", true));
  auto c = collect(*q);
  EXPECT_NE(c.pty_text.find("30 100"), std::string::npos) << c.pty_text;
  EXPECT_NE(c.pty_text.find("got:abc"), std::string::npos) << c.pty_text;
  EXPECT_EQ(c.pty_text.find("e2b:"), std::string::npos) << c.pty_text;
  EXPECT_EQ(c.exit_code, 0);
}

TEST_F(ProcessTest, FilesystemCalls) {
  const std::string root = sshd_->home() + "/fs";
  auto made = make_dir(*sandbox_, root + "/a/b");
  ASSERT_TRUE(made.value) << made.error->message;
  EXPECT_EQ(made.value->kind, FileKind::kDirectory);
  EXPECT_EQ(made.value->name, "b");
  EXPECT_EQ(make_dir(*sandbox_, root + "/a/b").error->code, ConnectCode::kAlreadyExists);
  ASSERT_TRUE(sandbox_->exec("printf hello > " + root + "/a/f.txt", {}));
  EXPECT_EQ(make_dir(*sandbox_, root + "/a/f.txt").error->code, ConnectCode::kInvalidArgument);
  auto st = stat_entry(*sandbox_, root + "/a/f.txt");
  ASSERT_TRUE(st.value);
  EXPECT_EQ(st.value->size, 5);
  EXPECT_EQ(st.value->kind, FileKind::kFile);
  EXPECT_EQ(stat_entry(*sandbox_, root + "/none").error->code, ConnectCode::kNotFound);
  auto one = list_entries(*sandbox_, root + "/a", 1);
  ASSERT_TRUE(one.value);
  EXPECT_EQ(one.value->size(), 2u);
  auto two = list_entries(*sandbox_, root, 3);
  ASSERT_TRUE(two.value);
  EXPECT_EQ(two.value->size(), 3u);  // a, a/b, a/f.txt
  EXPECT_EQ(list_entries(*sandbox_, root + "/a/f.txt", 1).error->code,
            ConnectCode::kInvalidArgument);
  auto moved = move(*sandbox_, root + "/a/f.txt", root + "/c/it's.txt");
  ASSERT_TRUE(moved.value) << moved.error->message;
  EXPECT_EQ(moved.value->name, "it's.txt");
  EXPECT_EQ(move(*sandbox_, root + "/a/f.txt", root + "/x").error->code, ConnectCode::kNotFound);
  // The destination is where the entry lands, never a directory it would go into (a move is
  // judged on that path, #46 finding 4): onto a directory, a file's move fails.
  ASSERT_TRUE(sandbox_->exec("mkdir " + root + "/d", {}));
  auto into = move(*sandbox_, root + "/c/it's.txt", root + "/d");
  ASSERT_TRUE(into.error);
  EXPECT_EQ(into.error->code, ConnectCode::kInvalidArgument);
  EXPECT_EQ(stat_entry(*sandbox_, root + "/d/it's.txt").error->code, ConnectCode::kNotFound);
  ASSERT_TRUE(remove(*sandbox_, root).value);
  EXPECT_EQ(remove(*sandbox_, root).error->code, ConnectCode::kNotFound);
  EXPECT_EQ(remove(*sandbox_, "/").error->code, ConnectCode::kInvalidArgument);
}

// DirWatch on the real sshd: what a path that cannot be watched ends with, and a watch that
// is armed before its start event (the file made after it is reported) and ends at stop().
TEST_F(ProcessTest, DirWatchRefusalsAndAnArmedWatch) {
  auto ends_with = [&](const std::string& path) {
    auto q = std::make_shared<EventQueue>();
    auto w = DirWatch::start(sandbox_, {path, false, 20s}, q);
    for (int i = 0; i < 200 && !q->finished(); ++i) q->next(100ms);
    return q->error() ? std::optional<ConnectCode>(q->error()->code) : std::nullopt;
  };
  const std::string dir = sshd_->home() + "/watched";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/file") << "x";
  EXPECT_EQ(ends_with(dir + "/none"), ConnectCode::kNotFound);
  EXPECT_EQ(ends_with(dir + "/file"), ConnectCode::kInvalidArgument);

  auto q = std::make_shared<EventQueue>();
  auto w = DirWatch::start(sandbox_, {dir, false, 20s}, q);
  auto first = q->next(20s);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, watch_start_event());
  std::ofstream(dir + "/new") << "y";
  std::optional<std::string> ev;
  for (int i = 0; i < 100 && !(ev && ev->find("\"new\"") != std::string::npos); ++i)
    ev = q->next(200ms);
  ASSERT_TRUE(ev);
  EXPECT_EQ(*ev, watch_event(WatchEventType::kCreate, "new"));
  w->stop();
  for (int i = 0; i < 100 && !q->finished(); ++i) q->next(100ms);
  EXPECT_TRUE(q->finished());
  EXPECT_FALSE(q->error());  // stopped: no error for a reader that is gone
  std::filesystem::remove_all(dir);
}

// The polled watch on the real sshd: a watcher is armed when create answers, its events are
// held (at most max_events) until taken, what it holds goes when its watch ends, and the end
// is reported once its events are taken; the refusals.
TEST_F(ProcessTest, PolledWatchersHoldEventsUntilTaken) {
  const std::string dir = sshd_->home() + "/polled";
  std::filesystem::create_directories(dir);
  Watchers watchers(sandbox_, {2, 3});
  auto hold = std::make_shared<int>(1);
  std::weak_ptr<int> held = hold;
  auto id = watchers.create({dir, false, 20s}, 20s, std::move(hold));
  ASSERT_TRUE(id.value) << id.error->message;
  EXPECT_EQ(watchers.take(*id.value).value->size(), 0u);  // armed, nothing yet
  for (const char* name : {"a", "b", "c", "d"}) std::ofstream(dir + "/" + name) << "x";
  std::filesystem::remove_all(dir);  // ends the watch, after its events
  for (int i = 0; i < 800 && !held.expired(); ++i) std::this_thread::sleep_for(25ms);
  ASSERT_TRUE(held.expired());
  auto got = watchers.take(*id.value);
  ASSERT_TRUE(got.value) << got.error->message;
  ASSERT_EQ(got.value->size(), 3u);  // held at most 3: the later ones were dropped
  EXPECT_EQ((*got.value)[0].type, WatchEventType::kCreate);
  EXPECT_EQ((*got.value)[0].name, "a");
  EXPECT_EQ((*got.value)[1].type, WatchEventType::kWrite);
  EXPECT_EQ(watchers.take(*id.value).error->code, ConnectCode::kFailedPrecondition);

  std::filesystem::create_directories(dir);
  auto second = watchers.create({dir, true, 20s}, 20s);
  ASSERT_TRUE(second.value) << second.error->message;
  EXPECT_EQ(watchers.create({dir, false, 20s}, 20s).error->code, ConnectCode::kResourceExhausted);
  EXPECT_TRUE(watchers.remove(*id.value).value);
  EXPECT_EQ(watchers.remove(*id.value).error->code, ConnectCode::kNotFound);
  EXPECT_EQ(watchers.take(*id.value).error->code, ConnectCode::kNotFound);
  EXPECT_EQ(watchers.create({dir + "/none", false, 20s}, 20s).error->code, ConnectCode::kNotFound);
  std::filesystem::create_directories(dir + "/sub");
  std::vector<WatchEvent> seen;
  for (int i = 0; i < 400 && seen.empty(); ++i) {
    auto more = watchers.take(*second.value);
    ASSERT_TRUE(more.value) << more.error->message;
    seen = *more.value;
    if (seen.empty()) std::this_thread::sleep_for(25ms);
  }
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen[0].name, "sub");
  watchers.stop_all();
  EXPECT_EQ(watchers.size(), 0u);
  std::filesystem::remove_all(dir);
}

TEST(ProcessScript, Shapes) {
  ProcessConfig c{"/bin/bash", {"-l", "-c", "echo 'x'"}, {}, std::nullopt};
  std::string plain = process_script(c, false);
  EXPECT_NE(plain.find("exec '/bin/bash' '-l' '-c' 'echo '\\''x'\\'''"), std::string::npos)
      << plain;
  std::string with_stdin = process_script(c, true);
  EXPECT_NE(with_stdin.find("mkfifo -m 600"), std::string::npos);
  EXPECT_NE(with_stdin.find("(read -r _ <&4)"), std::string::npos) << with_stdin;
  EXPECT_EQ(with_stdin.find("trap"), std::string::npos) << "the waiting shell takes no signal";
  EXPECT_EQ(stdin_fifo(42), "/tmp/.pvs-e2b-stdin-42");
  std::string login = process_script(c, false, login_key({{"A", "1"}}));
  EXPECT_NE(login.find("-c '. \"$PVS_E2B_LOGIN\""), std::string::npos) << login;
  EXPECT_NE(login.find("exec '/bin/bash' -l -c"), std::string::npos) << login;
  EXPECT_NE(login_key({{"A", "1"}}), login_key({{"A", "2"}}));
  c.envs = {{"B", "2"}};  // a per-command env: always the login shell itself
  EXPECT_EQ(process_script(c, false, login_key({})).find("PVS_E2B_LOGIN"), std::string::npos);
}

// The earliest a close can come is as soon as the controller has the pid: while the shell is
// still writing the marker. Its stderr here is a full pipe, so it blocks in that write; the
// input and the close (a line on the close FIFO, as CloseStdin writes it) are sent then, and
// the pipe drained after. The command must still read the input, then EOF, and its exit
// status is the command's own.
std::string cat_closed_at_the_marker(const std::string& shell) {
  int err[2], out[2];
  if (::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return "pipe failed";
  UniqueFd err_r(err[0]), err_w(err[1]), out_r(out[0]), out_w(out[1]);
  ::fcntl(err[1], F_SETFL, O_NONBLOCK);
  const std::string fill(4096, 'x');
  while (::write(err[1], fill.data(), fill.size()) > 0) {
  }
  ::fcntl(err[1], F_SETFL, 0);
  const std::string script =
      process_script({"/bin/sh", {"-c", "cat; echo done"}, {}, std::nullopt}, true);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group, to kill at the end
  std::vector<char*> argv{const_cast<char*>(shell.c_str()), const_cast<char*>("-c"),
                          const_cast<char*>(script.c_str()), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, shell.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return "spawn failed";
  err_w.reset();
  out_w.reset();
  auto blocked_in_write = [&] {
    std::ifstream w("/proc/" + std::to_string(pid) + "/wchan");
    std::string s;
    std::getline(w, s);
    return s.find("pipe_write") != std::string::npos;
  };
  for (int i = 0; i < 10000 && !blocked_in_write(); ++i) std::this_thread::sleep_for(1ms);
  if (!blocked_in_write()) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return "the shell did not block in writing its marker";
  }
  const std::string fifo = stdin_fifo(static_cast<std::uint32_t>(pid));
  std::ofstream(fifo) << "ping\n";
  std::ofstream(fifo + ".close") << "\n";
  std::string marker = "\036e2b:" + std::to_string(pid) + "\036", seen;
  char buf[4096];
  ssize_t n;
  while (seen.find(marker) == std::string::npos && (n = ::read(err[0], buf, sizeof buf)) > 0)
    seen.append(buf, static_cast<std::size_t>(n));
  int status = 0;
  for (int i = 0; i < 10000 && ::waitpid(pid, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(1ms);
  ::kill(-pid, SIGKILL);  // what is left, when the command hung
  ::waitpid(pid, &status, 0);
  std::filesystem::remove(fifo);  // a killed one's
  std::filesystem::remove(fifo + ".close");
  std::string got;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<std::size_t>(n));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) got += "(not exit 0)";
  return got;
}

TEST(ProcessScript, InputAndACloseAsEarlyAsTheMarkerAreKept) {
  for (const char* shell : {"/bin/sh", "/bin/bash"})
    EXPECT_EQ(cat_closed_at_the_marker(shell), "ping\ndone\n") << shell;
}

}  // namespace
}  // namespace pvs::service::e2b
