// Terminals on a real OpenSSH sshd (tests/support/sshd_fixture): a shell, vi, less, C-c,
// resize, exit codes, hang-up; driven only through input, screen and wait as an agent would.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "pvesandbox/ssh_session.h"
#include "pvesandbox/terminal.h"
#include "support/sshd_client.h"
#include "support/sshd_fixture.h"

namespace pvs {
namespace {

using namespace std::chrono_literals;

// A line that is only the shell's prompt (dash: "$ ").
const std::string kPrompt = "(^|\n)\\$ ?(\n|$)";

class TerminalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sshd_ = new test::SshdFixture();
    SshConfig c = test::client_config(*sshd_);
    c.max_channels = 60;  // 50 terminals at once (the fixture's sshd allows 64)
    ssh_ = new SshSession(c);
  }
  static void TearDownTestSuite() {
    delete ssh_;
    delete sshd_;
  }

  static std::shared_ptr<Terminal> open(const std::string& command, int cols = 80, int rows = 24) {
    TerminalOptions o;
    o.command = command;
    o.cols = cols;
    o.rows = rows;
    o.cwd = sshd_->home();
    auto t = Terminal::open(*ssh_, o);
    EXPECT_TRUE(t) << t.error().to_string();
    return t ? *t : nullptr;
  }
  // Waits for `pattern` on the screen; fails the test with the screen otherwise.
  static void expect_screen(Terminal& t, const std::string& pattern,
                            std::chrono::milliseconds timeout = 10s) {
    WaitCondition w;
    w.pattern = std::regex(pattern, std::regex::ECMAScript | std::regex::multiline);
    w.timeout = timeout;
    auto r = t.wait(w);
    EXPECT_EQ(r.outcome, WaitOutcome::kMatched)
        << "waiting for /" << pattern << "/ got " << to_string(r.outcome) << "; screen:\n"
        << t.screen().text();
  }
  static void type(Terminal& t, std::vector<InputItem> items) {
    auto st = t.send(items);
    ASSERT_TRUE(st) << st.error().message;
  }
  static std::string exec(const std::string& cmd) {
    auto r = ssh_->exec(cmd);
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->out : "";
  }

  static test::SshdFixture* sshd_;
  static SshSession* ssh_;
};

test::SshdFixture* TerminalTest::sshd_ = nullptr;
SshSession* TerminalTest::ssh_ = nullptr;

TEST_F(TerminalTest, LoginShellRunsCommandsAndKeepsScrollback) {
  auto t = open("", 60, 5);
  ASSERT_TRUE(t);
  expect_screen(*t, kPrompt);
  type(*t, {InputItem::text("for i in 1 2 3 4 5 6 7 8; do echo row$i; done; echo sum=$((40+2))"),
            InputItem::key("Enter")});
  expect_screen(*t, "sum=42");
  auto s = t->screen(50);
  EXPECT_EQ(s.rows, 5);
  EXPECT_FALSE(s.scrollback.empty());
  std::string all;
  for (const auto& l : s.scrollback) all += l + "\n";
  EXPECT_NE(all.find("row1"), std::string::npos) << all;
  for (const auto& l : s.lines) EXPECT_EQ(l.find('\x1b'), std::string::npos) << l;
  type(*t, {InputItem::key("C-d")});
  auto exit = t->wait({std::nullopt, 0ms, 10s});
  EXPECT_EQ(exit.outcome, WaitOutcome::kExited);
  ASSERT_TRUE(t->state().exit);
  EXPECT_EQ(t->state().exit->exit_code, 0);
  EXPECT_FALSE(t->state().running);
  EXPECT_FALSE(t->send({InputItem::text("x")}));  // ended: input is refused
}

TEST_F(TerminalTest, EditAFileWithViThroughKeysAndScreen) {
  const std::string file = sshd_->home() + "/notes.txt";
  auto t = open("vi " + file);
  ASSERT_TRUE(t);
  expect_screen(*t, "notes.txt");
  type(*t, {InputItem::text("ihello from the terminal"), InputItem::key("Enter"),
            InputItem::text("second line"), InputItem::key("Escape")});
  expect_screen(*t, "second line");
  EXPECT_TRUE(t->screen().alternate_screen);
  // Fix a word using arrows: go up, to the line's end, replace "terminal" with "agent".
  type(*t, {InputItem::key("Up"), InputItem::text("$bcwagent"), InputItem::key("Escape")});
  expect_screen(*t, "hello from the agent");
  type(*t, {InputItem::text(":wq"), InputItem::key("Enter")});
  auto r = t->wait({std::nullopt, 0ms, 10s});
  EXPECT_EQ(r.outcome, WaitOutcome::kExited) << t->screen().text();
  EXPECT_EQ(exec("cat " + file), "hello from the agent\nsecond line\n");
}

