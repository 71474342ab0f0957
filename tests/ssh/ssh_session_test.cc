// SshSession against a real OpenSSH sshd started by the test on 127.0.0.1 (tests/support).
#include <dirent.h>
#include <fcntl.h>
#include <libssh2.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pvesandbox/common/unique_fd.h"
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
using test::user_commands;

class SshSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sshd_ = new SshdFixture(); }
  static void TearDownTestSuite() {
    delete sshd_;
    sshd_ = nullptr;
  }

  static SshConfig config() { return test::client_config(*sshd_); }

  static ExecResult run(SshSession& s, const std::string& cmd, ExecOptions o = {}) {
    auto r = s.exec(cmd, std::move(o));
    EXPECT_TRUE(r) << cmd << ": " << r.error().to_string();
    return r ? *r : ExecResult{};
  }

  static SshdFixture* sshd_;
};

SshdFixture* SshSessionTest::sshd_ = nullptr;

// A gate a remote command waits at until the test opens it, so that an interleaving happens by
// construction rather than by a sleep: a FIFO in the user's home that the test holds open
// read-write (opening it never blocks either side, and what the test writes waits in the pipe
// until the remote side reads it).
class Gate {
 public:
  Gate(SshSession& s, std::string path) : path_(std::move(path)) {
    auto r = s.exec("rm -f " + path_ + " && mkfifo " + path_);
    EXPECT_TRUE(r && r->exit_code == 0) << "mkfifo " << path_;
    fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    EXPECT_GE(fd_, 0) << path_;
  }
  ~Gate() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // Shell text that blocks until the gate lets this waiter through.
  std::string wait() const { return "read -r pvs_gate < " + path_; }
  // Lets `n` waiters through (each reads one line); safe from any thread.
  void open(int n = 1) {
    std::string lines(static_cast<std::size_t>(n), '\n');
    EXPECT_EQ(::write(fd_, lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

ExecOptions timeout_opts(std::chrono::milliseconds t) {
  ExecOptions o;
  o.timeout = t;
  return o;
}

UploadOptions upload_opts(std::uint32_t mode, bool create_parents = false, bool atomic = true) {
  UploadOptions o;
  o.mode = mode;
  o.create_parents = create_parents;
  o.atomic = atomic;
  return o;
}

DownloadOptions max_size(std::uint64_t n) {
  DownloadOptions o;
  o.max_size = n;
  return o;
}

int count_dir(const char* path) {
  int n = 0;
  DIR* d = ::opendir(path);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::uint64_t v = rng();
    std::memcpy(s.data() + i, &v, 8);
  }
  return s;
}

std::string local_sha256(const std::string& data) {
  char path[] = "/tmp/pvs-ssh-sum-XXXXXX";
  int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t w = ::write(fd, data.data() + off, data.size() - off);
    if (w <= 0) break;
    off += static_cast<std::size_t>(w);
  }
  ::close(fd);
  std::string out;
  test::run_command({"sha256sum", path}, &out);
  ::unlink(path);
  return out.substr(0, 64);
}

TEST_F(SshSessionTest, ExitCodes) {
  SshSession s(config());
  EXPECT_EQ(run(s, "true").exit_code, 0);
  EXPECT_EQ(run(s, "false").exit_code, 1);
  auto r = run(s, "echo partial; exit 3");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "partial\n");
  EXPECT_TRUE(r.exit_signal.empty());
  EXPECT_FALSE(r.timed_out);
  EXPECT_TRUE(s.is_connected());
}

TEST_F(SshSessionTest, ExitSignal) {
  SshSession s(config());
  auto r = run(s, "kill -TERM $$");
  EXPECT_EQ(r.exit_signal, "TERM");
  EXPECT_EQ(r.exit_code, -1);
}

TEST_F(SshSessionTest, StdoutAndStderrSeparate) {
  SshSession s(config());
  auto r = run(s, "echo out1; echo err1 >&2; echo out2; echo err2 >&2");
  EXPECT_EQ(r.out, "out1\nout2\n");
  EXPECT_EQ(r.err, "err1\nerr2\n");
  // Both streams far beyond the channel window at once: must not deadlock.
  auto big = run(s, "head -c 8000000 /dev/zero >&2 & head -c 8000000 /dev/zero; wait; exit 7");
  EXPECT_EQ(big.exit_code, 7);
  EXPECT_EQ(big.out.size(), 8000000u);
  EXPECT_EQ(big.err.size(), 8000000u);
}

TEST_F(SshSessionTest, StdinIsFedAndClosed) {
  SshSession s(config());
  // No stdin: cat sees EOF at once instead of hanging.
  auto empty = run(s, "cat", timeout_opts(10s));
  EXPECT_EQ(empty.exit_code, 0);
  EXPECT_EQ(empty.out, "");
  EXPECT_FALSE(empty.timed_out);
  ExecOptions o;
  o.stdin_data = "hello\nworld\n";
  EXPECT_EQ(run(s, "cat", o).out, "hello\nworld\n");
  // Binary-safe both ways: every byte value, 6 MiB (more than the channel window).
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  std::string bin;
  while (bin.size() < (6u << 20)) bin += all;
  o.stdin_data = bin;
  auto echo = run(s, "cat", o);
  EXPECT_EQ(echo.out.size(), bin.size());
  EXPECT_TRUE(echo.out == bin);
  // A command that ignores stdin does not hang the writer.
  o.stdin_data = std::string(5 << 20, 'x');
  auto ignore = run(s, "echo done", o);
  EXPECT_EQ(ignore.out, "done\n");
}

TEST_F(SshSessionTest, EnvAndCwd) {
  SshSession s(config());
  ExecOptions o;
  o.env = {{"PVS_A", "x y 'z'"}, {"PVS_B", "$HOME;`id`"}};
  o.cwd = sshd_->home();
  auto r = run(s, "printf '%s|%s|' \"$PVS_A\" \"$PVS_B\"; pwd", o);
  EXPECT_EQ(r.out, "x y 'z'|$HOME;`id`|" + sshd_->home() + "\n");
  ExecOptions missing;
  missing.cwd = "/nonexistent/dir";
  auto m = run(s, "pwd", missing);
  EXPECT_EQ(m.exit_code, 126);
  EXPECT_FALSE(m.err.empty());
  ExecOptions bad;
  bad.env = {{"BAD NAME", "x"}};
  auto b = s.exec("true", bad);
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().ssh, SshErrc::kInvalidArgument);
}

