// SshSession's SFTP against a real OpenSSH sshd: round trips, files and directories, limits,
// timeouts and a full disk.
#include "ssh_session_fixture.h"

namespace pvs {
namespace {

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
  // Parents that are there already; a parent that is a file is an error.
  ASSERT_TRUE(s.upload(base + "/a/b/c.txt", "two", upload_opts(0644, true)));
  auto under_file = s.upload(base + "/a/b/c.txt/d.txt", "x", upload_opts(0644, true));
  ASSERT_FALSE(under_file);
  EXPECT_EQ(under_file.error().ssh, SshErrc::kAlreadyExists) << under_file.error().message;
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
  // Onto a directory (posix-rename and mv both refuse): the directory stays, no temporary file.
  ASSERT_TRUE(s.mkdir(base + "/d", 0755));
  EXPECT_FALSE(s.upload(base + "/d", "x"));
  EXPECT_TRUE(s.stat(base + "/d")->is_dir());
  auto left = s.list_dir(base);
  ASSERT_TRUE(left);
  for (const auto& e : left->entries) {
    EXPECT_EQ(e.name.find("pvs-tmp"), std::string::npos) << e.name;
  }
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

}  // namespace
}  // namespace pvs
