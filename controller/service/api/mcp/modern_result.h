// The results of revision 2026-07-28: every result carries resultType ("complete", or
// "input_required" for a multi-round-trip request's interim answer) and the server's identity
// in _meta (io.modelcontextprotocol/serverInfo); the list results also carry the caching hints
// ttlMs and cacheScope; server/discover advertises the revisions, capabilities and identity.
// Pure text assembly (no parsing): a tool call's answer pays only a few string appends.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pvs::service::mcp {

struct ServerInfo {
  std::string name;
  std::string version;
  std::string title;  // optional: "" leaves it out
};

// {"name":...,"version":...[,"title":...]}
std::string server_info_json(const ServerInfo& info);

// Caching hints of a CacheableResult (tools/list, server/discover, ...).
struct CacheHint {
  std::int64_t ttl_ms = 0;  // >= 0; 0: stale at once
  bool is_public = false;   // "public": the same for every authorization context
};

// `result` (a JSON object without resultType or _meta) as a complete 2026-07-28 result:
// {"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":<server_info>},...}.
// With `cache`, ttlMs and cacheScope follow.
std::string complete_result(std::string_view result, std::string_view server_info_json);
std::string complete_result(std::string_view result, std::string_view server_info_json,
                            const CacheHint& cache);

// An InputRequiredResult that asks only to be called again with `request_state` (opaque to the
// client, echoed byte for byte in params.requestState): what a call answers while it waits for
// something outside the protocol (a person's approval).
std::string input_required_result(std::string_view request_state,
                                  std::string_view server_info_json);

// The DiscoverResult: supportedVersions (modern_versions() then the legacy ones),
// `capabilities_json` (a ServerCapabilities object), instructions (omitted when empty), the
// server's identity in _meta, the cache hint.
std::string discover_result(std::string_view capabilities_json, std::string_view instructions,
                            std::string_view server_info_json, const CacheHint& cache);

}  // namespace pvs::service::mcp
