#include "lxc_support.h"

#include <unistd.h>

#include <sstream>

#include "backend.h"
#include "lxc_disk.h"
#include "lxc_run.h"

namespace pvs::lxctest {

using pvesim::lxc::entries;
using pvesim::lxc::slurp;

std::string own_run_dir(const std::string& lxc_dir) {
  std::string base = lxc_dir + "/pvesim-lxc";
  for (const auto& run : entries(base)) {
    std::istringstream owner(slurp(base + "/" + run + "/owner"));
    pid_t pid = 0;
    if (owner >> pid && pid == ::getpid()) return base + "/" + run;
  }
  return "";
}

pid_t init_pid(const std::string& run_dir, int vmid) {
  std::string run = run_dir.substr(run_dir.rfind('/') + 1);
  std::istringstream in(slurp(run_dir + "/pvesim-" + run + "-" + std::to_string(vmid) + "/init"));
  pid_t pid = -1;
  return in >> pid ? pid : -1;
}

long host_uid(pid_t pid) {
  std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Uid:", 0) == 0) return std::stol(line.substr(4));
  return -1;
}

std::vector<std::string> leftovers(const std::string& run_dir) {
  std::vector<std::string> out;
  for (const auto& m : pvesim::lxc::mounts_under(run_dir)) out.push_back("mount " + m);
  std::string run = run_dir.substr(run_dir.rfind('/') + 1);
  std::string prefix = "pvesim-" + run + "-";
  std::vector<std::string> roots{"/sys/fs/cgroup"};
  for (const auto& e : entries("/sys/fs/cgroup")) roots.push_back("/sys/fs/cgroup/" + e);
  for (const auto& root : roots)
    for (const auto& e : entries(root))
      if (e.find(prefix) != std::string::npos) out.push_back("cgroup " + root + "/" + e);
  for (const auto& p : entries("/proc")) {
    if (p.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = slurp("/proc/" + p + "/cmdline");
    if (cmd.find(run_dir) != std::string::npos) out.push_back("process " + p + " " + cmd);
  }
  if (::access(run_dir.c_str(), F_OK) == 0) out.push_back("dir " + run_dir);
  return out;
}

int sh(const std::string& command, std::string* out) {
  return pvesim::run_command({"sh", "-c", command}, out);
}

}  // namespace pvs::lxctest
