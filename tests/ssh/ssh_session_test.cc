// SshSession's commands against a real OpenSSH sshd: exit codes and signals, streams, stdin,
// timeouts, concurrency over a pool of connections, close, and sshd's session limit.
#include "ssh_session_fixture.h"

namespace pvs {
namespace {

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

// exec_then answers once, on the session's I/O thread (no thread of the caller's waits); a
// command that cannot be sent is answered at once on the caller's thread; a callback that throws
// does not take the session down.
TEST_F(SshSessionTest, ExecThenAnswersOnceOnTheIoThread) {
  SshSession s(config());
  std::promise<std::pair<std::thread::id, Result<ExecResult>>> answered;
  std::atomic<int> calls{0};
  s.exec_then("echo hi", {}, [&](Result<ExecResult> r) {
    if (calls++ == 0) answered.set_value({std::this_thread::get_id(), std::move(r)});
  });
  auto [where, r] = answered.get_future().get();
  ASSERT_TRUE(r) << r.error().to_string();
  EXPECT_EQ(r->out, "hi\n");
  EXPECT_NE(where, std::this_thread::get_id());
  std::optional<Result<ExecResult>> refused;
  s.exec_then(std::string("echo a\0b", 8), {}, [&](Result<ExecResult> got) { refused = got; });
  ASSERT_TRUE(refused.has_value());  // before exec_then returned
  ASSERT_FALSE(*refused);
  EXPECT_EQ(refused->error().ssh, SshErrc::kInvalidArgument);
  std::promise<void> thrown;
  s.exec_then("true", {}, [&](Result<ExecResult>) {
    thrown.set_value();
    throw std::runtime_error("the caller's");
  });
  thrown.get_future().wait();
  auto after = s.exec("echo still");
  ASSERT_TRUE(after) << after.error().to_string();
  EXPECT_EQ(after->out, "still\n");
  EXPECT_EQ(calls.load(), 1);
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

}  // namespace
}  // namespace pvs
