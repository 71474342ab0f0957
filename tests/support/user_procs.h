// What a user runs, as /proc shows it: for tests that check what a command left behind on the
// sshd fixture's throw-away user (nothing else runs as that user).
//
//   const uid_t uid = pvs::test::home_uid(sshd.home());
//   EXPECT_TRUE(pvs::test::wait_until_gone(uid, {"sleep 1001"}, 25s));
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pvesandbox/common/unique_fd.h"

namespace pvs::test {

// The pids and command lines of `uid`'s processes, NULs as spaces. A process may exit while it
// is read: reading its cmdline then fails (ESRCH), and it is left out, as gone.
inline std::vector<std::pair<pid_t, std::string>> user_processes(uid_t uid) {
  std::vector<std::pair<pid_t, std::string>> out;
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir("/proc"), ::closedir);
  while (dirent* e = ::readdir(d.get())) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    struct stat st {};
    std::string p = std::string("/proc/") + e->d_name;
    if (::stat(p.c_str(), &st) != 0 || st.st_uid != uid) continue;
    pvs::UniqueFd fd(::open((p + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    std::string cmd;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) {
      cmd.append(buf, static_cast<std::size_t>(n));
    }
    if (n < 0 || cmd.empty()) continue;
    for (auto& c : cmd) {
      if (c == '\0') c = ' ';
    }
    out.emplace_back(static_cast<pid_t>(std::stol(e->d_name)), cmd);
  }
  return out;
}

// Their command lines.
inline std::vector<std::string> user_commands(uid_t uid) {
  std::vector<std::string> out;
  for (auto& [pid, cmd] : user_processes(uid)) out.push_back(std::move(cmd));
  return out;
}

// Those whose command line contains one of `needles`.
inline std::vector<std::string> user_commands_matching(uid_t uid,
                                                       std::initializer_list<const char*> needles) {
  std::vector<std::string> out;
  for (const auto& c : user_commands(uid)) {
    for (const char* n : needles) {
      if (c.find(n) != std::string::npos) {
        out.push_back(c);
        break;
      }
    }
  }
  return out;
}

// Polls until no process of `uid` matches (true), or `limit` passes (false).
inline bool wait_until_gone(uid_t uid, std::initializer_list<const char*> needles,
                            std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (!user_commands_matching(uid, needles).empty()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// The owner of `home` (the fixture's user).
inline uid_t home_uid(const std::string& home) {
  struct stat st {};
  return ::stat(home.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
}

}  // namespace pvs::test
