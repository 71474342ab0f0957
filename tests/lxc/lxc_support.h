// What the real-container tests look at on the node: the lxc backend's run directory of this
// process (tests/pvesim/lxc_run.h), its containers' init processes, mounts, cgroups and ports.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pvs::lxctest {

// /tmp/pvesim-lxc/<run> whose owner is this process (the in-process simulator's), or "".
std::string own_run_dir(const std::string& lxc_dir = "/tmp");
// The host pid of the init of CT `vmid` of the run (from its init file); -1 if not running.
pid_t init_pid(const std::string& run_dir, int vmid);
// The uid of a process as the node sees it (Uid: line of /proc/<pid>/status), -1 if gone.
long host_uid(pid_t pid);

// Everything of the run that exists now, one line each ("mount X", "cgroup X", "process X",
// "dir X"): empty once the run is gone.
std::vector<std::string> leftovers(const std::string& run_dir);

// Runs a shell command on the node; its exit code and output.
int sh(const std::string& command, std::string* out = nullptr);

}  // namespace pvs::lxctest
