// The agent's desired state: which addresses have internet (with the wall-clock expiry of their
// lease) and which bridge port is bound to which MAC/IPv4. It survives restarts and reboots in a
// small text file, replaced atomically (write temp, fsync, rename, fsync directory):
//
//   pve-sandbox-agent-state 1
//   grant 10.99.0.5 -
//   grant 10.99.0.6 1763900000123        <- expiry, unix milliseconds
//   bind veth100i0 bc:24:11:2a:3b:4c 10.99.0.7
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/protocol.h"

namespace pvs::agent {

struct DesiredState {
  // address -> lease expiry in unix milliseconds; nullopt = no lease (permanent until revoked)
  std::map<Ipv4Address, std::optional<std::int64_t>> grants;
  std::map<std::string, proto::Binding> bindings;  // by port

  // Drops leases that ended at or before `now_ms`; returns how many.
  std::size_t prune(std::int64_t now_ms);
  bool operator==(const DesiredState&) const = default;
};

// Strict parser: any unknown line, duplicate or malformed field is an error naming the line.
Result<DesiredState> parse_state(std::string_view text);
std::string format_state(const DesiredState& state);

// nullopt if the file does not exist.
Result<std::optional<DesiredState>> load_state(const std::string& path);
Status save_state(const std::string& path, const DesiredState& state, bool fsync);

std::int64_t unix_now_ms();

}  // namespace pvs::agent
