// ssh_bench's clocks, processes and CPU accounting (ssh_bench_proc.h).
#include "ssh_bench_proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

extern char** environ;

namespace ssh_bench {

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double median(std::vector<double> v) {
  return percentile(std::move(v), 0.5);
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& stderr_file) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int run(const std::vector<std::string>& argv, const std::string& stderr_file) {
  pid_t pid = spawn(argv, stderr_file);
  return pid < 0 ? -1 : wait_exit(pid);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::string grep_line(const std::string& text, const std::string& needle) {
  auto at = text.find(needle);
  if (at == std::string::npos) return "?";
  auto end = text.find('\n', at);
  return text.substr(at + needle.size(), end - at - needle.size());
}

std::string load_average() {
  std::string s = read_file("/proc/loadavg");
  auto sp = s.find(' ');
  sp = s.find(' ', sp + 1);
  sp = s.find(' ', sp + 1);
  return s.substr(0, sp);
}

// CPU time (user + system) of this process so far, all threads.
double process_cpu_ms() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& tv) { return tv.tv_sec * 1000.0 + tv.tv_usec / 1000.0; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// CPU time (ms) of this process's reaped children so far.
double children_cpu_ms() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  auto ms = [](const timeval& tv) { return tv.tv_sec * 1000.0 + tv.tv_usec / 1000.0; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// Reaps every finished child (the bench is a subreaper, so orphaned remote processes such as
// the timed exec's watchdogs end up here and their CPU time in children_cpu_ms()).
void reap_orphans() {
  int status = 0;
  while (waitpid(-1, &status, WNOHANG) > 0) {
  }
}

namespace {

// The fields of /proc/<pid>/stat after the command name: [0] state (field 3), [1] ppid,
// [11..14] utime stime cutime cstime (clock ticks); empty when the process is gone.
std::vector<std::string> stat_fields(pid_t pid) {
  std::string st = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close_paren = st.rfind(')');
  std::vector<std::string> f;
  if (close_paren == std::string::npos || close_paren + 2 > st.size()) return f;
  std::istringstream in(st.substr(close_paren + 2));
  for (std::string w; in >> w && f.size() < 16;) f.push_back(w);
  if (f.size() < 15) f.clear();
  return f;
}

double ticks_ms(const std::string& a, const std::string& b) {
  return (std::atof(a.c_str()) + std::atof(b.c_str())) * 1000.0 /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

// utime+stime and cutime+cstime, in ms, of every process below `root` (exclusive).
TreeCpu tree_cpu(pid_t root) {
  struct Proc {
    pid_t ppid;
    double own, children;
  };
  std::map<pid_t, Proc> procs;
  DIR* d = opendir("/proc");
  while (dirent* e = d ? readdir(d) : nullptr) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    auto f = stat_fields(pid);
    if (f.empty()) continue;
    procs[pid] = Proc{static_cast<pid_t>(std::atoi(f[1].c_str())), ticks_ms(f[11], f[12]),
                      ticks_ms(f[13], f[14])};
  }
  if (d) closedir(d);
  TreeCpu sum;
  for (const auto& [pid, p] : procs) {
    for (pid_t a = p.ppid; a > 1;) {
      if (a == root) {
        sum.own += p.own;
        sum.children += p.children;
        break;
      }
      auto it = procs.find(a);
      if (it == procs.end()) break;
      a = it->second.ppid;
    }
  }
  return sum;
}

// Everything the sshd under `root` has spent so far: its live descendants (themselves and what
// they reaped) and, through the listener's cutime, the connections that have ended.
double server_cpu_ms(pid_t root) {
  TreeCpu t = tree_cpu(root);
  auto f = stat_fields(root);
  return t.own + t.children + (f.empty() ? 0.0 : ticks_ms(f[13], f[14]));
}

// The processes below `root` (exclusive), by walking parent links in /proc.
std::set<pid_t> descendants(pid_t root) {
  std::map<pid_t, pid_t> parent;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
    auto f = pid > 0 ? stat_fields(pid) : std::vector<std::string>{};
    if (!f.empty()) parent[pid] = static_cast<pid_t>(std::atoi(f[1].c_str()));
  }
  std::set<pid_t> out;
  for (const auto& [pid, pp] : parent) {
    for (pid_t a = pp; a > 1; a = parent.count(a) ? parent[a] : 0) {
      if (a == root) {
        out.insert(pid);
        break;
      }
    }
  }
  return out;
}

// Waits (3 s at most) until the processes below `root` are `before` again: a transfer's
// server-side process must have been reaped, so that its CPU is in its parent's cutime.
void await_tree(pid_t root, const std::set<pid_t>& before) {
  for (int i = 0; i < 600 && descendants(root) != before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

// The live `ssh` processes this one adopted (the bulk clients' masters).
double adopted_ssh_cpu_ms(pid_t except) {
  double sum = 0;
  const pid_t self = getpid();
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry.path().filename().c_str()));
    if (pid <= 0 || pid == except) continue;
    auto f = stat_fields(pid);
    if (f.empty() || std::atoi(f[1].c_str()) != self) continue;
    std::string comm = read_file("/proc/" + std::to_string(pid) + "/comm");
    if (comm == "ssh\n") sum += ticks_ms(f[11], f[12]);
  }
  return sum;
}

// utime + stime (ms) of one live process.
double own_cpu_ms(pid_t pid) {
  auto f = stat_fields(pid);
  return f.empty() ? 0.0 : ticks_ms(f[11], f[12]);
}

}  // namespace ssh_bench
