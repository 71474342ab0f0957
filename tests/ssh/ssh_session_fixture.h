// The fixture of the SshSession tests (ssh_session_*_test.cc): one real OpenSSH sshd on
// 127.0.0.1 for the suite (tests/support), a gate for interleavings by construction, helpers.
#pragma once

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

  static inline SshdFixture* sshd_ = nullptr;
};

// The names in `dir`, sorted.
inline std::vector<std::string> names_in(SshSession& s, const std::string& dir) {
  std::vector<std::string> names;
  auto list = s.list_dir(dir);
  EXPECT_TRUE(list) << list.error().to_string();
  if (list) {
    for (const auto& e : list->entries) names.push_back(e.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// An input stream that yields `data` and then fails (badbit) instead of ending.
class FailingBuf : public std::streambuf {
 public:
  explicit FailingBuf(std::string data) : data_(std::move(data)) {
    setg(data_.data(), data_.data(), data_.data() + data_.size());
  }

 protected:
  int_type underflow() override { throw std::runtime_error("the source broke"); }

 private:
  std::string data_;
};

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

inline ExecOptions timeout_opts(std::chrono::milliseconds t) {
  ExecOptions o;
  o.timeout = t;
  return o;
}

inline UploadOptions upload_opts(std::uint32_t mode, bool create_parents = false,
                                 bool atomic = true) {
  UploadOptions o;
  o.mode = mode;
  o.create_parents = create_parents;
  o.atomic = atomic;
  return o;
}

inline DownloadOptions max_size(std::uint64_t n) {
  DownloadOptions o;
  o.max_size = n;
  return o;
}

inline int count_dir(const char* path) {
  int n = 0;
  DIR* d = ::opendir(path);
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

inline std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    std::uint64_t v = rng();
    std::memcpy(s.data() + i, &v, 8);
  }
  return s;
}

// An upload over `remote` (the only file in `dir`, holding `old`) from a source that breaks
// after `bytes`: kLocalIo, the old file stays, nothing is left over.
inline void expect_broken_upload_leaves_old(SshSession& s, const std::string& dir,
                                            const std::string& remote, const std::string& old,
                                            std::size_t bytes, int seed) {
  FailingBuf broken(random_bytes(bytes, seed));
  std::istream from_broken(&broken);
  auto up = s.upload(remote, from_broken);
  ASSERT_FALSE(up);
  EXPECT_EQ(up.error().ssh, SshErrc::kLocalIo) << up.error().to_string();
  EXPECT_TRUE(*s.download(remote) == old);
  EXPECT_EQ(names_in(s, dir), std::vector<std::string>{remote.substr(remote.rfind('/') + 1)});
}

inline std::string local_sha256(const std::string& data) {
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

}  // namespace pvs
