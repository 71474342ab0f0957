// `pve-sandbox-agent relay`: copies stdin to the agent socket and the socket to stdout, so a
// remote controller can reach the agent through an SSH forced command.
#pragma once

#include <string>

namespace pvs::agent {

// Returns the process exit code: 0 when both directions ended cleanly.
int run_relay(const std::string& socket_path, int in_fd, int out_fd);

}  // namespace pvs::agent
