// Terminal on a real sshd: a shell, keys, resize, a full-screen editor, hang-up.
#include "pvesandbox/terminal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "pvesandbox/ssh_session.h"
#include "support/sshd_fixture.h"

namespace pvs {
namespace {

using namespace std::chrono_literals;
using test::SshdFixture;

using In = TerminalInput;

class TerminalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { sshd_ = new SshdFixture(); }
  static void TearDownTestSuite() {
    delete sshd_;
    sshd_ = nullptr;
  }

  void SetUp() override {
    SshConfig c;
    c.host = sshd_->host();
    c.port = sshd_->port();
    c.user = sshd_->user();
    c.private_key_file = sshd_->client_key_path();
    c.host_key_fingerprint = sshd_->host_key_fingerprint();
    c.connect_timeout = 5s;
    ssh_ = std::make_unique<SshSession>(c);
  }

  std::unique_ptr<Terminal> open(TerminalOptions o = {}) {
    auto t = Terminal::open(*ssh_, std::move(o));
    EXPECT_TRUE(t) << t.error().to_string();
    return t ? std::move(*t) : nullptr;
  }

  static TerminalWaitResult wait_for(Terminal& t, const std::string& pattern,
                                     std::chrono::milliseconds timeout = 10s) {
    auto r = t.wait({.pattern = pattern, .timeout = timeout});
    EXPECT_TRUE(r) << r.error().to_string();
    if (!r) return {};
    std::string shown;
    for (const auto& l : r->screen.lines) shown += l + "\n";
    EXPECT_TRUE(r->matched) << "waiting for /" << pattern << "/, the screen:\n" << shown;
    return *r;
  }

  // Waits until output has been quiet for a moment (the shell is at its prompt): input typed
  // earlier would be echoed ahead of the prompt.
  static void settle(Terminal& t) {
    auto r = t.wait({.pattern = "", .quiet = 200ms, .timeout = 10s});
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->quiet);
  }

  std::string exec(const std::string& cmd) {
    auto r = ssh_->exec(cmd);
    EXPECT_TRUE(r) << r.error().to_string();
    return r ? r->out : std::string();
  }

  static SshdFixture* sshd_;
  std::unique_ptr<SshSession> ssh_;
};

SshdFixture* TerminalTest::sshd_ = nullptr;

TEST_F(TerminalTest, ShellEchoesAndRuns) {
  auto t = open();
  ASSERT_TRUE(t);
  settle(*t);
  ASSERT_TRUE(t->input({In::text("echo h\"\"i"), In::key("Enter")}));
  auto r = wait_for(*t, "^hi$");
  EXPECT_FALSE(r.screen.alt_screen);
  // The typed line is echoed as typed, the output below it.
  std::string all;
  for (const auto& l : r.screen.lines) all += l + "\n";
  EXPECT_NE(all.find("$ echo h\"\"i\nhi\n"), std::string::npos) << all;
  ASSERT_TRUE(t->input({In::key("C-d")}));
  auto end = t->wait({.pattern = "", .timeout = 10s});
  ASSERT_TRUE(end);
  EXPECT_TRUE(end->exited);
  EXPECT_EQ(t->exit_code(), 0);
}

TEST_F(TerminalTest, CommandEnvTitleAndExitStatus) {
  TerminalOptions o;
  o.command = "printf '\\033]0;my title\\007'; echo \"[$FOO] $TERM\"; pwd; exit 3";
  o.env = {{"FOO", "bar baz"}};
  o.cwd = "/tmp";
  auto t = open(o);
  ASSERT_TRUE(t);
  auto r = t->wait({.pattern = "", .timeout = 10s});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->exited);
  EXPECT_EQ(t->exit_code(), 3);
  EXPECT_EQ(r->screen.title, "my title");
  ASSERT_GE(r->screen.lines.size(), 2u);
  EXPECT_EQ(r->screen.lines[0], "[bar baz] xterm-256color");
  EXPECT_EQ(r->screen.lines[1], "/tmp");
  EXPECT_FALSE(t->input({In::text("x")}));
}