TEST_F(SshSessionTest, TimeoutKillsTheWholeProcessTree) {
  struct stat st {};
  ASSERT_EQ(::stat(sshd_->home().c_str(), &st), 0);
  const uid_t uid = st.st_uid;
  SshSession s(config());
  ExecOptions o;
  o.timeout = 1s;
  auto t0 = std::chrono::steady_clock::now();
  auto r = run(s, "echo started; echo to-err >&2; sh -c 'sleep 1000 & sleep 1000'", o);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.out, "started\n");
  EXPECT_EQ(r.err, "to-err\n");  // the pid marker is not part of the output
  EXPECT_EQ(r.exit_signal, "KILL");
  // The command cannot end by itself, so the timeout ended it (and not before it was due).
  EXPECT_GE(took, 1s);
  // Every sleep of the user is gone (the session and the test user run nothing else).
  EXPECT_TRUE(eventually([&] {
    for (const auto& c : user_commands(uid)) {
      if (c.find("sleep 1000") != std::string::npos) return false;
    }
    return true;
  })) << "a 'sleep 1000' survived the timeout";
  // The session is still fine.
  EXPECT_EQ(run(s, "echo ok").out, "ok\n");
}

TEST_F(SshSessionTest, TimedExecIsExact) {
  SshSession s(config());
  ExecOptions o = timeout_opts(30s);
  o.env = {{"PVS_X", "x"}};
  o.cwd = "/";
  auto r = run(s, "printf 'a\\nb'; printf 'e%s\\n' \"$PVS_X\" >&2; pwd; exit 42", o);
  EXPECT_EQ(r.exit_code, 42);
  EXPECT_EQ(r.out, "a\nb/\n");
  EXPECT_EQ(r.err, "ex\n");
  EXPECT_TRUE(r.exit_signal.empty());
  EXPECT_FALSE(r.timed_out);
  // Signals are reported as without a timeout: the shell's own, and its last command's (which
  // depends on the shell: bash execs the last command, dash 0.5.12 reports 128 + signal).
  auto sig = run(s, "kill -TERM $$", timeout_opts(30s));
  EXPECT_EQ(sig.exit_signal, "TERM");
  EXPECT_EQ(sig.exit_code, -1);
  for (const char* cmd : {"sh -c 'kill -USR1 $$'", "bash -c 'kill -USR1 $$'"}) {
    auto untimed = run(s, cmd);
    auto timed = run(s, cmd, timeout_opts(30s));
    EXPECT_EQ(timed.exit_signal, untimed.exit_signal) << cmd;
    EXPECT_EQ(timed.exit_code, untimed.exit_code) << cmd;
    EXPECT_TRUE(timed.exit_code == 138 || timed.exit_signal == "USR1") << cmd;
  }
  // A `wait` in the command waits for its own jobs only (no guard runs beside it).
  auto waited = run(s, "sleep 0.1 & wait; echo waited", timeout_opts(30s));
  EXPECT_EQ(waited.out, "waited\n");
  EXPECT_FALSE(waited.timed_out);
  // Binary stdout stays exact.
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  ExecOptions in = timeout_opts(30s);
  in.stdin_data = all;
  EXPECT_TRUE(run(s, "cat", in).out == all);
}