TEST_F(TerminalTest, LessRendersReadableLinesAndCtrlCInterrupts) {
  exec("seq -f 'line %g of the file' 1 300 > " + sshd_->home() + "/long.txt");
  auto t = open("");
  ASSERT_TRUE(t);
  expect_screen(*t, kPrompt);
  type(*t, {InputItem::text("less long.txt"), InputItem::key("Enter")});
  expect_screen(*t, "line 23 of the file");
  auto s = t->screen();
  EXPECT_EQ(s.lines[0], "line 1 of the file");
  type(*t, {InputItem::key("PageDown")});
  expect_screen(*t, "line 40 of the file");
  type(*t, {InputItem::text("q")});
  expect_screen(*t, kPrompt);
  // C-c interrupts a foreground sleep; the shell reports 130. The command says when it runs (the
  // typed line does not show "ready42"), so C-c cannot come before it.
  type(*t,
       {InputItem::text("sh -c 'echo ready$((6*7)); exec sleep 100'"), InputItem::key("Enter")});
  expect_screen(*t, "ready42");
  type(*t, {InputItem::key("C-c")});
  type(*t, {InputItem::text("echo status=$?"), InputItem::key("Enter")});
  expect_screen(*t, "status=130", 5s);
}

TEST_F(TerminalTest, ResizeReachesTheProgram) {
  auto t = open("", 80, 24);
  ASSERT_TRUE(t);
  expect_screen(*t, kPrompt);
  type(*t, {InputItem::text("stty size; tput cols"), InputItem::key("Enter")});
  expect_screen(*t, "24 80\n80");
  ASSERT_TRUE(t->resize(132, 40));
  type(*t, {InputItem::text("stty size; tput cols"), InputItem::key("Enter")});
  expect_screen(*t, "40 132\n132");
  EXPECT_EQ(t->screen().cols, 132);
  EXPECT_FALSE(t->resize(0, 10));
}

// A client that opens a terminal and attaches afterwards (sandboxctl shell -- CMD) gets the
// program's output from its start, even when the program ended before the attach.
TEST_F(TerminalTest, TheFirstWatcherGetsWhatCameBeforeIt) {
  auto t = open("echo before-anyone-watched; exit 5");
  ASSERT_TRUE(t);
  auto exit = t->wait({std::nullopt, 0ms, 10s});  // ended before anyone watched
  ASSERT_EQ(exit.outcome, WaitOutcome::kExited);
  auto first = t->watch(1 << 20);
  std::string got;
  for (int i = 0; i < 10 && got.find("before-anyone-watched") == std::string::npos; ++i)
    got += first->next(100ms);
  EXPECT_NE(got.find("before-anyone-watched"), std::string::npos) << got;
  ASSERT_TRUE(first->ended());
  EXPECT_EQ(first->ended()->exit_code, 5);
  auto second = t->watch(1 << 20);  // later watchers: from now on only
  EXPECT_EQ(second->next(0ms), "");
}

TEST_F(TerminalTest, ExitCodeEnvCwdAndWatchers) {
  TerminalOptions o;
  o.command = "echo \"$GREETING in $(pwd)\"; read x; exit 3";
  o.env = {{"GREETING", "hi there"}};
  o.cwd = "/tmp";
  auto t = Terminal::open(*ssh_, o);
  ASSERT_TRUE(t) << t.error().message;
  auto watcher = (*t)->watch(1 << 20);
  expect_screen(**t, "hi there in /tmp");
  type(**t, {InputItem::text("done"), InputItem::key("Enter")});
  auto r = (*t)->wait({std::nullopt, 0ms, 10s});
  EXPECT_EQ(r.outcome, WaitOutcome::kExited);
  ASSERT_TRUE((*t)->state().exit);
  EXPECT_EQ((*t)->state().exit->exit_code, 3);
  std::string seen;
  for (int i = 0; i < 50 && !watcher->ended(); ++i) seen += watcher->next(100ms);
  EXPECT_NE(seen.find("done"), std::string::npos) << seen;  // the echo of the input
  ASSERT_TRUE(watcher->ended());
  EXPECT_EQ(watcher->ended()->exit_code, 3);
  TerminalOptions zero;
  zero.cols = 0;
  auto bad = Terminal::open(*ssh_, zero);
  EXPECT_FALSE(bad);
}

