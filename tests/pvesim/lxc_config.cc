#include "lxc_config.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "lxc_disk.h"

namespace pvesim::lxc {

namespace {

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

// Where the controller `c` is: "2" (the unified hierarchy has it), "1" (a v1 hierarchy at
// /sys/fs/cgroup/<c>) or "" (neither).
std::string cgroup_version(const std::string& c) {
  std::string controllers = " " + first_line("/sys/fs/cgroup/cgroup.controllers") + " ";
  if (controllers.find(" " + c + " ") != std::string::npos) return "2";
  return exists("/sys/fs/cgroup/" + c) ? "1" : "";
}

}  // namespace

std::string config_text(const CtSpec& s) {
  std::ostringstream o;
  auto add = [&](const std::string& key, const std::string& value) {
    o << key << " = " << value << "\n";
  };
  add("lxc.include", "/usr/share/lxc/config/common.conf");
  add("lxc.include", "/usr/share/lxc/config/userns.conf");
  add("lxc.arch", "linux64");
  add("lxc.uts.name", s.hostname);
  add("lxc.rootfs.path", "dir:" + s.rootfs);
  const std::string shift = std::to_string(kShift);
  add("lxc.idmap", "u 0 " + shift + " 65536");
  add("lxc.idmap", "g 0 " + shift + " 65536");
  // sshd is init: a clean halt is its SIGTERM; it reaps what its sessions leave.
  add("lxc.init.cmd", "/usr/sbin/sshd -D -e");
  add("lxc.signal.halt", "SIGTERM");
  add("lxc.console.path", "none");
  add("lxc.tty.max", "0");
  add("lxc.log.file", s.dir + "/log");
  add("lxc.log.level", "WARN");
  bool apparmor = exists("/sys/kernel/security/apparmor/profiles") &&
                  (exists("/sbin/apparmor_parser") || exists("/usr/sbin/apparmor_parser"));
  add("lxc.apparmor.profile", apparmor ? "generated" : "unconfined");
  if (apparmor) add("lxc.apparmor.allow_nesting", "0");
  add("lxc.net.0.type", "phys");
  add("lxc.net.0.link", s.peer);
  add("lxc.net.0.name", s.ifname);
  add("lxc.net.0.flags", "up");
  if (!s.ipv4.empty()) {
    add("lxc.net.0.ipv4.address", s.ipv4);
    if (!s.gateway.empty()) add("lxc.net.0.ipv4.gateway", s.gateway);
  }
  const long long mem = s.memory_mb << 20, swap = s.swap_mb << 20;
  std::string v = cgroup_version("memory");
  if (v == "2") {
    add("lxc.cgroup2.memory.max", std::to_string(mem));
    if (exists("/sys/fs/cgroup/init.scope/memory.swap.max") ||
        exists("/sys/fs/cgroup/user.slice/memory.swap.max"))
      add("lxc.cgroup2.memory.swap.max", std::to_string(swap));
  } else if (v == "1") {
    add("lxc.cgroup.memory.limit_in_bytes", std::to_string(mem));
    if (exists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"))
      add("lxc.cgroup.memory.memsw.limit_in_bytes", std::to_string(mem + swap));
  }
  v = cgroup_version("pids");
  if (v == "2") add("lxc.cgroup2.pids.max", std::to_string(s.pids_max));
  if (v == "1") add("lxc.cgroup.pids.max", std::to_string(s.pids_max));
  if (auto [file, value] = cpu_weight(s.cpu_units); s.cpu_units > 0 && !file.empty())
    add(std::string(file == "cpu.weight" ? "lxc.cgroup2." : "lxc.cgroup.") + file, value);
  const long long cpus = node_cpus();
  if (s.cores > 0 && s.cores < cpus) {
    // N CPUs from first_cpu on, wrapping: CTs spread over the node as Proxmox's balancing of
    // cpusets spreads them (not all on CPU 0, where a burst of CTs would share one core).
    std::string set;
    for (long long k = 0; k < s.cores; ++k)
      set += (k ? "," : "") + std::to_string((s.first_cpu + k) % cpus);
    v = cgroup_version("cpuset");
    if (v == "2") add("lxc.cgroup2.cpuset.cpus", set);
    if (v == "1") add("lxc.cgroup.cpuset.cpus", set);
  }
  return o.str();
}

long long node_cpus() {
  return std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
}

std::pair<std::string, std::string> cpu_weight(long long cpu_units) {
  std::string v = cgroup_version("cpu");
  if (v == "2")
    return {"cpu.weight",
            std::to_string(cpu_units > 0 ? std::clamp(cpu_units, 1LL, 10000LL) : 100LL)};
  if (v == "1") return {"cpu.shares", std::to_string(cpu_units > 0 ? cpu_units : 1024LL)};
  return {"", ""};
}

std::string cgroup_file(pid_t pid, const std::string& controller, const std::string& v1_file,
                        const std::string& v2_file) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  std::string unified;
  bool found = false;
  for (std::string line; std::getline(in, line);) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (("," + controllers + ",").find("," + controller + ",") != std::string::npos) {
      std::string file = "/sys/fs/cgroup/" + controllers + path + "/" + v1_file;
      return exists(file) ? file : "";
    }
    if (controllers.empty()) {
      unified = path;
      found = true;
    }
  }
  if (!found) return "";
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"})
    if (exists(root + unified + "/" + v2_file)) return root + unified + "/" + v2_file;
  return "";
}

long long cgroup_memory(pid_t pid) {
  auto text = first_line(cgroup_file(pid, "memory", "memory.usage_in_bytes", "memory.current"));
  return text.empty() ? -1 : std::stoll(text);
}

}  // namespace pvesim::lxc
