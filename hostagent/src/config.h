// The agent's configuration, /etc/pve-sandbox/agent.yaml (see docs/agent.md).
//
// Only sandbox_cidr is required. Unknown keys are errors (a typo must not silently fall back to
// a default), and every error names the file, the key and what is wrong.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/io.h"
#include "pvesandbox/common/ipv4.h"

namespace pvs::agent {

inline constexpr std::string_view kDefaultConfigPath = "/etc/pve-sandbox/agent.yaml";

enum class DestroyMode { kAuto, kNative, kEmulate };

struct AgentConfig {
  std::string socket{kDefaultAgentSocket};
  std::string socket_group = "pve-sandbox";  // empty: keep the group of the process
  std::vector<uid_t> allowed_uids = {0};
  std::vector<gid_t> allowed_gids;
  // The resolver's uids: they may send only HELLO, ASK, PAIR and STATUS (docs/agent.md).
  std::vector<uid_t> resolver_uids;
  Cidr sandbox_cidr;
  Ipv4Address gateway;  // default: the first host address of sandbox_cidr
  std::string family = "inet";
  std::string table = "sandbox";
  std::string set = "internet_allowed";
  std::string l2_table = "sandbox_l2";  // table bridge <l2_table>
  std::string port_mac_set = "port_mac";
  std::string port_ip4_set = "port_ip4";
  // Egress by domain (#20): sources in allowlist mode, and their (src . dst . port) pairs.
  std::string egress_listed_set = "egress_listed";
  std::string egress_pairs_set = "egress_pairs";
  // In the runtime directory (tmpfs) and not fsync'ed: see docs/agent.md "Desired state".
  std::string state_file = "/run/pve-sandbox/agent-state";
  bool state_fsync = false;
  std::uint32_t max_elements = 65536;
  std::uint32_t max_bindings = 4096;
  std::uint32_t max_pairs = 65536;
  std::uint32_t max_pairs_per_source = 256;
  // A pair lives max(answer TTL, floor) seconds, at most the cap.
  std::uint32_t pair_ttl_floor_seconds = 30;
  std::uint32_t pair_ttl_cap_seconds = 86400;
  std::size_t max_clients = 64;
  std::size_t max_pending_bytes = 8 * 1024 * 1024;  // unsent reply bytes per client
  std::uint32_t idle_timeout_seconds = 600;
  std::uint32_t drift_check_ms = 1000;
  DestroyMode destroy = DestroyMode::kAuto;
  // dnsmasq dhcp-hostsdir the agent publishes its bindings to as reservations; empty: off.
  std::string dhcp_hosts_dir;
  std::string log_level = "info";

  std::uint8_t family_number() const;
};

// Parses YAML text; `source` names the file in messages ("agent.yaml:3: gateway: ...").
Result<AgentConfig> parse_config(std::string_view text, std::string_view source);
Result<AgentConfig> load_config(const std::string& path);

}  // namespace pvs::agent