TEST_F(TerminalTest, SlowWatcherIsDroppedAndCloseKillsTheSession) {
  auto t = open("");
  ASSERT_TRUE(t);
  auto slow = t->watch(64 << 10);  // never read
  auto fast = t->watch(64 << 20);
  expect_screen(*t, kPrompt);
  type(*t, {InputItem::text("(sleep 377 &) ; seq 1 100000 | tail -c 2000000; echo END-$((1+1))"),
            InputItem::key("Enter")});
  expect_screen(*t, "END-2", 20s);
  EXPECT_TRUE(slow->dropped());
  EXPECT_FALSE(fast->dropped());
  EXPECT_EQ(t->state().watchers, 1);
  EXPECT_NE(exec("pgrep -u $(id -u) -f 'sleep 37[7]' || true"), "");
  t->close();
  auto r = t->wait({std::nullopt, 0ms, 10s});
  EXPECT_EQ(r.outcome, WaitOutcome::kExited);
  EXPECT_TRUE(t->state().exit->hung_up);
  // The background sleep in the terminal's session is killed too (SIGHUP, then SIGKILL).
  std::string left;
  for (int i = 0; i < 40; ++i) {
    left = exec("pgrep -u $(id -u) -f 'sleep 37[7]' || true");
    if (left.empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(left, "");
}

TEST_F(TerminalTest, WaitForQuietAndTimeout) {
  auto t = open("");
  ASSERT_TRUE(t);
  expect_screen(*t, kPrompt);
  type(*t, {InputItem::text("sleep 0.3; echo late"), InputItem::key("Enter")});
  WaitCondition quiet;
  quiet.quiet = 2000ms;  // well past the 0.3 s gap, however slow the fork of sleep is
  quiet.timeout = 10s;
  auto r = t->wait(quiet);
  EXPECT_EQ(r.outcome, WaitOutcome::kQuiet);
  EXPECT_NE(t->screen().text().find("late"), std::string::npos);
  WaitCondition never;
  never.pattern = std::regex("never-shown");
  never.timeout = 200ms;
  EXPECT_EQ(t->wait(never).outcome, WaitOutcome::kTimeout);
}

TEST_F(TerminalTest, PythonReplSession) {
  auto t = open("python3 -q");
  ASSERT_TRUE(t);
  expect_screen(*t, "^>>>$");
  type(*t, {InputItem::text("x = 6 * 7"), InputItem::key("Enter"), InputItem::text("print(x)"),
            InputItem::key("Enter")});
  expect_screen(*t, "^42\n>>>$");
  type(*t, {InputItem::text("def f(n):"), InputItem::key("Enter"),
            InputItem::text("    return n + 1"), InputItem::key("Enter"), InputItem::key("Enter"),
            InputItem::text("f(99)"), InputItem::key("Enter")});
  expect_screen(*t, "^100\n>>>$");
  type(*t, {InputItem::key("C-d")});
  EXPECT_EQ(t->wait({std::nullopt, 0ms, 10s}).outcome, WaitOutcome::kExited);
  EXPECT_EQ(t->state().exit->exit_code, 0);
}

TEST_F(TerminalTest, FiftyConcurrentTerminals) {
  std::vector<std::shared_ptr<Terminal>> terms;
  for (int i = 0; i < 50; ++i) {
    terms.push_back(open("cat"));
    ASSERT_TRUE(terms.back()) << i;
  }
  for (int i = 0; i < 50; ++i) {
    type(*terms[static_cast<std::size_t>(i)],
         {InputItem::text("term-" + std::to_string(i)), InputItem::key("Enter")});
  }
  for (int i = 0; i < 50; ++i) {
    // cat prints the line back: the tty's echo plus cat's copy.
    expect_screen(*terms[static_cast<std::size_t>(i)],
                  "term-" + std::to_string(i) + "\nterm-" + std::to_string(i) + "\n", 30s);
  }
  for (auto& t : terms) t->close();
  for (auto& t : terms) EXPECT_EQ(t->wait({std::nullopt, 0ms, 10s}).outcome, WaitOutcome::kExited);
  // Their channels and the side execs that hang up their sessions are all gone soon.
  // The spare channel may be open, and the session's watchdog's (the hang-ups are timed execs).
  for (int i = 0; i < 100 && ssh_->stats().channels_open > 2; ++i)
    std::this_thread::sleep_for(100ms);
  EXPECT_LE(ssh_->stats().channels_open, 2);
}

}  // namespace
}  // namespace pvs
