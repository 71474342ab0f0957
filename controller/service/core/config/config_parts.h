// Pieces of controller.yaml that more than one section reads (config.cc and config_nodes.cc).
// Internal to the service; config.h is the interface.
#pragma once

#include <chrono>

#include "core/config/config.h"
#include "pvesandbox/common/yaml_reader.h"

namespace pvs::service {

// Reads `name` as whole seconds in [min, max] into a duration.
template <typename Duration>
void seconds(yaml::Map& s, std::string_view name, Duration* out, long long min, long long max) {
  long long v = std::chrono::duration_cast<std::chrono::seconds>(*out).count();
  s.integer(name, &v, min, max);
  *out = std::chrono::duration_cast<Duration>(std::chrono::seconds(v));
}

// A sandbox network: cidr, gateway (inside it), bridge, reserved ranges.
struct SandboxNetwork {
  Cidr* cidr;
  Ipv4Address* gateway;
  std::string* bridge;
  std::vector<Cidr>* reserved;
};
void parse_sandbox_network(yaml::Map& s, SandboxNetwork net);

// How to reach an agent: socket, or command (a relay), and timeout_seconds.
void parse_agent_options(yaml::Map& s, ManagerAgentOptions* agent);

// The top-level `nodes:` list (a cluster) into c.manager.nodes, each checked; then the cluster
// as a whole (pvs::cluster_nodes: duplicate names, overlapping networks, templates).
void parse_nodes(yaml::Map& top, ServiceConfig& c);

// config_egress.cc: the `egress:` section (before auth: tokens name its lists), and one
// token's `egress:` caps.
void parse_egress(yaml::Map s, ServiceConfig& c);
void parse_token_egress(yaml::Map s, const ServiceConfig& c, TokenEgressCaps* caps);
std::string describe_egress(const ServiceConfig& c);

// The `policy:` section (policy_config.cc); after auth (it names tokens).
void parse_policy(yaml::Map s, ServiceConfig& c);

}  // namespace pvs::service
