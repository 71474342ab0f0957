// A session's bulk clients (session_impl.h: BulkClients): their private directory, the clients
// running, and the session's OpenSSH master, which keeps one authenticated connection for them
// (ControlPersist) so that a transfer does not pay a key exchange and a login each.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "openssh_bulk.h"

namespace pvs::ssh_detail {
namespace {

// Runs `argv` with every stdio on /dev/null and waits for it, at most `limit`.
void run_quietly(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int fd : {0, 1, 2}) {
    posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char path_var[] = "PATH=/usr/bin:/bin";
  char* env[] = {path_var, nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), env);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return;
  const auto until = Clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() >= until) {
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, &status, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::string write_private_file(const std::string& dir, const std::string& name,
                               std::string_view content) {
  static std::atomic<std::uint64_t> parts{0};
  const std::string file = dir + "/" + name,
                    part = file + ".part-" + std::to_string(parts.fetch_add(1));
  int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return "";
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(fd);
  if (!ok || ::rename(part.c_str(), file.c_str()) != 0) {
    ::unlink(part.c_str());
    return "";
  }
  return file;
}

std::string BulkClients::dir(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dir_.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(tmp != nullptr && *tmp == '/' ? tmp : "/tmp") + "/pvs-bulk-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  }
  client_ = client;
  return dir_;
}

std::string BulkClients::control(std::uint64_t connection) {
  std::lock_guard<std::mutex> lock(mu_);
  masters_.insert(connection);
  return dir_ + "/" + of_connection("ctl", connection);
}

std::string BulkClients::of_connection(std::string_view kind, std::uint64_t connection) {
  return std::string(kind) + "-" + std::to_string(connection);
}

std::uint64_t BulkClients::epoch() {
  std::lock_guard<std::mutex> lock(mu_);
  return epoch_;
}

void BulkClients::add(pid_t pid, std::uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool stopped = epoch != epoch_;
  if (stopped) ::kill(pid, SIGKILL);
  killed_[pid] = stopped;
}

void BulkClients::pause(std::chrono::steady_clock::time_point until) {
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = until;
}

bool BulkClients::paused() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::chrono::steady_clock::now() < paused_;
}

bool BulkClients::remove(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = killed_.find(pid);
  const bool killed = it != killed_.end() && it->second;
  if (it != killed_.end()) killed_.erase(it);
  return killed;
}

void BulkClients::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  ++epoch_;
  for (auto& [pid, killed] : killed_) {
    ::kill(pid, SIGKILL);
    killed = true;
  }
  end_masters();
}

// A master ends at `-O exit` (or by itself ControlPersist after its last client).
void BulkClients::end_masters() {
  if (dir_.empty() || client_.empty()) return;
  for (std::uint64_t connection : masters_) {
    const std::string control = dir_ + "/" + of_connection("ctl", connection);
    struct stat st {};
    if (::lstat(control.c_str(), &st) != 0) continue;
    run_quietly({client_, "-F", "/dev/null", "-o", "ControlPath=\"" + control + "\"", "-O", "exit",
                 "--", "pvs-bulk"},
                std::chrono::seconds(2));
  }
}

BulkClients::~BulkClients() {
  std::lock_guard<std::mutex> lock(mu_);
  end_masters();
  if (dir_.empty()) return;
  std::vector<std::string> names = {"id"};
  for (std::uint64_t connection : masters_) {
    for (const char* kind : {"ctl", "known_hosts"})
      names.push_back(of_connection(kind, connection));
  }
  for (const auto& name : names) ::unlink((dir_ + "/" + name).c_str());
  ::rmdir(dir_.c_str());
}

}  // namespace pvs::ssh_detail
