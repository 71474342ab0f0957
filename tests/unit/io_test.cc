#include "pvesandbox/common/io.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace pvs {
namespace {

class IoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pvs-io-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  static std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string dir_;
};

TEST_F(IoTest, WriteAllWritesEveryByteThroughAPipe) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  UniqueFd r(p[0]), w(p[1]);
  std::string text(4000, 'x');
  ASSERT_TRUE(write_all(w.get(), text));
  std::string got(text.size(), '\0');
  ASSERT_EQ(::read(r.get(), got.data(), got.size()), static_cast<ssize_t>(text.size()));
  EXPECT_EQ(got, text);
  EXPECT_EQ(write_all(-1, "x", "writing nothing").error().code, ErrorCode::kIo);
}

TEST_F(IoTest, AtomicWriteReplacesTheFileWithTheModeAskedAndLeavesNoTemp) {
  std::string path = dir_ + "/state";
  ASSERT_TRUE(write_file_atomic(path, "one\n"));
  ASSERT_TRUE(write_file_atomic(path, "two\n", {.mode = 0644, .fsync = true}));
  EXPECT_EQ(slurp(path), "two\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_NE(::access((dir_ + "/.state.tmp").c_str(), F_OK), 0);
  auto bad = write_file_atomic(dir_ + "/missing/state", "x");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kIo);
}

TEST_F(IoTest, AtomicWriteNeverFollowsALinkPlantedAtTheTempName) {
  std::string victim = dir_ + "/victim";
  std::ofstream(victim) << "keep\n";
  ASSERT_EQ(::symlink(victim.c_str(), (dir_ + "/.state.tmp").c_str()), 0);
  ASSERT_TRUE(write_file_atomic(dir_ + "/state", "new\n"));
  EXPECT_EQ(slurp(victim), "keep\n");
  EXPECT_EQ(slurp(dir_ + "/state"), "new\n");
}

TEST_F(IoTest, ConnectUnixReachesAListenerAndNamesWhatIsMissing) {
  std::string path = dir_ + "/s.sock";
  EXPECT_EQ(connect_unix(path).error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(connect_unix(std::string(200, 'a')).error().code, ErrorCode::kInvalidArgument);
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, path.size());
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener.get(), 1), 0);
  auto fd = connect_unix(path);
  ASSERT_TRUE(fd) << fd.error().to_string();
  EXPECT_TRUE(*fd);
}

TEST(ErrorDetailTest, PeerKindsRideAlongWithTheCode) {
  Error e(ErrorCode::kConflict, "locked");
  EXPECT_FALSE(e.is(ProxmoxErrc::kLocked));
  e.proxmox.emplace();
  e.proxmox->kind = ProxmoxErrc::kLocked;
  EXPECT_TRUE(e.is(ProxmoxErrc::kLocked));
  EXPECT_FALSE(e.is(SshErrc::kTimeout));
  e.ssh = SshErrc::kTimeout;
  EXPECT_TRUE(e.is(SshErrc::kTimeout));
}

}  // namespace
}  // namespace pvs
