// The netns backend's stand-in for what root in a container does after replacing its SSH host
// key: tell the CT's sshd to re-read it (SIGHUP). OpenSSH 9.8 and later (Debian 13) load host
// keys once in the listener; the controller's key replacement signals it through
// /run/sshd.pid, which the netns stand-in (a host user, no pid file of its own) cannot. When a
// watched CT's ssh_host_ed25519_key.pub is written, a thread sends its sshd SIGHUP at once (the
// controller waits for a listener that still presents the key it replaced).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace pvesim {

class SshdKeyReload {
 public:
  SshdKeyReload();
  ~SshdKeyReload();
  SshdKeyReload(const SshdKeyReload&) = delete;
  SshdKeyReload& operator=(const SshdKeyReload&) = delete;

  // Watches `ssh_dir` (the CT's /etc/ssh) for a new host key, for the sshd `pid`.
  void watch(int vmid, const std::string& ssh_dir, pid_t pid);
  void forget(int vmid);

 private:
  void run();

  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<int, std::pair<int, pid_t>> by_vmid_;  // vmid -> (watch descriptor, sshd pid)
  std::thread thread_;
};

}  // namespace pvesim