TEST_F(SshSessionTest, OutputCapKeepsHeadAndTail) {
  SshSession s(config());
  ExecOptions o;
  o.max_output = 1 << 20;
  o.timeout = 60s;
  auto r = run(s, "echo BEGIN; head -c 209715200 /dev/zero; echo END", o);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.truncated);
  EXPECT_EQ(r.out_total, 209715200u + 10u);
  EXPECT_EQ(r.out.size(), 1u << 20);
  EXPECT_EQ(r.out.substr(0, 6), "BEGIN\n");
  EXPECT_EQ(r.out.substr(r.out.size() - 4), "END\n");
  EXPECT_EQ(r.out[r.out.size() / 2], '\0');
}

TEST_F(SshSessionTest, StreamingCallbackSeesChunksEarly) {
  // The command cannot go on until the callback has seen its first output on both streams:
  // only chunks delivered while it runs let it finish (the timeout only bounds a failure).
  SshSession s(config());
  Gate gate(s, sshd_->home() + "/stream.gate");
  std::mutex mu;
  std::string seen_out, seen_err;
  bool released = false;
  ExecOptions o;
  o.timeout = 60s;
  o.on_output = [&](ExecStream stream, std::string_view data) {
    std::lock_guard<std::mutex> lock(mu);
    (stream == ExecStream::kStdout ? seen_out : seen_err).append(data);
    if (!released && seen_out == "a\n" && seen_err == "e\n") {
      released = true;
      gate.open();
    }
  };
  auto r = run(s, "echo a; echo e >&2; " + gate.wait() + "; echo b", o);
  EXPECT_FALSE(r.timed_out) << "the first chunks only arrived at the end";
  EXPECT_TRUE(released);
  EXPECT_EQ(seen_out, "a\nb\n");
  EXPECT_EQ(seen_err, "e\n");
  EXPECT_EQ(r.out, "a\nb\n");
}

TEST_F(SshSessionTest, ThrowingCallbackDoesNotBreakTheSession) {
  SshSession s(config());
  Gate gate(s, sshd_->home() + "/throw.gate");
  int calls = 0;
  ExecOptions o;
  o.on_output = [&](ExecStream, std::string_view) {
    ++calls;
    gate.open();  // "b" is written only after this call: a later chunk, by construction
    throw std::runtime_error("callback failure");
  };
  auto r = run(s, "echo a; " + gate.wait() + "; echo b", o);
  EXPECT_EQ(r.out, "a\nb\n");
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(run(s, "echo still").out, "still\n");
}

TEST_F(SshSessionTest, ConcurrentExecsDoNotWaitForASlowOne) {
  // The slow one waits at a gate the test opens only after all the others are done; had they
  // waited behind it, they would have finished only after its timeout.
  SshSession s(config());
  ASSERT_TRUE(s.connect());
  Gate gate(s, sshd_->home() + "/slow.gate");
  std::vector<std::future<Result<ExecResult>>> futures;
  for (int i = 0; i < 32; ++i) {
    futures.push_back(i == 16 ? s.exec_async(gate.wait() + "; echo slow", timeout_opts(60s))
                              : s.exec_async("echo " + std::to_string(i)));
  }
  for (int i = 0; i < 32; ++i) {
    if (i == 16) continue;
    auto r = futures[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->out, std::to_string(i) + "\n");
  }
  ASSERT_NE(futures[16].wait_for(0ms), std::future_status::ready)
      << "the others waited behind the slow one";
  gate.open();
  auto slow = futures[16].get();
  ASSERT_TRUE(slow);
  EXPECT_EQ(slow->out, "slow\n");
  // Many threads at once, each calling exec().
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 5; ++k) {
        auto r = s.exec("echo " + std::to_string(i * 10 + k));
        if (r && r->out == std::to_string(i * 10 + k) + "\n") ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 80);
}

