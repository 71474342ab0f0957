// MCP revision 2026-07-28 ("modern": stateless) beside the session-based legacy revisions on the
// same endpoint. What one request needs before any method runs, decided from that request alone
// (never from an earlier request on the same connection):
//
//   * its era: modern when params._meta carries io.modelcontextprotocol/protocolVersion or the
//     MCP-Protocol-Version header names a modern revision; legacy otherwise (initialize, or a
//     request of a session opened by one);
//   * for a modern request, its per-request metadata (_meta: protocol version and client
//     capabilities required, client info and log level optional), the HTTP headers checked
//     against the body (MCP-Protocol-Version, Mcp-Method, Mcp-Name; the Base64 sentinel
//     decoded), then the revision itself;
//   * the errors as that revision defines them, each with its HTTP status.
//
// Pure: no I/O; unit-tested in tests/mcp, fuzzed by tests/fuzz/fuzz_mcp_modern.cc.
//
//   if (mcp::request_era(m, header_version) == mcp::Era::kModern) {
//     auto meta = mcp::check_modern_request(m, headers);
//     if (!meta) return reply(meta.error().http_status, mcp::wire_error_json(m.id, meta.error()));
//     ...
//   }
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <Poco/JSON/Object.h>
#include <tl/expected.hpp>

#include "api/mcp/jsonrpc.h"

namespace pvs::service::mcp {

inline constexpr std::string_view kModernRevision = "2026-07-28";

// The error codes revision 2026-07-28 defines (its reserved range -32020..-32099).
inline constexpr int kHeaderMismatch = -32020;
inline constexpr int kMissingRequiredClientCapability = -32021;
inline constexpr int kUnsupportedProtocolVersion = -32022;

// The _meta keys of a request and of a result.
inline constexpr std::string_view kMetaProtocolVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr std::string_view kMetaClientCapabilities =
    "io.modelcontextprotocol/clientCapabilities";
inline constexpr std::string_view kMetaClientInfo = "io.modelcontextprotocol/clientInfo";
inline constexpr std::string_view kMetaLogLevel = "io.modelcontextprotocol/logLevel";
inline constexpr std::string_view kMetaServerInfo = "io.modelcontextprotocol/serverInfo";

// The revisions served statelessly (newest first).
std::span<const std::string_view> modern_versions();
bool is_modern_version(std::string_view version);
// Every revision this server speaks, modern first then the legacy ones newest first: what
// server/discover and UnsupportedProtocolVersionError list.
std::span<const std::string_view> all_versions();

// The eight log levels of MCP's logging utility, least severe first (debug..emergency).
bool is_log_level(std::string_view level);

// A JSON-RPC error as the transport sends it.
struct WireError {
  int http_status = 400;
  int code = kInvalidParams;
  std::string message;
  std::string data;  // the error's data as JSON text, or "" for none
};

// {"jsonrpc":"2.0","id":<id>,"error":{"code":..,"message":"..."[,"data":..]}}
std::string wire_error_json(std::string_view id, const WireError& e);

// 400 -32022, data {"supported":[all_versions()],"requested":...}.
WireError unsupported_version(std::string_view requested);
// 400 -32020.
WireError header_mismatch(std::string message);
// 400 -32021, data {"requiredCapabilities":<capabilities_json>}.
WireError missing_capability(std::string_view capabilities_json);
// 400 -32602: the request is malformed (a required _meta field, params of the wrong shape).
WireError invalid_params(std::string message);
// 404 -32601: this revision has no such method (ping, initialize, logging/setLevel, ...).
WireError method_not_found(std::string_view method);

enum class Era { kModern, kLegacy };

// The era of one message. `header_version` is its MCP-Protocol-Version header ("" if absent).
Era request_era(const Message& m, std::string_view header_version);

// The per-request metadata of a modern request.
struct RequestMeta {
  std::string protocol_version;
  Poco::JSON::Object::Ptr client_capabilities;  // never null once checked
  std::string client_name;                      // clientInfo (optional): "" when absent
  std::string client_version;
  std::optional<std::string> log_level;  // the request opted in to notifications/message
  std::string progress_token;            // as JSON text, "" when absent

  // Whether the client declared capability `name` ("elicitation", "roots", ...).
  bool has_capability(std::string_view name) const;
};

// The HTTP headers of the request that mirror its body ("" / nullopt when absent).
struct RequestHeaders {
  std::string protocol_version;       // MCP-Protocol-Version
  std::optional<std::string> method;  // Mcp-Method
  std::optional<std::string> name;    // Mcp-Name
};

// params._meta of a modern request: the required keys present with their types, the optional
// ones well-formed. -32602 (400) naming the field otherwise.
tl::expected<RequestMeta, WireError> parse_request_meta(const Message& m);

// Mcp-Name's source in the body: params.name (tools/call, prompts/get) or params.uri
// (resources/read); nullopt for other methods or when the body has none.
std::optional<std::string> mcp_name_source(const Message& m);

// A header value as the server compares it: plain visible ASCII (space and tab allowed inside),
// or the sentinel =?base64?...?= decoded. nullopt: invalid characters or bad Base64.
std::optional<std::string> decode_header_value(std::string_view value);

// An Mcp-Name value as Poco's header parser (1.11) hands it over: it takes "=?...?=" for an
// RFC 2047 encoded word and, unable to decode "=?base64?<text>?=", drops the leading "=?".
// This puts it back ("base64?<text>?=" -> "=?base64?<text>?="); anything else is unchanged.
std::string restore_sentinel(std::string_view parsed_value);

// The whole check of a modern request, in the order the revision implies: _meta (-32602), the
// headers against the body (-32020), then the revision (-32022).
tl::expected<RequestMeta, WireError> check_modern_request(const Message& m,
                                                          const RequestHeaders& headers);

}  // namespace pvs::service::mcp
