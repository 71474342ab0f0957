#include "timing.h"

namespace pvesim {

std::map<std::string, int> timing_profile(const std::string& name) {
  if (name == "fast")
    return {{"vzclone", 0},       {"vzstart", 0},   {"vzstop", 0},     {"vzshutdown", 0},
            {"vzdestroy", 0},     {"resize", 0},    {"vzsnapshot", 0}, {"vzrollback", 0},
            {"vzdelsnapshot", 0}, {"vztemplate", 0}};
  if (name == "realistic")  // README.md cites where each figure comes from
    return {{"vzclone", 1500},      {"vzstart", 1500},  {"vzstop", 1000},     {"vzshutdown", 3000},
            {"vzdestroy", 800},     {"resize", 600},    {"vzsnapshot", 1000}, {"vzrollback", 1500},
            {"vzdelsnapshot", 800}, {"vztemplate", 500}};
  return {};
}

}  // namespace pvesim
