// The LXC configuration pvesim's lxc backend writes for a CT (what pve-container's
// update_lxc_config derives from the CT's config, for the parts the controller relies on).
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>

namespace pvesim::lxc {

struct CtSpec {
  std::string name;      // LXC's container name (unique per run)
  std::string dir;       // its directory in the lxcpath (config, log)
  std::string rootfs;    // the mounted root file system
  std::string hostname;  // lxc.uts.name
  std::string ifname;    // net0 name= (eth0)
  std::string port;      // host end of the veth, on the bridge (fwpr<vmid>p0 / veth<vmid>i0)
  std::string peer;      // the other end, moved into the container as ifname
  std::string ipv4;      // "addr/prefix" set by LXC, "" = none (DHCP inside)
  std::string gateway;   // default route with ipv4
  long long memory_mb = 512, swap_mb = 512;
  long long cores = 0;  // 0 = every CPU of the node
  // Where its cpuset starts (mod the node's CPUs): the vmid, so CTs spread over the node.
  long long first_cpu = 0;
  long long cpu_units = 0;  // Proxmox cpuunits, the CPU weight; 0 = the cgroup's default
  // The pids cgroup's cap: what `pve-sandbox-setup template` appends to the template's config
  // (`lxc.cgroup2.pids.max: TEMPLATE_PIDS_MAX`, default 1024) and every clone inherits.
  long long pids_max = 1024;
};

// The config file's text: unprivileged (idmap 0 -> 100000, 65536 ids), LXC's common.conf and
// userns.conf (capabilities, seccomp, devices), no nesting, AppArmor when the kernel has it,
// sshd as init, the memory cgroup limits, the pids cap and the cpuset.
std::string config_text(const CtSpec& spec);

// The node's online CPUs (at least 1).
long long node_cpus();

// The CPU weight's cgroup file and value for Proxmox `cpuunits` (0: the default), as
// pve-container writes them: cgroup v2 "cpu.weight" (default 100, clamped to 1..10000), v1
// "cpu.shares" (default 1024). {"", ""} when the node has no cpu controller.
std::pair<std::string, std::string> cpu_weight(long long cpu_units);

// The file `v1_file` of the cgroup the process `pid` is in, in the v1 hierarchy that has
// `controller`, else `v2_file` in the unified one; "" when there is none.
std::string cgroup_file(pid_t pid, const std::string& controller, const std::string& v1_file,
                        const std::string& v2_file);

// The memory use (bytes) of the memory cgroup the process `pid` is in; -1 if unknown.
long long cgroup_memory(pid_t pid);

}  // namespace pvesim::lxc
