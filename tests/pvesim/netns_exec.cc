#include "netns_exec.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "backend_util.h"

namespace pvesim::detail {
namespace {

// Everything the child needs, made before it starts: it shares this process's memory until its
// exec (CLONE_VM | CLONE_VFORK, as posix_spawn), so it only makes system calls.
struct ChildPlan {
  std::string ns_path;
  std::string ns;
  unsigned long sys_flags = 0;
  std::vector<std::pair<std::string, std::string>> etc_binds;  // source, target
  bool private_tmp = false;
  std::string keep;
  std::vector<std::string> keep_parents;  // "/tmp/a", "/tmp/a/b", ...: made in the new /tmp
  std::string keep_fd_path;               // filled by the child: /proc/self/fd/<n>
  int stdout_fd = -1;
  int devnull = -1;
  std::vector<char*> argv;
  char** envp = nullptr;
};

// The child's error line (no allocation, no stdio): "pvesim: <what> failed: errno <n>".
__attribute__((no_sanitize("address", "undefined"))) void child_fail(int fd, const char* what) {
  int e = errno;
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + e % 10);
    e /= 10;
  } while (e > 0 && n < 15);
  char line[256];
  std::size_t len = 0;
  auto put = [&](const char* s, std::size_t k) {
    for (std::size_t i = 0; i < k && len < sizeof line; ++i) line[len++] = s[i];
  };
  put("pvesim: ", 8);
  put(what, std::strlen(what));
  put(" failed: errno ", 15);
  while (n > 0 && len < sizeof line) line[len++] = digits[--n];
  put("\n", 1);
  (void)!::write(fd, line, len);
  ::_exit(127);
}

// iproute2's netns_switch and bind_etc (lib/namespace.c), then the private /tmp, then exec.
__attribute__((no_sanitize("address", "undefined"))) int child_main(void* arg) {
  auto& p = *static_cast<ChildPlan*>(arg);
  const int err = p.stdout_fd >= 0 ? p.stdout_fd : p.devnull;
  int nsfd = ::open(p.ns_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) != 0) child_fail(err, "setns");
  ::close(nsfd);
  if (::unshare(CLONE_NEWNS) != 0) child_fail(err, "unshare");
  if (::mount("", "/", "none", MS_SLAVE | MS_REC, nullptr) != 0)
    child_fail(err, "mount --make-rslave /");
  (void)::umount2("/sys", MNT_DETACH);  // none there is fine, as for ip
  if (::mount(p.ns.c_str(), "/sys", "sysfs", p.sys_flags, nullptr) != 0)
    child_fail(err, "mount /sys");
  for (auto& [from, to] : p.etc_binds)
    (void)::mount(from.c_str(), to.c_str(), "none", MS_BIND, nullptr);
  if (p.private_tmp) {
    int keep = ::open(p.keep.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (keep < 0) child_fail(err, "open the directory to keep");
    if (::mount("pvesim-tmp", "/tmp", "tmpfs", 0, "size=64m,mode=1777") != 0)
      child_fail(err, "mount /tmp");
    for (auto& dir : p.keep_parents) {
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) child_fail(err, "mkdir in /tmp");
    }
    // /proc/self/fd/<keep>, written into the buffer the parent sized for it.
    char* path = p.keep_fd_path.data();
    std::size_t len = std::strlen("/proc/self/fd/");
    char digits[16];
    int n = 0;
    for (int v = keep; n == 0 || v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
    while (n > 0) path[len++] = digits[--n];
    path[len] = '\0';
    if (::mount(path, p.keep.c_str(), nullptr, MS_BIND, nullptr) != 0)
      child_fail(err, "bind the kept directory");
    ::close(keep);
  }
  if (::dup2(p.devnull, 0) < 0 || ::dup2(err, 1) < 0 || ::dup2(err, 2) < 0) child_fail(err, "dup2");
  ::execve(p.argv[0], p.argv.data(), p.envp);
  child_fail(2, "exec");
  return 127;
}

}  // namespace

std::vector<pid_t> pids_in_netns(const std::string& ns) {
  std::vector<pid_t> pids;
  struct stat want {};
  if (::stat(("/run/netns/" + ns).c_str(), &want) != 0) return pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    struct stat have {};
    std::string path = std::string("/proc/") + e->d_name + "/ns/net";
    if (::stat(path.c_str(), &have) == 0 && have.st_dev == want.st_dev &&
        have.st_ino == want.st_ino)
      pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return pids;
}

pid_t spawn_in_netns(const std::string& ns, const std::vector<std::string>& argv, bool private_tmp,
                     const std::string& keep, int out_fd) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') return -1;
  ChildPlan p;
  p.ns = ns;
  p.ns_path = "/run/netns/" + ns;
  struct statvfs sys {};
  if (::statvfs("/sys", &sys) == 0 && (sys.f_flag & ST_RDONLY) != 0) p.sys_flags = MS_RDONLY;
  std::string etc = "/etc/netns/" + ns;
  if (DIR* d = ::opendir(etc.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      p.etc_binds.emplace_back(etc + "/" + name, "/etc/" + name);
    }
    ::closedir(d);
  }
  p.private_tmp = private_tmp;
  if (private_tmp) {
    if (keep.rfind("/tmp/", 0) != 0) return -1;
    p.keep = keep;
    for (auto at = keep.find('/', 5);; at = keep.find('/', at + 1)) {
      p.keep_parents.push_back(keep.substr(0, at));
      if (at == std::string::npos) break;
    }
    p.keep_fd_path.assign(64, '\0');
    std::memcpy(p.keep_fd_path.data(), "/proc/self/fd/", 14);
  }
  std::vector<std::string> args = argv;
  for (auto& a : args) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  p.envp = environ;
  p.stdout_fd = out_fd;
  p.devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (p.devnull < 0) return -1;
  constexpr std::size_t kStack = 256 * 1024;
  void* stack = ::mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  pid_t pid = -1;
  if (stack != MAP_FAILED) {
    // CLONE_VFORK: this thread waits until the child has exec'd (or exited), so `p` and the
    // stack stay valid for as long as it uses them.
    pid = ::clone(child_main, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD,
                  &p);
    ::munmap(stack, kStack);
  }
  ::close(p.devnull);
  return pid;
}

int ip_batch(const std::string& ns, const std::vector<std::string>& commands, std::string* out) {
  std::string input;
  for (const auto& c : commands) input += c + "\n";
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return -1;
  // The commands fit the pipe's buffer (a few lines), so writing them first cannot block.
  (void)!::write(in[1], input.data(), input.size());
  ::close(in[1]);
  int rc = run_command({"ip", "-n", ns, "-batch", "-"}, out, in[0]);
  ::close(in[0]);
  return rc;
}

}  // namespace pvesim::detail