TEST_F(SshSessionTest, ExecBurstsSpreadOverAPoolOfConnections) {
  for (int pool : {1, 2, 3}) {
    SshConfig c = config();
    c.exec_connections = pool;
    // TOFU: an extra connection must meet the key the first one trusted.
    c.host_key_policy = HostKeyPolicy::kTrustOnFirstUse;
    c.host_key_fingerprint.clear();
    SshSession s(c);
    ASSERT_TRUE(s.connect());
    EXPECT_EQ(s.stats().exec_connections, 1);
    Gate gate(s, sshd_->home() + "/burst.gate");
    for (int burst = 0; burst < 3; ++burst) {
      // Every exec of the burst waits at the gate, so the burst piles up by construction; each
      // burst opens one more connection (in the background, one at a time) up to `pool`.
      std::vector<std::future<Result<ExecResult>>> futures;
      for (int i = 0; i < 32; ++i) {
        futures.push_back(s.exec_async(gate.wait() + "; echo " + std::to_string(i),
                                       i % 2 ? timeout_opts(30s) : ExecOptions{}));
      }
      const int want = std::min(pool, burst + 2);
      EXPECT_TRUE(eventually([&] { return s.stats().exec_connections >= want; }))
          << "pool " << pool << ", burst " << burst;
      gate.open(32);
      for (int i = 0; i < 32; ++i) {
        auto r = futures[static_cast<std::size_t>(i)].get();
        ASSERT_TRUE(r) << r.error().to_string();
        EXPECT_EQ(r->out, std::to_string(i) + "\n");
        EXPECT_EQ(r->exit_code, 0);
      }
    }
    EXPECT_EQ(s.stats().exec_connections, pool);
    EXPECT_EQ(s.stats().connects, 1u);  // the first connection's count
    // Single execs stay on the first connection and still work after close() + reuse.
    EXPECT_EQ(run(s, "echo one").out, "one\n");
    s.close();
    EXPECT_EQ(s.stats().exec_connections, 1);
    EXPECT_EQ(run(s, "echo again").out, "again\n");
  }
}

TEST_F(SshSessionTest, SftpRoundTrip100MiB) {
  SshSession s(config());
  const std::string data = random_bytes(100u << 20, 42);
  const std::string remote = sshd_->home() + "/big.bin";
  auto up = s.upload(remote, data, upload_opts(0600));
  ASSERT_TRUE(up) << up.error().to_string();
  auto sum = run(s, "sha256sum " + remote);
  EXPECT_EQ(sum.out.substr(0, 64), local_sha256(data));
  auto st = s.stat(remote);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->size, data.size());
  EXPECT_EQ(st->mode & 0777, 0600u);
  EXPECT_TRUE(st->is_regular());
  auto down = s.download(remote);
  ASSERT_TRUE(down) << down.error().to_string();
  EXPECT_EQ(down->size(), data.size());
  EXPECT_TRUE(*down == data) << "downloaded bytes differ";
  std::ostringstream os;
  auto n = s.download(remote, os);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, data.size());
  EXPECT_TRUE(os.str() == data);
  ASSERT_TRUE(s.remove(remote));
}

TEST_F(SshSessionTest, SftpFilesDirectoriesAndErrors) {
  SshSession s(config());
  const std::string base = sshd_->home() + "/tree";
  // Parents are created; the write is atomic and replaces an existing file.
  ASSERT_TRUE(s.upload(base + "/a/b/c.txt", "one", upload_opts(0644, true)));
  UploadOptions synced;
  synced.fsync = true;
  ASSERT_TRUE(s.upload(base + "/a/b/c.txt", "two", synced));
  EXPECT_EQ(*s.download(base + "/a/b/c.txt"), "two");
  std::istringstream in("from a stream");
  ASSERT_TRUE(s.upload(base + "/a/s.txt", in, upload_opts(0640)));
  EXPECT_EQ(*s.download(base + "/a/s.txt"), "from a stream");
  EXPECT_EQ(s.stat(base + "/a/s.txt")->mode & 0777, 0640u);
  // No temporary files left behind.
  auto list = s.list_dir(base + "/a/b");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->entries.size(), 1u);
  EXPECT_FALSE(list->truncated);
  EXPECT_EQ(list->entries[0].name, "c.txt");
  EXPECT_EQ(list->entries[0].attrs.size, 3u);
  auto top = s.list_dir(base + "/a");
  ASSERT_TRUE(top);
  EXPECT_EQ(top->entries.size(), 2u);
  ASSERT_TRUE(s.mkdir(base + "/x/y/z", 0755, true));
  ASSERT_TRUE(s.mkdir(base + "/x/y/z", 0755, true));  // exists: fine with parents
  EXPECT_TRUE(s.stat(base + "/x/y/z")->is_dir());
  // Typed errors.
  auto missing = s.stat(base + "/nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().ssh, SshErrc::kNoSuchFile);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  auto dl = s.download(base + "/nope");
  ASSERT_FALSE(dl);
  EXPECT_EQ(dl.error().ssh, SshErrc::kNoSuchFile);
  auto denied = s.upload("/root/pvs-denied.txt", "x", upload_opts(0644, false, false));
  ASSERT_FALSE(denied);
  EXPECT_EQ(denied.error().ssh, SshErrc::kPermissionDenied);
  auto too_big = s.download(base + "/a/s.txt", max_size(4));
  ASSERT_FALSE(too_big);
  EXPECT_EQ(too_big.error().ssh, SshErrc::kTooLarge);
  auto no_parent = s.upload(base + "/missing/dir/f", "x");
  ASSERT_FALSE(no_parent);
  EXPECT_EQ(no_parent.error().ssh, SshErrc::kNoSuchFile);
}