TEST_F(TerminalTest, CtrlCInterruptsSleep) {
  auto t = open();
  ASSERT_TRUE(t);
  settle(*t);
  ASSERT_TRUE(t->input({In::text("sleep 100"), In::key("Enter")}));
  wait_for(*t, "sleep 100");
  std::this_thread::sleep_for(300ms);  // let sleep start
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(t->input({In::key("C-c")}));
  settle(*t);
  ASSERT_TRUE(t->input({In::text("echo after-$?"), In::key("Enter")}));
  wait_for(*t, "^after-130$");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(TerminalTest, ResizeIsSeenBySttySize) {
  TerminalOptions o;
  o.rows = 24;
  o.cols = 80;
  auto t = open(o);
  ASSERT_TRUE(t);
  settle(*t);
  ASSERT_TRUE(t->input({In::text("stty size"), In::key("Enter")}));
  wait_for(*t, "^24 80$");
  ASSERT_TRUE(t->resize(30, 100));
  EXPECT_EQ(t->screen().rows, 30);
  EXPECT_EQ(t->screen().cols, 100);
  settle(*t);
  ASSERT_TRUE(t->input({In::text("stty size"), In::key("Enter")}));
  wait_for(*t, "^30 100$");
  EXPECT_FALSE(t->resize(0, 10));
}

TEST_F(TerminalTest, ViEditsAFileThroughInputAndScreen) {
  ASSERT_EQ(test::run_command({"sh", "-c", "command -v vi"}), 0) << "vi is needed for this test";
  std::string file = sshd_->home() + "/note.txt";
  TerminalOptions o;
  o.command = "vi " + file;
  o.rows = 20;
  o.cols = 60;
  auto t = open(o);
  ASSERT_TRUE(t);
  // vi draws its empty buffer: '~' on the lines past the end.
  auto r = wait_for(*t, "^~");
  EXPECT_FALSE(r.screen.lines.empty());
  ASSERT_TRUE(t->input(
      {In::text("ihello from vi"), In::key("Enter"), In::text("second line"), In::key("Escape")}));
  r = wait_for(*t, "^second line$");
  EXPECT_EQ(r.screen.lines[0], "hello from vi");
  // Fix a typo the way a person would: go up, to the end, delete a word, retype it.
  ASSERT_TRUE(t->input({In::key("Up"), In::text("$bcwVI"), In::key("Escape")}));
  wait_for(*t, "^hello from VI$");
  ASSERT_TRUE(t->input({In::text(":wq"), In::key("Enter")}));
  auto end = t->wait({.pattern = "", .timeout = 10s});
  ASSERT_TRUE(end);
  EXPECT_TRUE(end->exited);
  EXPECT_EQ(t->exit_code(), 0);
  EXPECT_EQ(exec("cat " + file), "hello from VI\nsecond line\n");
}

TEST_F(TerminalTest, CloseHangsUpTheSession) {
  auto t = open();
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->input({In::text("sleep 4242"), In::key("Enter")}));
  wait_for(*t, "sleep 4242");
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(exec("pgrep -f 'sleep [4]242' >/dev/null && echo running"), "running\n");
  auto start = std::chrono::steady_clock::now();
  t->close();
  EXPECT_TRUE(t->exited());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  std::string left = "running\n";
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    std::this_thread::sleep_for(100ms);
    left = exec("pgrep -f 'sleep [4]242' >/dev/null && echo running");
  }
  EXPECT_EQ(left, "");
  EXPECT_FALSE(t->input({In::text("x")}));
}

TEST_F(TerminalTest, WaitForQuietAndBadInput) {
  auto t = open();
  ASSERT_TRUE(t);
  auto q = t->wait({.pattern = "", .quiet = 300ms, .timeout = 10s});
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->quiet);
  EXPECT_FALSE(q->matched);
  auto bad = t->input({In::text("echo x"), In::key("Nope")});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  auto bad_re = t->wait({.pattern = "(", .timeout = 1s});
  ASSERT_FALSE(bad_re);
  EXPECT_EQ(bad_re.error().code, ErrorCode::kInvalidArgument);
  auto timed = t->wait({.pattern = "never-shown", .timeout = 200ms});
  ASSERT_TRUE(timed);
  EXPECT_TRUE(timed->timed_out);
  // Nothing of the refused input was sent.
  EXPECT_EQ(t->screen().lines[0].find("echo x"), std::string::npos);
}

}  // namespace
}  // namespace pvs
