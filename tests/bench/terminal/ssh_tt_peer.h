// The peer both terminal benchmarks run in the same run: `ssh -tt` through a running OpenSSH
// ControlMaster (a session with a pty running `cat`), one key written to its stdin until its
// echo comes back on its stdout. Plus the percentile helpers they share.
//
//   pvs::bench::SshTtPeer peer({host, port, user, key, known_hosts, dir});
//   if (!peer.ok()) ...;
//   double ms = peer.type('a');   // < 0: no echo
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace pvs::bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}
inline void report(const char* what, const std::vector<double>& v) {
  std::printf("%-50s (n=%zu): p50 %.3f ms  p99 %.3f ms\n", what, v.size(), percentile(v, 0.5),
              percentile(v, 0.99));
}

struct SshTarget {
  std::string host;
  int port = 22;
  std::string user;
  std::string key_file;     // the client's private key
  std::string known_hosts;  // pins the server's host key
  std::string dir;          // where the master's control socket goes
};

class SshTtPeer {
 public:
  explicit SshTtPeer(const SshTarget& t) {
    const std::string cm = t.dir + "/term-cm.sock";
    const std::vector<std::string> opts = {"-F", "/dev/null",
                                           "-o", "BatchMode=yes",
                                           "-o", "IdentitiesOnly=yes",
                                           "-i", t.key_file,
                                           "-o", "UserKnownHostsFile=" + t.known_hosts,
                                           "-o", "StrictHostKeyChecking=yes",
                                           "-p", std::to_string(t.port)};
    const std::string target = t.user + "@" + t.host;
    std::vector<std::string> master = {"ssh", "-M", "-N", "-S", cm};
    master.insert(master.end(), opts.begin(), opts.end());
    master.push_back(target);
    null_fd_ = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    master_ = spawn(master, null_fd_, null_fd_);
    for (int i = 0; i < 1000 && ::access(cm.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (::access(cm.c_str(), F_OK) != 0) return;
    int to[2], from[2];
    if (::pipe2(to, O_CLOEXEC) != 0) return;
    if (::pipe2(from, O_CLOEXEC) != 0) {
      ::close(to[0]);
      ::close(to[1]);
      return;
    }
    std::vector<std::string> client = {"ssh", "-tt", "-S", cm};
    client.insert(client.end(), opts.begin(), opts.end());
    client.insert(client.end(), {target, "cat"});
    client_ = spawn(client, to[0], from[1]);
    ::close(to[0]);
    ::close(from[1]);
    to_ = to[1];
    from_ = from[0];
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the remote cat starts
  }
  ~SshTtPeer() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    for (pid_t pid : {client_, master_}) {
      if (pid <= 0) continue;
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    if (null_fd_ >= 0) ::close(null_fd_);
  }
  SshTtPeer(const SshTtPeer&) = delete;
  SshTtPeer& operator=(const SshTtPeer&) = delete;

  bool ok() const { return client_ > 0 && to_ >= 0; }

  // One key typed into the remote cat, until its echo came back: ms, or -1 (no echo in 5 s).
  double type(char key) {
    auto t0 = Clock::now();
    if (::write(to_, &key, 1) != 1) return -1;
    char buf[256];
    while (ms_since(t0) < 5000) {
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t n = ::read(from_, buf, sizeof buf);
      if (n <= 0) return -1;
      if (std::find(buf, buf + n, key) != buf + n) return ms_since(t0);
    }
    return -1;
  }
  // C-u: the line discipline forgets the line (keeps it short).
  void clear_line() {
    const char cu = 0x15;
    if (::write(to_, &cu, 1) != 1) std::fprintf(stderr, "ssh -tt: write failed\n");
  }

 private:
  // argv is built before fork: the process may have threads (malloc after fork could hang).
  static pid_t spawn(const std::vector<std::string>& argv, int in_fd, int out_fd) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(in_fd, 0);
      ::dup2(out_fd, 1);
      ::dup2(devnull, 2);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::close(devnull);
    return pid;
  }

  pid_t master_ = -1, client_ = -1;
  int null_fd_ = -1, to_ = -1, from_ = -1;
};

}  // namespace pvs::bench
