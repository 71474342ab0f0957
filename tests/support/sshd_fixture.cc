#include "support/sshd_fixture.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/loopback.h"

extern char** environ;

namespace pvs::test {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("sshd fixture: cannot write " + path);
  ::chmod(path.c_str(), mode);
}

bool port_accepts(std::uint16_t port) {
  return static_cast<bool>(loopback_connect(port));
}

// Every process whose parent chain leads to `root` (not root itself).
std::set<pid_t> descendants(pid_t root) {
  std::set<pid_t> result{root};
  bool grew = true;
  while (grew) {
    grew = false;
    DIR* d = ::opendir("/proc");
    if (d == nullptr) break;
    while (dirent* e = ::readdir(d)) {
      pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
      if (pid <= 0 || result.count(pid)) continue;
      std::ifstream st("/proc/" + std::string(e->d_name) + "/stat");
      std::string line;
      std::getline(st, line);
      auto rp = line.rfind(')');
      if (rp == std::string::npos) continue;
      std::istringstream rest(line.substr(rp + 2));
      char state;
      pid_t ppid = 0;
      rest >> state >> ppid;
      if (result.count(ppid)) {
        result.insert(pid);
        grew = true;
      }
    }
    ::closedir(d);
  }
  result.erase(root);
  return result;
}

std::set<pid_t> processes_of_uid(uid_t uid) {
  std::set<pid_t> result;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return result;
  while (dirent* e = ::readdir(d)) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    struct stat st {};
    if (::stat(("/proc/" + std::string(e->d_name)).c_str(), &st) == 0 && st.st_uid == uid) {
      result.insert(pid);
    }
  }
  ::closedir(d);
  return result;
}

std::atomic<int> g_counter{0};

}  // namespace

pid_t spawn_process(const std::vector<std::string>& argv, const SpawnOptions& o) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment: ours, with o.env's names replaced or added.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    auto name = entry.substr(0, entry.find('=') + 1);
    bool replaced = std::any_of(o.env.begin(), o.env.end(),
                                [&](const std::string& x) { return x.rfind(name, 0) == 0; });
    if (!replaced) env_strings.push_back(std::move(entry));
  }
  env_strings.insert(env_strings.end(), o.env.begin(), o.env.end());
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int flags = O_WRONLY | O_CREAT | (o.append ? O_APPEND : O_TRUNC);
  auto out = o.stdout_file.empty() ? std::string("/dev/null") : o.stdout_file;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(
      &fa, 0, o.stdin_file.empty() ? "/dev/null" : o.stdin_file.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), flags, 0644);
  if (o.stderr_file.empty()) {
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
  } else {
    posix_spawn_file_actions_addopen(&fa, 2, o.stderr_file.c_str(), flags, 0644);
  }
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

int add_test_user(const std::string& name, const std::string& home, const std::string& shell) {
  if (::getpwnam(name.c_str()) != nullptr) run_command({"userdel", "-f", name});
  return run_command({"useradd", "-M", "-U", "-d", home, "-s", shell, "-p", "*", name});
}

int run_command(const std::vector<std::string>& argv, std::string* out) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int pipefd[2] = {-1, -1};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out != nullptr) {
    if (::pipe2(pipefd, O_CLOEXEC) != 0) return -1;
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
  } else {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  }
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (out != nullptr) {
    ::close(pipefd[1]);
    if (rc == 0) {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) out->append(buf, static_cast<size_t>(n));
    }
    ::close(pipefd[0]);
  }
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

SshdFixture::SshdFixture(SshdOptions options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/pvs-sshd-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("sshd fixture: mkdtemp failed");
  dir_ = tmpl;
  ::chmod(dir_.c_str(), 0755);  // sshd reads authorized_keys as the user
  home_ = dir_ + "/home";
  ::mkdir(home_.c_str(), 0755);
  client_key_ = dir_ + "/client_ed25519";
  known_hosts_ = dir_ + "/known_hosts";
  try {
    if (::access("/usr/sbin/sshd", X_OK) != 0) {
      throw std::runtime_error(
          "sshd fixture: /usr/sbin/sshd missing (apt-get install openssh-server)");
    }
    ::mkdir("/run/sshd", 0755);  // privilege separation directory
    if (run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "pvs-test-client", "-f",
                     client_key_}) != 0) {
      throw std::runtime_error("sshd fixture: ssh-keygen (client key) failed");
    }
    regenerate_host_key();
    if (options_.create_user) {
      user_ = "pvst" + std::to_string(::getpid()) + "x" + std::to_string(g_counter++);
      if (add_test_user(user_, home_, options_.login_shell) != 0) {
        throw std::runtime_error("sshd fixture: useradd " + user_ + " failed");
      }
      user_created_ = true;
      passwd* pw = ::getpwnam(user_.c_str());
      if (pw == nullptr) throw std::runtime_error("sshd fixture: user vanished");
      if (::chown(home_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        throw std::runtime_error("sshd fixture: chown home failed");
      }
    } else {
      user_ = "root";
    }
    write_file(dir_ + "/authorized_keys", read_file(client_key_ + ".pub"), 0644);
    port_ = free_port();
    write_config();
    start();
  } catch (...) {
    cleanup();
    throw;
  }
}

