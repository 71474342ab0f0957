// E2B's control plane (spec/openapi.yml in e2b-dev/infra, as the `e2b` SDK 2.51.0 calls it):
// request bodies parsed into our own requests (requests.h), replies written from plain views.
// Errors are ApiErrors; e2b_error_body() writes them in E2B's shape {"code": <HTTP status>,
// "message": "..."}. Pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_error.h"
#include "http/requests.h"

namespace pvs::service::e2b {

// The version of envd the controller's data plane answers as. It decides what the SDK uses:
// >= 0.4.0 no default user header, >= 0.5.2 closeStdin, >= 0.5.7 octet-stream uploads;
// below 0.6.2 the SDK refuses file metadata itself (not served here).
inline constexpr std::string_view kEnvdVersion = "0.5.7";
inline constexpr std::uint16_t kEnvdPort = 49983;
// The template the SDK asks for when none is given.
inline constexpr std::string_view kDefaultTemplate = "base";

// {"code": status, "message": "..."}
std::string e2b_error_body(const ApiError& error);
// 400 invalid_argument saying what pve-sandbox does not do ("... is not supported by
// pve-sandbox: ...").
ApiError unsupported(const std::string& what, const std::string& why);

// `X-API-Key` values the SDK sends: "e2b_" and lower-case hex (8-128 digits).
bool is_e2b_api_key(std::string_view key);
// The sandbox of an envd Host header "49983-<id>.<domain>[:port]"; nullopt if it is not one.
std::optional<std::string> sandbox_from_host(std::string_view host);
// The same when the Host's domain is `domain` ("49983-<id>.<domain>", any port).
std::optional<std::string> envd_host_sandbox(std::string_view host, std::string_view domain);
// A sandbox's port by Host name, as E2B's getHost(port) builds it: "<port>-<id>.<domain>"
// (any :port after it; the domain compared case-insensitively); nullopt if the Host is not one.
struct PortHost {
  std::string sandbox;
  std::uint16_t port = 0;
};
std::optional<PortHost> port_host(std::string_view host, std::string_view domain);
// An E2B template id as a name we look up: 1-64 of [A-Za-z0-9._-], starting alphanumeric.
bool is_template_id(std::string_view id);

// Who may reach a sandbox's ports (other than envd's) and the Host they see (docs/e2b.md, Ports).
struct PortAccess {
  // network.allowPublicTraffic: its ports answer anyone who reaches the controller. Absent or
  // false (the default here, unlike E2B's): a port wants e2b-traffic-access-token.
  bool public_traffic = false;
  // network.maskRequestHost: the Host header its services see, "${PORT}" standing for the port
  // (ports::check_host_mask); "": localhost:<port>.
  std::string mask_host;
};

// POST /v2/sandboxes
struct NewSandbox {
  std::string template_id;         // kDefaultTemplate when absent
  CreateRequest create;            // ttl from timeout, labels from metadata, internet from network
  bool internet_explicit = false;  // allow_internet_access or network.allowOut was given
  std::map<std::string, std::string> env_vars;  // default environment of every command
  PortAccess ports;
};
struct NewSandboxLimits {
  int max_ttl_seconds = 86400;
};
ApiResult<NewSandbox> parse_new_sandbox(std::string_view body, const NewSandboxLimits& limits);

// POST /sandboxes/{id}/timeout: seconds, required, in [0, max]; 0 is taken as 1 (expire now).
ApiResult<int> parse_timeout(std::string_view body, int max_ttl_seconds);
// POST /v2/sandboxes/{id}/connect: its `timeout` as above, or 0 when absent (the SDK leaves it
// out when connect() gets no timeoutMs): the expiry stays.
ApiResult<int> parse_connect(std::string_view body, int max_ttl_seconds);
// POST /sandboxes/{id}/pause {"memory"} (the SDK's keepMemory; absent unless given): the
// filesystem mode, the only one pve-sandbox has (docs/design/pause.md); `memory: true` is a 400
// naming keepMemory: false.
ApiResult<PauseMode> parse_pause(std::string_view body);
// PUT /sandboxes/{id}/network: the egress that replaces the current one.
ApiResult<EgressRequest> parse_network_update(std::string_view body);

// GET /v2/sandboxes's query.
struct ListQuery {
  std::map<std::string, std::string> metadata;  // every pair must match
  bool running = true;                          // state includes "running" (or is absent)
  bool paused = true;                           // state includes "paused" (or is absent)
  std::optional<std::string> template_id;
  std::size_t limit = 100;
  std::size_t offset = 0;  // from nextToken
};
ApiResult<ListQuery> parse_list_query(const std::multimap<std::string, std::string>& query);
// GET /sandboxes/{id}/metrics's query: `start`, `end` (unix seconds; absent: the sandbox's
// creation, and now).
struct MetricsQuery {
  std::optional<std::int64_t> start, end;
};
ApiResult<MetricsQuery> parse_metrics_query(const std::multimap<std::string, std::string>& query);
// The nextToken of the page after one ending at `offset`.
std::string next_token(std::size_t offset);

// GET /snapshots: sandboxID, name, limit (1-100), nextToken.
struct SnapshotQuery {
  std::string sandbox_id, name;
  std::size_t limit = 100;
  std::size_t offset = 0;
};
ApiResult<SnapshotQuery> parse_snapshot_query(const std::multimap<std::string, std::string>& query);
// POST /sandboxes/{id}/fork {count, timeout}: E2B's defaults, 1 fork of kForkTimeout seconds.
inline constexpr int kForkTimeout = 15;
ApiResult<ForkRequest> parse_fork(std::string_view body, int max_fork, int max_ttl);
// POST /sandboxes/{id}/snapshots {name}: a template name here, or absent (chosen).
ApiResult<std::string> parse_snapshot(std::string_view body);

// What the replies say about a sandbox.
struct SandboxView {
  std::string id;
  std::string template_id;
  std::string client_id;     // the token's name
  std::string access_token;  // envdAccessToken
  std::optional<std::string> domain;
  std::int64_t started_at = 0;  // unix seconds
  std::int64_t end_at = 0;
  int cpus = 1;
  int memory_mb = 512;
  int disk_mb = 0;
  std::map<std::string, std::string> metadata;
  std::optional<bool> allow_internet;
  std::vector<std::string> allow_out;  // an allowlist's names
  bool paused = false;                 // state "paused" (else "running")
  std::string traffic_token;           // trafficAccessToken; empty: null (public ports)
  bool pause_on_timeout = false;       // lifecycle.onTimeout "pause" (else "kill")
  bool auto_resume = false;            // lifecycle.autoResume
  std::vector<std::pair<std::string, std::string>> volume_mounts;  // volumeMounts: (name, path)
};
// 201 of POST /v2/sandboxes and the connect reply: the Sandbox schema.
std::string sandbox_reply(const SandboxView& s);
// GET /sandboxes/{id}: SandboxDetail.
std::string detail_reply(const SandboxView& s);
// GET /v2/sandboxes: [ListedSandbox...].
std::string list_reply(const std::vector<SandboxView>& sandboxes);

struct MetricView {
  std::int64_t timestamp = 0;  // unix seconds
  int cpus = 0;
  double cpu_used_pct = 0;
  std::int64_t mem_used = 0, mem_total = 0, mem_cache = 0;
  std::int64_t disk_used = 0, disk_total = 0;
};
std::string metrics_reply(const std::vector<MetricView>& metrics);

}  // namespace pvs::service::e2b