// A listing is bounded: by entries (in batches, so it reads past one step) and by time.
TEST_F(SshSessionTest, SftpListingStopsAtItsLimits) {
  SshSession s(config());
  const std::string dir = sshd_->home() + "/many";
  auto made = run(s, "mkdir -p " + dir + " && cd " + dir + " && touch $(seq 1 600)");
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto all = s.list_dir(dir);
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->entries.size(), 600u);
  EXPECT_FALSE(all->truncated);
  ListOptions few;
  few.max_entries = 100;
  auto cut = s.list_dir(dir, few);
  ASSERT_TRUE(cut) << cut.error().message;
  EXPECT_EQ(cut->entries.size(), 100u);
  EXPECT_TRUE(cut->truncated);
  ListOptions late;
  late.timeout = std::chrono::milliseconds(0);
  auto timed_out = s.list_dir(dir, late);
  ASSERT_FALSE(timed_out);
  EXPECT_EQ(timed_out.error().ssh, SshErrc::kTimeout);
  few.max_entries = 0;
  EXPECT_EQ(s.list_dir(dir, few).error().ssh, SshErrc::kInvalidArgument);
  // The session is fine afterwards.
  EXPECT_EQ(s.list_dir(dir)->entries.size(), 600u);
}

// A download the sandbox never answers (a FIFO nobody writes: the server's open blocks) ends
// at its timeout; its SFTP instance, left with a request in flight, is discarded, and the
// session's next transfers work.
TEST_F(SshSessionTest, SftpDownloadEndsAtItsTimeout) {
  SshConfig c = config();
  c.max_sftp_channels = 1;  // the next op would have to reuse the stuck instance
  SshSession s(c);
  const std::string fifo = sshd_->home() + "/never.fifo";
  ASSERT_EQ(run(s, "rm -f " + fifo + " && mkfifo " + fifo).exit_code, 0);
  DownloadOptions o;
  o.timeout = std::chrono::milliseconds(500);
  auto r = s.download(fifo, o);  // nobody writes the FIFO: only the timeout can end it
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().ssh, SshErrc::kTimeout) << r.error().message;
  ASSERT_TRUE(s.upload(sshd_->home() + "/after.txt", "after"));
  EXPECT_EQ(*s.download(sshd_->home() + "/after.txt"), "after");
  run(s, "exec 3<>" + fifo);  // lets the stuck sftp-server go
}

TEST_F(SshSessionTest, SftpDiskFull) {
  const std::string mnt = sshd_->dir() + "/small";
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  ASSERT_EQ(test::run_command({"mount", "-t", "tmpfs", "-o", "size=1m,mode=0777", "tmpfs", mnt}),
            0);
  struct Unmount {
    std::string path;
    ~Unmount() { test::run_command({"umount", path}); }
  } unmount{mnt};
  SshSession s(config());
  auto r = s.upload(mnt + "/big", std::string(3u << 20, 'x'));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().ssh, SshErrc::kDiskFull) << r.error().message;
  auto list = s.list_dir(mnt);
  ASSERT_TRUE(list);
  EXPECT_TRUE(list->entries.empty()) << "temporary file left behind";
}

