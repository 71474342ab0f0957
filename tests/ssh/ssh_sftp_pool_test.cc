// The session's pool of SFTP instances under concurrency, against a real sshd whose sftp
// subsystem waits at a gate before it starts: an instance's opening stays half done for as
// long as the test holds the gate, so what happens meanwhile happens by construction.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "pvesandbox/ssh_session.h"
#include "support/eventually.h"
#include "support/sshd_client.h"
#include "support/sshd_fixture.h"

namespace pvs {
namespace {

using namespace std::chrono_literals;
using test::eventually;

class SftpPoolTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    test::SshdOptions o;
    // sshd runs this by the user's shell in the user's home: while hold-sftp is a FIFO, a new
    // instance starts only once the test writes a byte to it. (No sleep loop: tests of the other
    // pass that run beside this one, with users of their own passwd file, may have this uid and
    // look for leftover sleeps.)
    o.sftp_subsystem =
        "test -p hold-sftp && head -c 1 hold-sftp >/dev/null; exec /usr/lib/openssh/sftp-server";
    sshd_ = new test::SshdFixture(o);
  }
  static void TearDownTestSuite() {
    delete sshd_;
    sshd_ = nullptr;
  }

  static SshConfig config() { return test::client_config(*sshd_); }

  // Whether an sftp-server in `home` (this fixture's: its cwd) is blocked in open(2), a FIFO's
  // waiting for a writer.
  static bool blocked_in_open(const std::string& home) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
      if (std::filesystem::read_symlink(e.path() / "cwd", ec) != home) continue;
      std::ifstream comm(e.path() / "comm"), call(e.path() / "syscall");
      std::string name, number;
      if (!std::getline(comm, name) || name != "sftp-server" || !(call >> number)) continue;
      if (number == "257" || number == "56") return true;  // openat on x86-64, arm64
    }
    return false;
  }

  static test::SshdFixture* sshd_;
};

test::SshdFixture* SftpPoolTest::sshd_ = nullptr;

// One transfer holds the only instance while a second op opens another (held at the gate);
// the first ends, freeing its instance. The opening op must finish its own opening rather
// than take the freed instance: taking it left the opener taken for good, and every channel
// open after it (an exec, a terminal, a port) waited forever (the web console's end-to-end test
// caught it: its sandbox page lists files and ports at once).
TEST_F(SftpPoolTest, AnOpeningLeftHalfDoneIsFinishedWhenAnotherInstanceComesFree) {
  SshConfig c = config();
  c.max_sftp_channels = 2;
  c.spare_channels = 0;  // the exec below opens its channel (a spare one would hide the bug)
  SshSession s(c);
  const std::string home = sshd_->home();
  ASSERT_TRUE(s.stat(home)) << "the first instance";
  const std::string fifo = home + "/slow.fifo", hold = home + "/hold-sftp";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  ASSERT_EQ(::chmod(fifo.c_str(), 0666), 0);
  ASSERT_EQ(::mkfifo(hold.c_str(), 0666), 0);
  ASSERT_EQ(::chmod(hold.c_str(), 0666), 0);
  struct Gate {  // held open read-write: a waiter's open never blocks, its read does
    std::string fifo, hold;
    int fd = ::open(hold.c_str(), O_RDWR | O_CLOEXEC);
    void open() { EXPECT_EQ(::write(fd, "x", 1), 1); }
    ~Gate() {  // a failed assertion still lets every waiter go
      if (fd >= 0) {
        if (::write(fd, "xxxx", 4) < 0) ::perror("gate");
        ::close(fd);
      }
      ::unlink(hold.c_str());
      int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (w >= 0) ::close(w);
      ::unlink(fifo.c_str());
    }
  } gate{fifo, hold};
  ASSERT_GE(gate.fd, 0);

  // A download of the FIFO takes the instance: the server blocks opening it until a writer
  // comes (then fails the read: sftp-server reads at an offset, which a FIFO cannot seek).
  auto download = std::async(std::launch::async, [&] { return s.download(fifo); });
  ASSERT_TRUE(eventually([&] { return blocked_in_open(home); }));
  // A stat needs a second instance, whose opening waits at the gate.
  auto stat = std::async(std::launch::async, [&] { return s.stat(home); });
  ASSERT_TRUE(eventually([&] { return s.stats().channels_open >= 2; }));
  // The download ends: its instance is free while the stat's opening is half done.
  int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(writer, 0);
  ASSERT_EQ(download.wait_for(30s), std::future_status::ready);
  ::close(writer);
  download.get();
  // An exec waits for the opening to end (one channel opens at a time), then runs.
  auto exec = s.exec_async("echo after");
  gate.open();
  ASSERT_EQ(exec.wait_for(30s), std::future_status::ready) << "the exec never got a channel";
  auto r = exec.get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "after\n");
  ASSERT_EQ(stat.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(stat.get());
}

// At the connection's channel limit (here 2, as a server's refusal can teach it) with both
// channels held by idle SFTP instances, a command gets a channel: an idle instance gives way.
// (The console's test saw sshd refuse a third channel while it still counted closed ones; its
// instances then kept every exec, and the rename that ends an upload, waiting to their timeout.)
TEST_F(SftpPoolTest, IdleInstancesGiveWayToACommandAtTheChannelLimit) {
  SshConfig c = config();
  c.max_channels = 2;
  c.max_sftp_channels = 2;
  c.spare_channels = 0;
  SshSession s(c);
  const std::string home = sshd_->home(), fifo = home + "/busy.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  ASSERT_EQ(::chmod(fifo.c_str(), 0666), 0);
  struct Release {
    std::string fifo;
    ~Release() {
      int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      ::unlink(fifo.c_str());
    }
  } release{fifo};
  // Two instances: a download holds the first while a stat opens the second.
  auto download = std::async(std::launch::async, [&] { return s.download(fifo); });
  ASSERT_TRUE(eventually([&] { return blocked_in_open(home); }));
  ASSERT_TRUE(s.stat(home));
  int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(writer, 0);
  ASSERT_EQ(download.wait_for(30s), std::future_status::ready);
  ::close(writer);
  download.get();
  ASSERT_EQ(s.stats().channels_open, 2);  // both idle, both kept
  auto exec = s.exec_async("echo ran");
  ASSERT_EQ(exec.wait_for(30s), std::future_status::ready) << "the exec never got a channel";
  auto r = exec.get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->out, "ran\n");
  // SFTP goes on with the instance that is left.
  EXPECT_TRUE(s.stat(home));
}

}  // namespace
}  // namespace pvs
