// The API's request bodies and parameters, parsed and validated into plain structs. Nothing
// here talks to the Manager: the handlers turn these into pvs::CreateOptions etc.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "core/text/file_edit.h"
#include "http/api_error.h"

namespace pvs::service {

// Upper bounds that do not come from the config.
inline constexpr std::size_t kMaxCommandBytes = 64 << 10;
inline constexpr std::size_t kMaxPathBytes = 4096;
inline constexpr std::size_t kMaxEnvEntries = 64;
inline constexpr std::size_t kMaxEnvValueBytes = 8 << 10;
inline constexpr std::size_t kMaxSnapshotDescription = 1024;
inline constexpr std::size_t kMaxLabels = 16;  // as sandbox_metadata.h
inline constexpr std::size_t kMaxLabelKey = 63;
inline constexpr std::size_t kMaxLabelValue = 128;

// What `internet` asks for: true, false, {"allow": [names], "ports": [ports]} or
// {"list": "<named list>"} (resolved against the configuration by egress_access.h).
struct EgressRequest {
  enum class Kind { kOff, kOn, kAllow, kList };
  Kind kind = Kind::kOff;
  std::vector<std::string> names;    // kAllow: each a valid egress name (egress.h)
  std::vector<std::uint16_t> ports;  // kAllow; empty: 80 and 443
  std::string list;                  // kList: a valid list name
  bool operator==(const EgressRequest&) const = default;
};

// The request as JSON, as it was asked (audit log, approvals).
std::string egress_request_json(const EgressRequest& request);

struct CreateRequest {
  int cpus = 1;
  int memory_mb = 512;
  int disk_gb = 0;  // 0: the template's size
  EgressRequest internet;
  int ttl_seconds = 0;  // 0: the configured default
  // "on_expiry": "destroy" (default) or "pause"; "auto_resume" only with "pause" (OnExpiry).
  bool pause_on_expiry = false;
  bool auto_resume = false;
  std::map<std::string, std::string> labels;
  std::string hostname;       // empty: chosen by the controller
  std::string profile;        // a hot pool profile; empty: the default template
  std::string template_name;  // "template": a custom template's name (docs/templates.md)
  std::string node;           // a cluster node to use; empty: placement picks one
  std::map<std::string, std::string> node_selector;  // labels the node must have
  // "volumes": [{"volume": name or id, "path", "read_only"}]; names resolved by create_for.
  std::vector<VolumeMount> volumes;
};

struct ExecRequest {
  std::string command;
  std::string cwd;
  std::vector<std::pair<std::string, std::string>> env;
  std::string stdin_data;
  int timeout_seconds = 0;  // 0: limit from config (max_exec_timeout_seconds)
};

// POST .../files/edit and the MCP tool edit_file.
struct EditRequest {
  std::string path;
  EditSpec spec;
};

struct SnapshotRequest {
  std::string name;
  std::string description;
};

ApiResult<CreateRequest> parse_create(std::string_view body, const ServiceConfig& config);
ApiResult<ExecRequest> parse_exec(std::string_view body, const ServiceConfig& config);
// PUT .../internet: {"enabled": bool}, {"allow": [...], "ports": [...]} or {"list": "..."}.
ApiResult<EgressRequest> parse_internet(std::string_view body);
ApiResult<int> parse_ttl(std::string_view body, const ServiceConfig& config);  // {"ttl_seconds"}
// GET .../usage?since=&until=.
struct UsageWindow {
  std::int64_t since = 0;  // unix seconds; 0: since the sandbox was created
  std::int64_t until = std::numeric_limits<std::int64_t>::max();  // to now, the live sample too
};

// Each empty or unix seconds (a non-negative integer), `since` not after `until`; 400 otherwise.
ApiResult<UsageWindow> parse_usage_window(std::string_view since, std::string_view until);
// POST .../pause: {"mode": "filesystem" | "memory"}, optional (filesystem). The Manager refuses
// memory with the reason (docs/design/pause.md).
ApiResult<PauseMode> parse_pause(std::string_view body);
// POST .../resume: {"ttl_seconds"}, optional (0: the time it had left when paused).
ApiResult<int> parse_resume(std::string_view body, const ServiceConfig& config);
ApiResult<SnapshotRequest> parse_snapshot(std::string_view body);
// {"name"} of a template captured from a sandbox: a template name, or absent (chosen).
ApiResult<std::string> parse_capture(std::string_view body);
struct ForkRequest {
  int count = 1;
  int ttl_seconds = 0;  // 0: the configured default
};
// {"count": 1..max_fork, "ttl_seconds": 1..max_ttl}; both optional.
ApiResult<ForkRequest> parse_fork(std::string_view body, const ServiceConfig& config);
// {"path", "old_string", "new_string", "replace_all"}; the strings at most max_body_bytes.
ApiResult<EditRequest> parse_edit(std::string_view body, const ServiceConfig& config);

// Why these labels are invalid, or nullopt (the rules of pvs::validate_labels).
std::optional<std::string> label_error(const std::map<std::string, std::string>& labels);
// label_error, and no key under pve-sandbox/ (pvs::validate_client_labels): the labels a client
// sets on a sandbox (REST and MCP create, E2B metadata). Selectors may name reserved keys.
std::optional<std::string> client_label_error(const std::map<std::string, std::string>& labels);
// "sb-" + 12 lower-case hex digits.
bool is_sandbox_id(std::string_view id);
// An RFC 1123 label: 1-63 of [a-z0-9-], not starting or ending with '-'.
bool is_hostname(std::string_view name);
// A Proxmox node name: a DNS label (letters, digits, '-'), 1-63 characters.
bool is_node_name(std::string_view name);
// A Proxmox snapshot name: a letter, then letters, digits, '_' or '-'; 2-40 characters.
bool is_snapshot_name(std::string_view name);
// A shell variable name.
bool is_env_name(std::string_view name);
// An absolute path without NUL, at most kMaxPathBytes.
ApiResult<std::string> validate_path(std::string_view path);
// An octal file mode "0644" / "755" (at most 07777).
ApiResult<std::uint32_t> parse_mode(std::string_view text);
// A listing's `limit` query parameter: decimal in [1, kMaxListLimit]; empty: kDefaultListLimit.
inline constexpr std::size_t kDefaultListLimit = 10000;
inline constexpr std::size_t kMaxListLimit = 100000;
ApiResult<std::size_t> parse_list_limit(std::string_view text);
// The label selector of GET /v1/sandboxes: every "label" query value is "key=value".
ApiResult<std::map<std::string, std::string>> parse_selector(
    const std::vector<std::string>& label_params);

}  // namespace pvs::service