TEST_F(SshSessionTest, HostKeyPolicies) {
  {
    auto c = config();
    c.host_key_fingerprint = "SHA256:" + std::string(43, 'A');
    SshSession s(c);
    auto r = s.exec("true");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kHostKeyMismatch);
    EXPECT_FALSE(s.is_connected());
  }
  {
    auto c = config();
    c.host_key_policy = HostKeyPolicy::kKnownHosts;
    c.known_hosts_file = sshd_->known_hosts_path();
    SshSession s(c);
    EXPECT_TRUE(s.connect());
    EXPECT_EQ(s.host_key_fingerprint(), sshd_->host_key_fingerprint());
  }
  {
    // known_hosts listing a different key for this host:port.
    const std::string other = sshd_->dir() + "/other_known_hosts";
    std::ofstream(other)
        << "[127.0.0.1]:" << sshd_->port()
        << " ssh-ed25519 "
           "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n";
    auto c = config();
    c.host_key_policy = HostKeyPolicy::kKnownHosts;
    c.known_hosts_file = other;
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kHostKeyMismatch);
    // And a file that does not know the host at all.
    std::ofstream(other, std::ios::trunc) << "[127.0.0.1]:1 ssh-ed25519 "
                                             "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabg"
                                             "H5C9okWi0dh2l9GKJl\n";
    SshSession s2(c);
    auto r2 = s2.connect();
    ASSERT_FALSE(r2);
    EXPECT_EQ(r2.error().ssh, SshErrc::kHostKeyUnknown);
  }
  {
    auto c = config();
    c.host_key_policy = HostKeyPolicy::kInsecure;
    c.host_key_fingerprint.clear();
    SshSession s(c);
    EXPECT_TRUE(s.connect());
  }
}

TEST_F(SshSessionTest, TrustOnFirstUseRefusesAChangedKey) {
  const std::string file = sshd_->dir() + "/tofu_known_hosts";
  auto c = config();
  c.host_key_policy = HostKeyPolicy::kTrustOnFirstUse;
  c.host_key_fingerprint.clear();
  SshSession memory(c);  // remembered in the session
  c.known_hosts_file = file;
  SshSession persisted(c);  // remembered in a file
  ASSERT_TRUE(memory.connect());
  ASSERT_TRUE(persisted.connect());
  EXPECT_EQ(memory.host_key_fingerprint(), sshd_->host_key_fingerprint());
  {
    SshSession again(c);  // a new session trusts what the file remembers
    EXPECT_TRUE(again.connect());
  }
  sshd_->stop();
  sshd_->regenerate_host_key();
  sshd_->start();
  auto r1 = memory.exec("true");
  ASSERT_FALSE(r1);
  EXPECT_EQ(r1.error().ssh, SshErrc::kHostKeyMismatch);
  auto r2 = persisted.exec("true");
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().ssh, SshErrc::kHostKeyMismatch);
  SshSession fresh(c);
  auto r3 = fresh.connect();
  ASSERT_FALSE(r3);
  EXPECT_EQ(r3.error().ssh, SshErrc::kHostKeyMismatch);
}

TEST_F(SshSessionTest, AuthenticationErrors) {
  const std::string other = sshd_->dir() + "/other_ed25519";
  ASSERT_EQ(test::run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other}), 0);
  {
    auto c = config();
    c.private_key_file = other;
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kAuthFailed);
  }
  {
    const std::string rsa = sshd_->dir() + "/rsa_key";
    ASSERT_EQ(
        test::run_command({"ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", rsa}), 0);
    auto c = config();
    c.private_key_file = rsa;
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kKeyUnsupported);
    EXPECT_NE(r.error().message.find("ed25519"), std::string::npos);
  }
  {
    auto c = config();
    c.private_key_file.clear();
    c.private_key = sshd_->client_key_text();  // from memory works too
    SshSession s(c);
    EXPECT_TRUE(s.connect());
  }
  {
    auto c = config();
    c.private_key_file = sshd_->dir() + "/does-not-exist";
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kKeyInvalid);
  }
}

TEST_F(SshSessionTest, ConnectErrors) {
  // Refused: a port nobody listens on (bound to reserve it, not listening).
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  {
    auto c = config();
    c.port = ntohs(a.sin_port);
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().ssh, SshErrc::kConnectRefused);
  }
  // Timeout: the port accepts TCP but never speaks SSH.
  ASSERT_EQ(::listen(fd, 4), 0);
  {
    auto c = config();
    c.port = ntohs(a.sin_port);
    c.connect_timeout = 500ms;
    SshSession s(c);
    auto r = s.connect();
    ASSERT_FALSE(r);
    // The peer never speaks: only the timeout can end the connect.
    EXPECT_EQ(r.error().ssh, SshErrc::kConnectTimeout);
  }
  ::close(fd);
}

