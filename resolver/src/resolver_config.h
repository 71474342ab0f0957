// pve-sandbox-resolver's configuration, /etc/pve-sandbox/resolver.yaml (docs/agent.md
// "The egress resolver"). Unknown keys are errors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"

namespace pvs::resolver {

inline constexpr std::string_view kDefaultConfigPath = "/etc/pve-sandbox/resolver.yaml";

struct ResolverConfig {
  Ipv4Address listen;  // the sandbox gateway address (required)
  std::uint16_t port = 5353;
  Cidr sandbox_cidr;                                             // required: who may ask
  std::vector<std::pair<Ipv4Address, std::uint16_t>> upstreams;  // required, tried in order
  std::string agent_socket = "/run/pve-sandbox/agent.sock";
  std::uint32_t upstream_timeout_ms = 2000;
  // Concurrent connections to the agent, shared by every query (pipelined requests).
  std::uint32_t agent_connections = 2;
  // Queries between admission and answer (ASK, upstream, PAIR), in all and per source; a
  // source's further queries wait in its own queue, served round robin across sources, and
  // are dropped beyond max_queued_per_source.
  std::uint32_t max_inflight = 256;
  std::uint32_t max_inflight_per_source = 8;
  std::uint32_t max_queued_per_source = 32;
  std::uint32_t max_tcp_clients = 32;    // concurrent TCP connections
  std::uint32_t max_tcp_per_source = 4;  // of one source
  // TTL given to clients: at most this (keep it <= the agent's pair_ttl_cap_seconds).
  std::uint32_t max_answer_ttl = 86400;
  // Queries a source may send per second (burst twice that); beyond it they are dropped.
  // 0: no limit.
  std::uint32_t queries_per_second = 100;
  std::string log_level = "info";
  // The egress log (docs/agent.md "Egress log"): every decision, aggregated per source and
  // window, sent to the agent as ELOG lines; at most egress_log_max_names lines (plus one for
  // the rest) per source and window, and egress_log_max_sources sources a window.
  bool egress_log = true;
  std::uint32_t egress_log_window_ms = 60000;
  std::uint32_t egress_log_max_names = 32;
  std::uint32_t egress_log_max_sources = 4096;
};

Result<ResolverConfig> parse_config(std::string_view text, std::string_view source);
Result<ResolverConfig> load_config(const std::string& path);

}  // namespace pvs::resolver
