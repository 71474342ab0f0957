// Pause and resume on real containers (docs/design/pause.md; pvesim's lxc backend): a
// workspace survives 20 pause/resume cycles byte for byte (checksummed), with a controller
// restart in the middle; processes do not survive; the sandbox's own SSH host key does.
#include <gtest/gtest.h>

#include "lxc_support.h"
#include "manager_testing.h"
#include "pvesandbox/manager.h"
#include "sandbox_run.h"
#include "support/stack_fixture.h"

namespace pvs {
namespace {

using lxctest::run;

// One checksum over every file of the workspace, names included.
constexpr const char* kChecksum =
    "cd /root/work && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum";

class LxcPauseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StackOptions o;
    o.backend = "lxc";
    stack_ = std::make_unique<test::Stack>(o);
    run_dir_ = lxctest::own_run_dir();
    ASSERT_FALSE(run_dir_.empty());
  }
  void TearDown() override {
    stack_.reset();
    EXPECT_EQ(lxctest::leftovers(run_dir_), std::vector<std::string>{});
  }
  std::unique_ptr<Manager> open() {
    auto m = lifecycle::open_manager(stack_->manager_config(), {});
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
  }

  std::unique_ptr<test::Stack> stack_;
  std::string run_dir_;
};

TEST_F(LxcPauseTest, TwentyCyclesKeepEveryByteOfTheWorkspaceButNoProcess) {
  auto m = open();
  ASSERT_TRUE(m);
  auto created = m->create({});
  ASSERT_TRUE(created) << created.error().message;
  std::shared_ptr<Sandbox> sb = *created;
  const std::string id = sb->id();
  const int vmid = sb->info().vmid;
  const std::string host_key = sb->info().host_key;
  ASSERT_FALSE(host_key.empty());
  // A workspace: 4 MiB of random bytes, 64 small files, one written over SFTP.
  ASSERT_EQ(run(*sb,
                "mkdir -p /root/work/src && head -c 4194304 /dev/urandom > /root/work/blob && "
                "for i in $(seq 64); do head -c $((i * 97)) /dev/urandom > /root/work/src/f$i; "
                "done"),
            "");
  ASSERT_TRUE(sb->write_file("/root/work/notes.txt", "written over sftp\n", 0640));

  for (int cycle = 1; cycle <= 20; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    // Written right before the pause, never synced.
    ASSERT_EQ(run(*sb, "echo cycle " + std::to_string(cycle) + " >> /root/work/log.txt"), "");
    // Started, and seen running: the background shell execs sleep when it gets to it, which
    // under load may be after this command's next line (CI's sanitizer pass saw that once).
    ASSERT_EQ(run(*sb,
                  "setsid sleep 100049 </dev/null >/dev/null 2>&1 & for i in $(seq 400); do "
                  "pgrep -f '^sleep 100049$' >/dev/null && echo started && exit 0; sleep 0.05; "
                  "done; echo none"),
              "started");
    std::string sum = run(*sb, kChecksum);
    ASSERT_EQ(sum.size(), 67u) << sum;  // 64 hex digits, "  -"
    pid_t init = lxctest::init_pid(run_dir_, vmid);
    ASSERT_GT(init, 0);

    auto paused = sb->pause();
    ASSERT_TRUE(paused) << paused.error().message;
    EXPECT_EQ(lxctest::init_pid(run_dir_, vmid), -1) << "the container still runs";
    if (cycle == 10) {  // a controller restart in the middle: Proxmox alone remembers
      sb.reset();
      m.reset();
      m = open();
      ASSERT_TRUE(m);
      auto found = m->attach(id);
      ASSERT_TRUE(found) << found.error().message;
      sb = *found;
      EXPECT_EQ(sb->info().phase, SandboxMetadata::Phase::kPaused);
    }
    auto resumed = sb->resume();
    ASSERT_TRUE(resumed) << resumed.error().message;
    EXPECT_NE(lxctest::init_pid(run_dir_, vmid), init) << "a new init";
    EXPECT_EQ(sb->info().host_key, host_key);
    EXPECT_EQ(run(*sb, kChecksum), sum);
    EXPECT_EQ(run(*sb, "pgrep -f '^sleep 100049$' || echo none"), "none");
  }
  EXPECT_EQ(run(*sb, "wc -l < /root/work/log.txt; tail -n1 /root/work/log.txt"), "20\ncycle 20");
  EXPECT_EQ(run(*sb, "cat /root/work/notes.txt; stat -c %a /root/work/notes.txt"),
            "written over sftp\n640");
  ASSERT_TRUE(sb->destroy());
}

}  // namespace
}  // namespace pvs
