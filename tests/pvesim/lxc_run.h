// Files of one run of pvesim's lxc backend, shared by the backend and the sweep.
//
//   <lxc_dir>/pvesim-lxc/<run>/owner          "<pid> <starttime>" of the pvesim process
//   <lxc_dir>/pvesim-lxc/<run>/<name>/        LXC's lxcpath entry of a CT (config, log) and its
//                                             disk (lxc_disk.h); <name> = pvesim-<run>-<vmid>
//   <lxc_dir>/pvesim-lxc/<run>/<name>/init    "<pid> <starttime>" of the running container's init
//   <lxc_dir>/pvesim-lxc/<run>/<name>/port    "<bridge port> <peer> <node netns or ->"
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pvesim::lxc {

// The names in a directory (not . and ..); none when it cannot be read.
std::vector<std::string> entries(const std::string& dir);
// A file's contents; "" when it cannot be read.
std::string slurp(const std::string& path);

// Field 22 of /proc/<pid>/stat (the start time), "" when the process is gone.
std::string start_time(pid_t pid);
// Whether the process named "<pid> <starttime>" in the file `path` still runs; *pid is set
// only when the record is whole.
bool recorded_alive(const std::string& path, pid_t* pid = nullptr);
// Writes "<pid> <starttime>" of `pid` to `path`, whole (by rename) or not at all.
void record_process(const std::string& path, pid_t pid);
// Removes a stopped container's cgroups (lxc.payload.<name>, lxc.monitor.<name>) wherever
// a cgroup hierarchy is mounted under /sys/fs/cgroup.
void remove_cgroups(const std::string& name);
// Removes one run's containers (SIGKILL to their init, then their monitors clean up), ports,
// mounts, cgroups and files.
void sweep_run(const std::string& run_dir);

}  // namespace pvesim::lxc