TEST_F(SshSessionTest, ReconnectsAfterSshdRestart) {
  SshSession s(config());
  EXPECT_EQ(run(s, "echo one").out, "one\n");
  EXPECT_EQ(s.stats().connects, 1u);
  sshd_->restart();
  // The next call notices the dead connection and reconnects transparently.
  EXPECT_EQ(run(s, "echo two").out, "two\n");
  EXPECT_EQ(s.stats().connects, 2u);
  EXPECT_TRUE(s.is_connected());
  // While sshd is down: a clean error, then recovery once it is back.
  sshd_->stop();
  auto down = s.exec("true");
  ASSERT_FALSE(down);
  EXPECT_TRUE(down.error().ssh == SshErrc::kConnectRefused ||
              down.error().ssh == SshErrc::kDisconnected)
      << down.error().to_string();
  sshd_->start();
  EXPECT_EQ(run(s, "echo three").out, "three\n");
  s.close();
  EXPECT_FALSE(s.is_connected());
  EXPECT_EQ(run(s, "echo four").out, "four\n");  // usable after close()
}

TEST_F(SshSessionTest, NoLeakedFdsOrThreads) {
  const int fds0 = count_dir("/proc/self/fd");
  const int threads0 = count_dir("/proc/self/task");
  for (int round = 0; round < 3; ++round) {
    SshSession s(config());
    EXPECT_EQ(run(s, "echo x").out, "x\n");
    ASSERT_TRUE(s.upload(sshd_->home() + "/leak.txt", "data"));
    ASSERT_TRUE(s.download(sshd_->home() + "/leak.txt"));
    ExecOptions o;
    o.timeout = 200ms;
    EXPECT_TRUE(run(s, "sleep 999", o).timed_out);      // only the timeout can end it
    EXPECT_GT(count_dir("/proc/self/task"), threads0);  // the I/O thread runs
  }
  EXPECT_EQ(count_dir("/proc/self/fd"), fds0);
  EXPECT_EQ(count_dir("/proc/self/task"), threads0);
}

TEST_F(SshSessionTest, KeepaliveDoesNotLeak) {
  auto c = config();
  c.keepalive_interval = 2s;
  SshSession s(c);
  ASSERT_TRUE(s.connect());
  EXPECT_EQ(run(s, "true").exit_code, 0);
  // Counted in keepalives sent, not in seconds slept: one to settle, then two more.
  ASSERT_TRUE(eventually([&] { return s.stats().keepalives_sent >= 1; }));
  auto before = s.stats();
  ASSERT_TRUE(eventually([&] { return s.stats().keepalives_sent >= before.keepalives_sent + 2; }));
  auto after = s.stats();
  EXPECT_LE(after.libssh2_live_allocations, before.libssh2_live_allocations)
      << "libssh2 keeps allocating per keepalive (want_reply=1 leak?)";
  EXPECT_EQ(run(s, "echo alive").out, "alive\n");
}

TEST_F(SshSessionTest, CloseFailsRunningCommands) {
  // The command runs (its output arrived) and cannot end until the test opens its gate, which
  // it does only after the exec has failed: close() ended it.
  SshSession s(config());
  Gate gate(s, sshd_->home() + "/close.gate");
  std::promise<void> running;
  bool told = false;
  ExecOptions o;
  o.on_output = [&](ExecStream, std::string_view) {
    if (!told) {
      told = true;
      running.set_value();
    }
  };
  auto f = s.exec_async("echo running; " + gate.wait(), o);
  running.get_future().wait();
  s.close();
  auto r = f.get();
  gate.open();  // lets the remote shell go
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().ssh, SshErrc::kClosed);
}

// A server with a small MaxSessions: the session learns the limit and queues.
TEST(SshSessionLimits, MaxSessionsRefusalIsHandled) {
  test::SshdOptions opts;
  opts.max_sessions = 4;
  SshdFixture sshd(opts);
  SshConfig c = test::client_config(sshd);
  SshSession s(c);
  std::vector<std::future<Result<ExecResult>>> futures;
  for (int i = 0; i < 12; ++i)
    futures.push_back(s.exec_async("sleep 0.2; echo " + std::to_string(i)));
  for (int i = 0; i < 12; ++i) {
    auto r = futures[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->out, std::to_string(i) + "\n");
  }
  EXPECT_EQ(s.stats().channel_limit, 4);
  // SFTP shares the limit.
  ASSERT_TRUE(s.upload(sshd.home() + "/f", "x"));
  EXPECT_EQ(*s.download(sshd.home() + "/f"), "x");
}

