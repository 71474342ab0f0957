// The data plane's caps (#46 finding 2): readers per process, processes per sandbox, and a
// reader leaving when its stream returns. On a Sandbox fake whose exec announces its pid and
// then waits until the test lets every command end: the counts are made by construction.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "e2b/filesystem/fs_ops.h"
#include "e2b/processes.h"
#include "e2b/refusing_sandbox.h"

namespace pvs::service::e2b {
namespace {

using namespace std::chrono_literals;

class HeldSandbox : public RefusingSandbox {
 public:
  // Prints the pid marker as the real script does, then waits for release(). A side exec (a
  // kill at shutdown, which reads no output) succeeds at once.
  Result<ExecResult> exec(std::string, ExecOptions options) override {
    if (!options.on_output) return ExecResult{};
    int pid = 0;
    {
      std::lock_guard lock(mu_);
      pid = ++pids_;
    }
    options.on_output(ExecStream::kStderr, "\036e2b:" + std::to_string(pid) + "\036");
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return released_; });
    return ExecResult{};
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int pids_ = 0;
  bool released_ = false;
};

class ProcessLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { table_ = std::make_shared<ProcessTable>(sandbox_, ProcessLimits{2, 3}); }
  void TearDown() override {
    sandbox_->release();
    table_->shutdown();
  }
  Result<std::shared_ptr<Process>> start(std::shared_ptr<EventQueue> q) {
    StartRequest r;
    r.process = {"/bin/sh", {"-c", "sleep 60"}, {}, std::nullopt};
    return table_->start(r, StartOptions{}, std::move(q));
  }
  // Reads `q` to its end (the command ended).
  static void drain(EventQueue& q) {
    while (!q.finished()) q.next(1s);
  }

  std::shared_ptr<HeldSandbox> sandbox_ = std::make_shared<HeldSandbox>();
  std::shared_ptr<ProcessTable> table_;
};

TEST_F(ProcessLimitsTest, ReadersAreCappedAndLeaveWhenTheirStreamReturns) {
  auto start_events = std::make_shared<EventQueue>();
  auto p = start(start_events);
  ASSERT_TRUE(p) << p.error().message;
  auto proc = *p;
  EXPECT_EQ(proc->subscribers(), 1u);  // the Start stream's
  {
    auto a = proc->subscribe(), b = proc->subscribe();
    ASSERT_TRUE(a);
    ASSERT_TRUE(b);
    Unsubscribe leave_a{proc, *a}, leave_b{proc, *b};
    EXPECT_EQ(proc->subscribers(), 3u);
    auto over = proc->subscribe();
    ASSERT_FALSE(over);
    EXPECT_EQ(over.error().code, ErrorCode::kTooLarge);
    EXPECT_EQ(connect_error_of(over.error()).code, ConnectCode::kResourceExhausted);
    EXPECT_NE(over.error().message.find("at most 3 per process"), std::string::npos);
  }  // both streams returned: their readers and queues are gone though the process runs on
  EXPECT_EQ(proc->subscribers(), 1u);
  EXPECT_TRUE(proc->running());
  {
    Unsubscribe leave{proc, start_events};  // the Start stream's reader went away too
  }
  EXPECT_EQ(proc->subscribers(), 0u);
  auto again = proc->subscribe();  // room again
  ASSERT_TRUE(again);
  EXPECT_EQ(proc->subscribers(), 1u);
  sandbox_->release();
  drain(**again);
  EXPECT_EQ(proc->subscribers(), 0u);  // the end lets every reader go
}

TEST_F(ProcessLimitsTest, ProcessesPerSandboxAreCapped) {
  auto q1 = std::make_shared<EventQueue>(), q2 = std::make_shared<EventQueue>();
  ASSERT_TRUE(start(q1));
  ASSERT_TRUE(start(q2));
  EXPECT_EQ(table_->live(), 2u);
  auto over = start(std::make_shared<EventQueue>());
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kTooLarge);
  EXPECT_EQ(connect_error_of(over.error()).code, ConnectCode::kResourceExhausted);
  EXPECT_NE(over.error().message.find("at most 2 per sandbox"), std::string::npos);
  sandbox_->release();  // both end
  drain(*q1);
  drain(*q2);
  EXPECT_EQ(table_->live(), 0u);
  EXPECT_TRUE(start(std::make_shared<EventQueue>()));  // ended processes make room
}

}  // namespace
}  // namespace pvs::service::e2b
