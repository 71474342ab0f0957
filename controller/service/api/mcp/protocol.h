// The rules of MCP's Streamable HTTP transport that do not need a socket: which protocol
// revisions this server speaks, the Accept and Origin checks. Pure; unit-tested.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pvs::service::mcp {

// Newest first: what `initialize` answers when the client asks for a revision it does not know.
std::span<const std::string_view> protocol_versions();
bool supported_version(std::string_view version);
// The client's revision if supported, else the newest.
std::string_view negotiate_version(std::string_view requested);
// JSON-RPC batches exist in this revision (only 2025-03-26: later ones removed them).
bool batches_allowed(std::string_view version);

// Whether an Accept header value accepts `type` ("application/json"): the type itself, its
// "x/*" range or "*/*", unless with q=0. An empty header accepts everything.
bool accepts(std::string_view accept, std::string_view type);

// An Origin header a browser sent: allowed when empty (not a browser), local
// (http(s)://localhost, 127.0.0.1, [::1], any port), listed in `allowed` exactly, or when
// `allowed` holds "*". Anything else is what DNS rebinding looks like.
bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed);

}  // namespace pvs::service::mcp
