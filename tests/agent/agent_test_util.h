// Real-kernel rig for the agent tests and benchmarks: a network namespace per test (named with
// the pid, so parallel ctest runs never collide) with the contract's tables loaded by `nft -f`,
// temp dirs from mkdtemp, the agent binary started inside the namespace, and a line client.
// Nothing is mocked; a missing tool fails the test.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "pvesandbox/common/io.h"

namespace pvs::test {

inline std::string shell_output(const std::string& command, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) throw std::runtime_error("popen failed: " + command);
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int rc = ::pclose(p);
  if (status != nullptr) *status = rc;
  return out;
}

inline void must_run(const std::string& command) {
  int status = 0;
  std::string out = shell_output(command, &status);
  if (status != 0) throw std::runtime_error("command failed: " + command + "\n" + out);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/pvs-agent-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
    ::chmod(path_.c_str(), 0755);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A network namespace of our own, deleted on destruction.
class NetNs {
 public:
  NetNs() {
    static std::atomic<int> counter{0};
    name_ = "pvsa-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    must_run("ip netns add " + name_);
  }
  ~NetNs() {
    // Concurrent `ip netns add/del` of parallel tests can make a delete fail transiently.
    for (int i = 0; i < 10 && std::filesystem::exists(path()); ++i) {
      (void)shell_output("ip netns del " + name_);
      if (std::filesystem::exists(path())) ::usleep(100 * 1000);
    }
  }
  NetNs(const NetNs&) = delete;
  NetNs& operator=(const NetNs&) = delete;

  const std::string& name() const { return name_; }
  std::string path() const { return "/run/netns/" + name_; }
  // Runs a shell command inside the namespace; throws if it fails.
  void run(const std::string& command) const {
    must_run("ip netns exec " + name_ + " sh -c '" + command + "'");
  }
  std::string output(const std::string& command) const {
    return shell_output("ip netns exec " + name_ + " sh -c '" + command + "'");
  }
  void load_contract() const { run(std::string("nft -f ") + PVS_AGENT_TEST_DIR "/contract.nft"); }

 private:
  std::string name_;
};

// Moves the calling thread into a namespace for its lifetime (sockets opened meanwhile stay
// bound to it).
class EnterNs {
 public:
  explicit EnterNs(const NetNs& ns) {
    original_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = ::open(ns.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (original_ < 0 || fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
      throw std::runtime_error("cannot enter netns " + ns.name());
    }
    ::close(fd);
  }
  ~EnterNs() {
    ::setns(original_, CLONE_NEWNET);
    ::close(original_);
  }
  EnterNs(const EnterNs&) = delete;
  EnterNs& operator=(const EnterNs&) = delete;

 private:
  int original_ = -1;
};

// A connected socket's descriptor (the caller closes it), or -1.
inline int connect_fd(const std::string& path) {
  auto fd = pvs::connect_unix(path);
  return fd ? fd->release() : -1;
}

// A blocking line client with timeouts, for tests.
class LineClient {
 public:
  explicit LineClient(const std::string& path) : fd_(connect_fd(path)) {
    if (fd_ < 0) throw std::runtime_error("cannot connect to " + path);
  }
  ~LineClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  LineClient(const LineClient&) = delete;
  LineClient& operator=(const LineClient&) = delete;

  int fd() const { return fd_; }
  void send_raw(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(std::string("send: ") + std::strerror(errno));
      }
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // Next line without '\n'; nullopt on EOF or timeout.
  std::optional<std::string> read_line(int timeout_ms = 15000) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char tmp[65536];
      ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n <= 0) return std::nullopt;
      buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }
  // Waits for the peer to close (EOF or reset): true once it has, false if `timeout_ms` passes
  // first. Lines that arrive meanwhile are kept for read_line. Unlike read_line, which answers
  // nullopt both on EOF and on timeout, this tells the two apart.
  bool wait_closed(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char tmp[65536];
      ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      if (n > 0) buf_.append(tmp, static_cast<std::size_t>(n));
    }
  }
  std::string call(const std::string& request, int timeout_ms = 15000) {
    send_raw(request + "\n");
    auto line = read_line(timeout_ms);
    return line ? *line : "<no reply>";
  }

 private:
  int fd_;
  std::string buf_;
};

// The agent binary, started inside a namespace with a config written to a temp dir.
class AgentProcess {
 public:
  // `extra_yaml` is appended to the base config (socket, state file, CIDR, fast drift checks).
  AgentProcess(const NetNs& ns, const TempDir& dir, const std::string& extra_yaml = "",
               int listen_fd = -1)
      : ns_path_(ns.path()), dir_(dir.path()) {
    config_ = dir.file("agent.yaml");
    socket_ = dir.file("agent.sock");
    log_ = dir.file("agent.log");
    std::ofstream(config_) << "socket: " << socket_ << "\n"
                           << "socket_group: \"\"\n"
                           << "sandbox_cidr: 10.99.0.0/16\n"
                           << "gateway: 10.99.0.1\n"
                           << default_key(extra_yaml, "state_file", dir.file("agent-state"))
                           << default_key(extra_yaml, "state_fsync", "false")
                           << default_key(extra_yaml, "drift_check_ms", "100") << extra_yaml;
    start(listen_fd);
  }
  ~AgentProcess() { stop(); }
  // "key: value\n" unless `extra` sets the key itself.
  static std::string default_key(const std::string& extra, const std::string& key,
                                 const std::string& value) {
    if (extra.find(key + ":") != std::string::npos) return "";
    return key + ": " + value + "\n";
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  void start(int listen_fd = -1) {
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      int ns = ::open(ns_path_.c_str(), O_RDONLY);
      if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) ::_exit(120);
      int log = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(log, 2);
      if (listen_fd >= 0) {
        ::dup2(listen_fd, 3);
        ::setenv("LISTEN_FDS", "1", 1);
        ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
      }
      ::execl(PVS_AGENT_BINARY, PVS_AGENT_BINARY, "--config", config_.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Ready when the socket accepts connections.
    for (int i = 0; i < 500; ++i) {
      int fd = connect_fd(socket_);
      if (fd >= 0) {
        ::close(fd);
        return;
      }
      int status;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("agent exited at start:\n" + log_text());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("agent did not start listening:\n" + log_text());
  }
  // SIGTERM and wait; returns the exit status (or -1 if not running).
  int stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  // SIGKILL: no chance to finish anything (a crash); start() again afterwards.
  void kill_now() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  const std::string& config() const { return config_; }
  std::string log_text() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string ns_path_;
  std::string dir_;
  std::string config_;
  std::string socket_;
  std::string log_;
  pid_t pid_ = -1;
};

}  // namespace pvs::test