SshdFixture::~SshdFixture() {
  cleanup();
}

void SshdFixture::cleanup() {
  stop();
  if (user_created_) {
    passwd* pw = ::getpwnam(user_.c_str());
    if (pw != nullptr) {
      for (int round = 0; round < 3; ++round) {
        auto left = processes_of_uid(pw->pw_uid);
        if (left.empty()) break;
        for (pid_t p : left) ::kill(p, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    run_command({"userdel", "-f", user_});
    user_created_ = false;
  }
  if (!dir_.empty()) {
    run_command({"rm", "-rf", "--", dir_});
    dir_.clear();
  }
}

void SshdFixture::regenerate_host_key() {
  const std::string key = dir_ + "/host_ed25519";
  ::unlink(key.c_str());
  ::unlink((key + ".pub").c_str());
  if (run_command(
          {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "pvs-test-host", "-f", key}) != 0) {
    throw std::runtime_error("sshd fixture: ssh-keygen (host key) failed");
  }
  if (port_ != 0) write_known_hosts();
}

void SshdFixture::write_known_hosts() {
  std::string pub = read_file(dir_ + "/host_ed25519.pub");
  std::istringstream in(pub);
  std::string type, b64;
  in >> type >> b64;
  write_file(known_hosts_,
             "[" + host_ + "]:" + std::to_string(port_) + " " + type + " " + b64 + "\n", 0644);
}

std::string SshdFixture::client_key_text() const {
  return read_file(client_key_);
}

std::string SshdFixture::host_key_fingerprint() const {
  std::string out;
  run_command({"ssh-keygen", "-l", "-E", "sha256", "-f", dir_ + "/host_ed25519.pub"}, &out);
  std::istringstream in(out);
  std::string bits, fp;
  in >> bits >> fp;
  return fp;
}

std::string SshdFixture::log() const {
  return read_file(dir_ + "/sshd.log");
}

void SshdFixture::write_config() {
  std::ostringstream c;
  c << "Port " << port_ << "\n"
    << "ListenAddress " << host_ << "\n"
    << "HostKey " << dir_ << "/host_ed25519\n"
    << "PidFile " << dir_ << "/sshd.pid\n"
    << "AuthorizedKeysFile " << dir_ << "/authorized_keys\n"
    << "UsePAM no\n"
    << "StrictModes no\n"
    << "PasswordAuthentication no\n"
    << "KbdInteractiveAuthentication no\n"
    << "PubkeyAuthentication yes\n"
    << "PermitRootLogin prohibit-password\n"
    << "AllowUsers " << user_ << "\n"
    << "MaxSessions " << options_.max_sessions << "\n"
    << "MaxStartups 100:30:200\n"
    << "Subsystem sftp " << options_.sftp_subsystem << "\n"
    << "LogLevel VERBOSE\n"
    << options_.extra_config << "\n";
  write_file(dir_ + "/sshd_config", c.str(), 0644);
  write_known_hosts();
}

void SshdFixture::start() {
  if (pid_ > 0) return;
  const std::string cfg = dir_ + "/sshd_config";
  const std::string log = dir_ + "/sshd.log";
  std::vector<std::string> argv = {"/usr/sbin/sshd", "-D", "-f", cfg, "-E", log};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("sshd fixture: cannot spawn sshd");
  pid_ = pid;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!port_accepts(port_)) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("sshd fixture: sshd exited at start: " + this->log());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw std::runtime_error("sshd fixture: sshd did not listen on port " +
                               std::to_string(port_));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void SshdFixture::stop() {
  if (pid_ <= 0) return;
  // The per-connection sshd processes outlive the listener: kill them (and what they run) too.
  auto children = descendants(pid_);
  ::kill(pid_, SIGKILL);
  for (pid_t p : children) ::kill(p, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  // Wait until the port is free again so start() can bind it.
  for (int i = 0; i < 200 && port_accepts(port_); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ProcessResult run_captured(const std::vector<std::string>& argv, const std::string& dir,
                           const std::string& input, const std::vector<std::string>& env) {
  static std::atomic<int> n{0};
  std::string base = dir + "/run" + std::to_string(++n) + "-" + std::to_string(::getpid());
  std::ofstream(base + ".in", std::ios::binary) << input;
  SpawnOptions so;
  so.stdin_file = base + ".in";
  so.stdout_file = base + ".out";
  so.stderr_file = base + ".err";
  so.env = env;
  pid_t pid = spawn_process(argv, so);
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ProcessResult r;
  r.exit_code = pid <= 0 ? 127 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  for (const char* suffix : {".in", ".out", ".err"}) ::unlink((base + suffix).c_str());
  return r;
}

}  // namespace pvs::test
