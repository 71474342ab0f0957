// Transfers of a chunk or more through OpenSSH's client (SshConfig::bulk_client) against a real
// OpenSSH sshd: every byte in place both ways, the file's mode, fsync and rename as over SFTP,
// typed errors, SFTP again when the client cannot start, and a client that trusts nothing but
// the key this session verified.
#include <arpa/inet.h>
#include <errno.h>
#include <sys/stat.h>

#include <cstdlib>
#include <optional>
#include <set>

#include "ssh_session_fixture.h"

namespace pvs {
namespace {

constexpr std::size_t kBulkChunk = 64 << 10;

SshConfig bulk(SshConfig c) {
  c.transfer_chunk = kBulkChunk;
  return c;
}

// An input stream that yields `data`, then calls `wait` and ends.
class HeldBuf : public std::streambuf {
 public:
  HeldBuf(std::string data, std::function<void()> wait) : data_(std::move(data)), wait_(wait) {
    setg(data_.data(), data_.data(), data_.data() + data_.size());
  }

 protected:
  int_type underflow() override {
    if (wait_) std::exchange(wait_, nullptr)();
    return traits_type::eof();
  }

 private:
  std::string data_;
  std::function<void()> wait_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(SshSessionTest, BulkClientCarriesEveryByteBothWays) {
  SshSession s(bulk(config()));
  const std::string dir = sshd_->home() + "/bulk";
  ASSERT_TRUE(s.mkdir(dir, 0755, true));
  const std::size_t sizes[] = {kBulkChunk - 1, kBulkChunk, 3 * kBulkChunk + 5, 40 * kBulkChunk + 7};
  int seed = 31;
  std::uint64_t expected = 0;
  for (std::size_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string data = random_bytes(size, seed++);
    const std::string remote = dir + "/f.bin";
    ASSERT_TRUE(s.upload(remote, data, upload_opts(0600)));
    EXPECT_EQ(run(s, "sha256sum " + remote).out.substr(0, 64), local_sha256(data));
    EXPECT_EQ(s.stat(remote)->mode & 0777, 0600u);
    std::ostringstream out;
    auto n = s.download(remote, out);
    ASSERT_TRUE(n) << n.error().to_string();
    EXPECT_EQ(*n, size);
    EXPECT_TRUE(out.str() == data) << "downloaded " << out.str().size() << " bytes, differ";
    // From a stream, into a directory the upload makes, with fsync.
    std::istringstream in(data);
    const std::string made = dir + "/made-" + std::to_string(seed) + "/f.bin";
    UploadOptions o = upload_opts(0640, true);
    o.fsync = true;
    ASSERT_TRUE(s.upload(made, in, o));
    EXPECT_TRUE(*s.download(made) == data);
    EXPECT_EQ(s.stat(made)->mode & 0777, 0640u);
    if (size >= kBulkChunk) expected += 3;
    EXPECT_EQ(s.stats().bulk_transfers, expected);
  }
  // A mode its owner may not write: made writable for the client's shell, then given it.
  const std::string read_only = random_bytes(2 * kBulkChunk, 39);
  ASSERT_TRUE(s.upload(dir + "/ro.bin", read_only, upload_opts(0444)));
  EXPECT_EQ(s.stat(dir + "/ro.bin")->mode & 0777, 0444u);
  EXPECT_TRUE(*s.download(dir + "/ro.bin") == read_only);
  EXPECT_EQ(s.stats().bulk_transfers, expected + 1);
  EXPECT_EQ(names_in(s, dir).front(), "f.bin");  // no temporary files beside it
  EXPECT_EQ(s.stats().exec_connections, 1);      // the client's connection is its own
}

// Transfers at once on one session: the first client to come makes the master, the others
// take it (or a connection of their own while it is not there yet); every byte lands.
TEST_F(SshSessionTest, BulkTransfersAtOnceShareTheMaster) {
  SshSession s(bulk(config()));
  const std::string home = sshd_->home();
  for (int round = 0; round < 3; ++round) {
    std::vector<std::string> data;
    std::vector<std::future<Status>> ups;
    for (int i = 0; i < 3; ++i) data.push_back(random_bytes((5 + i) * kBulkChunk + i, 60 + i));
    for (int i = 0; i < 3; ++i) {
      ups.push_back(std::async(std::launch::async, [&, i] {
        return s.upload(home + "/many-" + std::to_string(i), data[i]);
      }));
    }
    for (auto& u : ups) ASSERT_TRUE(u.get()) << "round " << round;
    std::vector<std::future<std::string>> downs;
    for (int i = 0; i < 3; ++i) {
      downs.push_back(std::async(std::launch::async, [&, i] {
        std::ostringstream out;
        auto n = s.download(home + "/many-" + std::to_string(i), out);
        return n ? out.str() : n.error().to_string();
      }));
    }
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(downs[i].get() == data[i]) << "round " << round;
  }
  EXPECT_EQ(s.stats().bulk_transfers, 18u);
}

TEST_F(SshSessionTest, BulkClientThatCannotStartLeavesItToSftp) {
  // One that never gets to the token but keeps writing to stderr: given up after twice
  // connect_timeout all the same.
  const std::string noisy = sshd_->dir() + "/noisy-client";
  std::ofstream(noisy) << "#!/bin/sh\nwhile :; do echo noise >&2; sleep 0.1; done\n";
  ASSERT_EQ(::chmod(noisy.c_str(), 0755), 0);
  for (const std::string& client :
       {std::string("/nonexistent/ssh"), std::string("/bin/false"), noisy}) {
    SCOPED_TRACE(client);
    SshConfig c = bulk(config());
    c.bulk_client = client;
    c.connect_timeout = std::chrono::seconds(1);
    SshSession s(c);
    const std::string data = random_bytes(5 * kBulkChunk + 3, 41);
    const std::string remote = sshd_->home() + "/fallback.bin";
    std::istringstream in(data);
    ASSERT_TRUE(s.upload(remote, in));
    std::ostringstream out;
    ASSERT_TRUE(s.download(remote, out));
    EXPECT_TRUE(out.str() == data);
    EXPECT_EQ(s.stats().bulk_transfers, 0u);
    EXPECT_GT(s.stats().exec_connections, 1);  // the chunks took over, from the first byte
    ASSERT_TRUE(s.remove(remote));
  }
}

// What the client is given: no configuration, no agent, no forwarding, and a known_hosts of
// one line, the key this session verified; the session's private directory is gone with it.
TEST_F(SshSessionTest, BulkClientTrustsOnlyTheVerifiedKey) {
  const std::string record = sshd_->dir() + "/bulk-record";
  const std::string script = sshd_->dir() + "/record-client";
  std::ofstream(script) << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << record << ".args\n"
                        << "for a in \"$@\"; do case \"$a\" in UserKnownHostsFile=*)\n"
                        << "  f=${a#UserKnownHostsFile=\\\"}; f=${f%\\\"}; cp \"$f\" " << record
                        << ".known; echo \"$f\" > " << record << ".path;; esac; done\nexit 255\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  {
    SshConfig c = bulk(config());
    c.bulk_client = script;
    SshSession s(c);
    const std::string data = random_bytes(2 * kBulkChunk, 43);
    ASSERT_TRUE(s.upload(sshd_->home() + "/recorded.bin", data));
    EXPECT_EQ(s.stats().bulk_transfers, 0u);
  }
  std::istringstream pub(slurp(sshd_->dir() + "/host_ed25519.pub"));
  std::string type, key;
  pub >> type >> key;
  EXPECT_EQ(slurp(record + ".known"), "pvs-bulk " + type + " " + key + "\n");
  std::string path = slurp(record + ".path");
  path = path.substr(0, path.find('\n'));
  struct stat st {};
  EXPECT_NE(::stat(path.c_str(), &st), 0) << path << " is left over";
  const std::string args = slurp(record + ".args");
  for (const char* want :
       {"-F\n/dev/null\n", "\nBatchMode=yes\n", "\nStrictHostKeyChecking=yes\n",
        "\nGlobalKnownHostsFile=/dev/null\n", "\nIdentityAgent=none\n", "\nIdentitiesOnly=yes\n",
        "\nClearAllForwardings=yes\n", "\nProxyCommand=none\n", "\n-a\n", "\n-x\n",
        "\nControlMaster=auto\n", "\nControlPersist=60\n"}) {
    EXPECT_NE(args.find(want), std::string::npos) << want << " not in\n" << args;
  }
  EXPECT_NE(args.find(" && exec 3<> '" + sshd_->home() + "/.recorded.bin.pvs-tmp-"),
            std::string::npos)
      << args;
  EXPECT_NE(args.find(" && printf '%s\\n' pvs-bulk-"), std::string::npos) << args;
}

TEST_F(SshSessionTest, BulkErrorsAreTypedAndLeaveNothing) {
  SshSession s(bulk(config()));
  const std::string dir = sshd_->home() + "/bulk-errors";
  ASSERT_TRUE(s.mkdir(dir, 0755, true));
  const std::string remote = dir + "/f.bin";
  const std::string data = random_bytes(10 * kBulkChunk, 45);
  ASSERT_TRUE(s.upload(remote, data));
  // A source that breaks on the way.
  expect_broken_upload_leaves_old(s, dir, remote, data, 4 * kBulkChunk + 99, 46);
  // A file its owner may not read: the stat passes, `cat` is refused.
  ASSERT_EQ(run(s, "chmod 000 " + remote).exit_code, 0);
  std::ostringstream out;
  auto down = s.download(remote, out);
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().ssh, SshErrc::kPermissionDenied) << down.error().to_string();
  // Larger than max_size: refused before any byte, as over SFTP.
  ASSERT_EQ(run(s, "chmod 600 " + remote).exit_code, 0);
  DownloadOptions small;
  small.max_size = kBulkChunk;
  auto big = s.download(remote, out, small);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().ssh, SshErrc::kTooLarge);
  EXPECT_EQ(s.stats().bulk_transfers, 1u);  // the first upload
}