// Short commands at a small limit: sshd frees a session after the client has seen its channel
// close, so a closed channel may still count there when the next open arrives, also when the client
// has none open. Those refusals are retried, never returned (the first may come early and learn a
// lower limit).
TEST(SshSessionLimits, ChurnAtTheLimitNeverFails) {
  test::SshdOptions opts;
  opts.max_sessions = 2;
  SshdFixture sshd(opts);
  SshSession s(test::client_config(sshd));
  for (int round = 0; round < 4; ++round) {
    std::vector<std::future<Result<ExecResult>>> futures;
    for (int i = 0; i < 16; ++i) futures.push_back(s.exec_async("echo " + std::to_string(i)));
    for (int i = 0; i < 16; ++i) {
      auto r = futures[static_cast<std::size_t>(i)].get();
      ASSERT_TRUE(r) << "round " << round << ": " << r.error().to_string();
      EXPECT_EQ(r->out, std::to_string(i) + "\n");
    }
  }
  EXPECT_GE(s.stats().channel_limit, 1);
  EXPECT_LE(s.stats().channel_limit, 2);
}

// The ciphers the linked libssh2 has, in its default order.
std::vector<std::string> library_ciphers() {
  LIBSSH2_SESSION* s = libssh2_session_init();
  const char** algs = nullptr;
  int n = libssh2_session_supported_algs(s, LIBSSH2_METHOD_CRYPT_CS, &algs);
  std::vector<std::string> out;
  if (n > 0) out.assign(algs, algs + n);
  if (algs != nullptr) libssh2_free(s, static_cast<void*>(algs));
  libssh2_session_free(s);
  return out;
}

std::string negotiated_cipher(const SshSession& s) {
  const std::string m = s.stats().methods;
  auto at = m.find("cipher=");
  if (at == std::string::npos) return "";
  at += 7;
  return m.substr(at, m.find(' ', at) - at);
}

SshConfig fixture_config(const SshdFixture& sshd) {
  SshConfig c = test::client_config(sshd);
  return c;
}

// OpenSSH's sshd offers chacha20-poly1305 and AES-GCM by default: the client's order decides,
// so a libssh2 that has chacha20-poly1305 (1.11) negotiates it, one without (1.10) its own
// first cipher, as before; SshConfig::prefer_ciphers picks AES-GCM where the library has it.
TEST_F(SshSessionTest, NegotiatesChachaWhereTheLibraryHasItOrWhatIsPreferred) {
  const auto lib = library_ciphers();
  ASSERT_FALSE(lib.empty());
  auto has = [&](const char* m) { return std::find(lib.begin(), lib.end(), m) != lib.end(); };
  SshSession s(config());
  ASSERT_EQ(run(s, "echo ok").out, "ok\n");
  EXPECT_EQ(negotiated_cipher(s),
            has("chacha20-poly1305@openssh.com") ? "chacha20-poly1305@openssh.com" : lib.front())
      << libssh2_version(0) << ": " << s.stats().methods;
  SshConfig c = config();
  c.prefer_ciphers = "aes256-gcm@openssh.com";
  SshSession gcm(c);
  ASSERT_EQ(run(gcm, "echo ok").out, "ok\n");
  EXPECT_EQ(negotiated_cipher(gcm),
            has("aes256-gcm@openssh.com") ? "aes256-gcm@openssh.com" : lib.front())
      << libssh2_version(0) << ": " << gcm.stats().methods;
}

// A server that offers neither chacha20-poly1305 nor AES-GCM: the first of the rest in the
// library's order that it offers,
// and exec and SFTP work as before.
TEST(SshSessionCiphers, ServerWithOnlyAesCtrGetsTheLibraryOrder) {
  test::SshdOptions opts;
  opts.extra_config = "Ciphers aes256-ctr,aes128-ctr\n";
  SshdFixture sshd(opts);
  SshSession s(fixture_config(sshd));
  auto r = s.exec("echo ok");
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->out, "ok\n");
  std::string expected;
  for (const auto& c : library_ciphers()) {
    if (c == "aes256-ctr" || c == "aes128-ctr") {
      expected = c;
      break;
    }
  }
  EXPECT_EQ(negotiated_cipher(s), expected) << s.stats().methods;
  ASSERT_TRUE(s.upload(sshd.home() + "/f", "x"));
  EXPECT_EQ(*s.download(sshd.home() + "/f"), "x");
}

}  // namespace
}  // namespace pvs
