// What a killed pvesim's lxc backend leaves, and how the next one (or `pvesim --lxc-sweep`)
// removes it.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "backend.h"
#include "lxc_disk.h"
#include "lxc_run.h"

namespace pvesim::lxc {

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
  }
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// PIDs of the LXC monitors of containers under the lxcpath `run_dir` ("[lxc monitor] <path>
// <name>").
std::vector<pid_t> monitors(const std::string& run_dir) {
  std::vector<pid_t> out;
  std::string want = "[lxc monitor] " + run_dir + " ";
  for (const auto& e : entries("/proc")) {
    if (e.find_first_not_of("0123456789") != std::string::npos) continue;
    if (slurp("/proc/" + e + "/cmdline").rfind(want, 0) == 0) out.push_back(std::stoi(e));
  }
  return out;
}

void remove_tree_of_cgroups(const std::string& path) {
  for (const auto& e : entries(path))
    if (::access((path + "/" + e + "/cgroup.procs").c_str(), F_OK) == 0)
      remove_tree_of_cgroups(path + "/" + e);
  ::rmdir(path.c_str());
}

}  // namespace

std::string start_time(pid_t pid) {
  std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i) {
  }
  return field;
}

bool recorded_alive(const std::string& path, pid_t* pid_out) {
  std::istringstream in(slurp(path));
  pid_t pid = 0;
  std::string start;
  if (!(in >> pid >> start) || pid <= 0) return false;
  if (pid_out) *pid_out = pid;
  return start_time(pid) == start;
}

void record_process(const std::string& path, pid_t pid) {
  // Whole or not at all: a sweep running beside this one must never read an empty record.
  std::string part = path + ".part";
  std::ofstream(part) << pid << " " << start_time(pid) << "\n";
  ::rename(part.c_str(), path.c_str());
}

void remove_cgroups(const std::string& name) {
  std::vector<std::string> roots{"/sys/fs/cgroup"};
  for (const auto& e : entries("/sys/fs/cgroup")) roots.push_back("/sys/fs/cgroup/" + e);
  for (const auto& root : roots)
    for (const char* kind : {"/lxc.payload.", "/lxc.monitor."})
      if (::access((root + kind + name).c_str(), F_OK) == 0)
        remove_tree_of_cgroups(root + kind + name);
}

void sweep_run(const std::string& run_dir) {
  using namespace std::chrono_literals;
  auto cts = entries(run_dir);
  for (const auto& name : cts) {
    pid_t pid = 0;
    if (recorded_alive(run_dir + "/" + name + "/init", &pid)) ::kill(pid, SIGKILL);
  }
  // The monitors notice their init's death, free its cgroups and network and exit.
  for (int i = 0; i < 500 && !monitors(run_dir).empty(); ++i) std::this_thread::sleep_for(10ms);
  for (pid_t m : monitors(run_dir)) ::kill(m, SIGKILL);
  for (const auto& name : cts) {
    std::istringstream port(slurp(run_dir + "/" + name + "/port"));
    std::string host_end, peer, netns;
    if (port >> host_end >> peer >> netns) {
      std::vector<std::string> ip{"ip"};
      if (netns != "-") ip.insert(ip.end(), {"-n", netns});
      for (const auto& link : {host_end, peer}) {
        auto argv = ip;
        argv.insert(argv.end(), {"link", "del", link});
        run_command(argv);
      }
    }
    remove_cgroups(name);
  }
  Disk all{run_dir, {}, true};
  unmount_disk(all);
  run_command({"rm", "-rf", "--one-file-system", run_dir});
}

}  // namespace pvesim::lxc

namespace pvesim {

int lxc_sweep(const std::string& dir) {
  std::string base = dir + "/pvesim-lxc";
  int swept = 0;
  for (const auto& run : lxc::entries(base)) {
    std::string run_dir = base + "/" + run;
    pid_t owner = 0;  // stays 0 without a whole record
    if (lxc::recorded_alive(run_dir + "/owner", &owner)) continue;
    struct stat st {};
    // A run being set up has no owner record yet for an instant: a young run without one is
    // another simulator's, starting beside this one.
    if (owner == 0 && ::stat(run_dir.c_str(), &st) == 0 && std::time(nullptr) - st.st_mtime < 60)
      continue;
    lxc::sweep_run(run_dir);
    ++swept;
  }
  return swept;
}

}  // namespace pvesim