// close() stops a transfer the client carries, as it fails SFTP's: kClosed.
TEST_F(SshSessionTest, CloseStopsABulkTransfer) {
  SshSession s(bulk(config()));
  std::promise<void> released;
  std::shared_future<void> release = released.get_future().share();
  std::atomic<bool> waiting{false};
  HeldBuf held(random_bytes(3 * kBulkChunk, 51), [&] {
    waiting = true;
    release.wait();
  });
  std::istream in(&held);
  auto up = std::async(std::launch::async, [&] { return s.upload(sshd_->home() + "/held", in); });
  ASSERT_TRUE(eventually([&] { return waiting.load(); }, 20s));
  s.close();
  released.set_value();
  auto r = up.get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().ssh, SshErrc::kClosed) << r.error().to_string();
  // The session works again afterwards, the client too.
  ASSERT_TRUE(s.upload(sshd_->home() + "/after", random_bytes(kBulkChunk, 52)));
  EXPECT_EQ(s.stats().bulk_transfers, 1u);
}

// This process's ends of its connections to `port` (libssh2's; a bulk master is a process of
// its own) are shut down: the connection drops for libssh2 alone.
void drop_own_connections(std::uint16_t port) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir("/proc/self/fd"), ::closedir);
  while (dirent* e = ::readdir(d.get())) {
    const int fd = std::atoi(e->d_name);
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    if (fd > 2 && ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) == 0 &&
        peer.sin_family == AF_INET && ntohs(peer.sin_port) == port) {
      ::shutdown(fd, SHUT_RDWR);
    }
  }
}

