// `pve-sandbox-resolver check-config`'s cross-checks (#32): the resolver's limits against what
// the systemd unit grants it (TasksMax, LimitNOFILE) and against the agent's max_clients, so a
// raised limit is refused before the daemon meets it under load.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"
#include "resolver_config.h"

namespace pvs::resolver {

// The resolver's threads: main (signals) and the event loop. c-ares runs on the loop.
inline constexpr std::uint64_t kThreads = 2;

struct UnitLimits {
  std::optional<std::uint64_t> tasks_max;  // nullopt: not set or infinity
  std::optional<std::uint64_t> nofile;     // LimitNOFILE's soft limit
};

// Reads TasksMax= and LimitNOFILE= from unit files in order (a later file overrides, as
// systemd's drop-ins do).
Result<UnitLimits> read_unit_limits(const std::vector<std::string>& paths);
// The unit file and its drop-ins as installed (those that exist).
std::vector<std::string> installed_unit_files();
// max_clients of an agent.yaml (64 when not set).
Result<std::uint64_t> read_agent_max_clients(const std::string& path);

// File descriptors the resolver may hold at once with `config`.
std::uint64_t fds_needed(const ResolverConfig& config);
// Errors when `config` needs more than `unit` allows or more agent connections than half the
// agent's max_clients (the other half is the controller's and the operators').
Status check_limits(const ResolverConfig& config, const UnitLimits& unit,
                    std::optional<std::uint64_t> agent_max_clients);

}  // namespace pvs::resolver
