// Named task timing profiles for pvesim: how long each task type takes (ms). "fast" is every
// task at 0 ms (the tests' default); "realistic" uses durations of real Proxmox nodes, with
// their sources in README.md ("Realistic timing profile").
#pragma once

#include <map>
#include <string>

namespace pvesim {

// Task type (vzclone, vzstart, ...) -> milliseconds; empty for an unknown profile name.
std::map<std::string, int> timing_profile(const std::string& name);

}  // namespace pvesim