// TMPDIR (where a session makes its private directory) set to `dir` while it lives.
class TmpdirFor {
 public:
  explicit TmpdirFor(const std::string& dir) {
    if (const char* was = std::getenv("TMPDIR")) was_ = was;
    ::setenv("TMPDIR", dir.c_str(), 1);
  }
  ~TmpdirFor() { was_ ? ::setenv("TMPDIR", was_->c_str(), 1) : ::unsetenv("TMPDIR"); }
  TmpdirFor(const TmpdirFor&) = delete;
  TmpdirFor& operator=(const TmpdirFor&) = delete;

 private:
  std::optional<std::string> was_;
};

// Bulk clients (and masters: ssh may retitle those "ssh: PATH [mux]") whose files are under
// `dir` (the TMPDIR their session's private directory was made in), by pid.
std::set<pid_t> bulk_clients_under(const std::string& dir) {
  std::set<pid_t> out;
  for (const auto& [pid, cmd] : test::user_processes(::getuid())) {
    if (cmd.find(dir + "/pvs-bulk-") != std::string::npos) out.insert(pid);
  }
  return out;
}

// A master serves the connection it was made beside: after libssh2 reconnects, the next
// transfer makes its own (the old one, whose connection may have dropped too, is never used
// again and ends a minute after its last transfer, or with the session).
TEST_F(SshSessionTest, AReconnectGetsItsOwnBulkMaster) {
  const std::string tmp = sshd_->dir() + "/bulk-tmp";
  ASSERT_TRUE(::mkdir(tmp.c_str(), 0700) == 0 || errno == EEXIST);
  TmpdirFor tmpdir(tmp);  // this test's process only
  SshSession s(bulk(config()));
  const std::string home = sshd_->home();
  const std::string data = random_bytes(3 * kBulkChunk, 53);
  ASSERT_TRUE(s.upload(home + "/first-master", data));
  const auto first = bulk_clients_under(tmp);
  ASSERT_EQ(first.size(), 1u) << "one master, no client left";
  drop_own_connections(sshd_->port());
  ASSERT_TRUE(eventually([&] { return s.stat(home) && s.stats().connects >= 2; }, 20s));
  ASSERT_TRUE(s.upload(home + "/second-master", data));
  EXPECT_EQ(s.stats().bulk_transfers, 2u);
  const auto both = bulk_clients_under(tmp);
  EXPECT_EQ(both.size(), 2u) << "the reconnect's transfer went through the old master";
  EXPECT_TRUE(both.contains(*first.begin()));
  s.close();
  EXPECT_TRUE(eventually([&] { return bulk_clients_under(tmp).empty(); }, 10s));
}

}  // namespace
}  // namespace pvs
