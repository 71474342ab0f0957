#include "key_reload.h"

#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cstring>

namespace pvesim {

SshdKeyReload::SshdKeyReload() : fd_(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK)) {
  if (fd_ >= 0) thread_ = std::thread([this] { run(); });
}

SshdKeyReload::~SshdKeyReload() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

void SshdKeyReload::watch(int vmid, const std::string& ssh_dir, pid_t pid) {
  if (fd_ < 0 || pid <= 0) return;
  int wd = ::inotify_add_watch(fd_, ssh_dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO);
  if (wd < 0) return;
  std::lock_guard lock(mu_);
  by_vmid_[vmid] = {wd, pid};
}

void SshdKeyReload::forget(int vmid) {
  std::lock_guard lock(mu_);
  auto it = by_vmid_.find(vmid);
  if (it == by_vmid_.end()) return;
  ::inotify_rm_watch(fd_, it->second.first);
  by_vmid_.erase(it);
}

void SshdKeyReload::run() {
  alignas(inotify_event) char buf[4096];
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    ssize_t n = ::read(fd_, buf, sizeof buf);
    for (ssize_t at = 0; n > 0 && at < n;) {
      auto* e = reinterpret_cast<inotify_event*>(buf + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      if (e->len == 0 || std::strcmp(e->name, "ssh_host_ed25519_key.pub") != 0) continue;
      std::lock_guard lock(mu_);
      for (const auto& [vmid, watched] : by_vmid_)
        if (watched.first == e->wd) ::kill(watched.second, SIGHUP);
    }
  }
}

}  // namespace pvesim
