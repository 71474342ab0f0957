// The pure parts of the port proxy (room api/ports/, docs/design/ports.md): the route's {port}
// and the rest of its path, the request head sent to the service in the sandbox, the service's
// response head and its chunked body. No sockets here: PortRoutes (port_routes.h) streams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/api_error.h"
#include "pvesandbox/common/error.h"

namespace pvs::service::ports {

// The route's {port}: decimal 1..65535, digits only, no leading zero. 400 otherwise.
ApiResult<std::uint16_t> parse_port(std::string_view text);

// The request-target for the service: what follows "/v1/sandboxes/{id}/ports/{port}" in the
// raw request-target as the client sent it (percent-encoding and query kept), "/" when nothing
// does ("?q" alone becomes "/?q"). `id` and `port` are the route's (decoded) parameters: the
// raw target must spell that prefix as is. 400 for a target not in origin form, longer than
// 8 KiB, with bytes an HTTP request line cannot carry, or with the prefix percent-encoded.
ApiResult<std::string> upstream_target(std::string_view raw_target, std::string_view id,
                                       std::string_view port);
// The same after any `prefix` ("" keeps the whole path: E2B's Host routing; "/e2b/envd" for its
// E2b-Sandbox-Port routing).
ApiResult<std::string> upstream_target_after(std::string_view raw_target, std::string_view prefix);

// The methods proxied (HEAD is GET's row in the route table): GET HEAD POST PUT PATCH DELETE
// OPTIONS. CONNECT and TRACE are not.
bool is_proxied_method(std::string_view method);

using Header = std::pair<std::string, std::string>;

// The protocol the client asks to switch to: its Upgrade header when its Connection header
// names "upgrade" (a WebSocket's "websocket"), else "": a plain request.
std::string requested_upgrade(const std::vector<Header>& headers);

// E2B's network.maskRequestHost: the Host header a sandbox's services see instead of
// "localhost:<port>", "${PORT}" standing for the port. A host name or address ([A-Za-z0-9._-],
// or an IPv6 literal in brackets) with an optional ":port" (digits or ${PORT}), at most 255
// bytes. kInvalidArgument otherwise, saying why.
Status check_host_mask(std::string_view mask);
std::string expand_host_mask(std::string_view mask, std::uint16_t port);

// Headers that belong to one connection, never forwarded (RFC 9110 7.6.1), plus those named in
// the message's own Connection header (`connection`: its value, comma-separated).
bool is_hop_by_hop(std::string_view name, std::string_view connection);

// How a request body goes to the service.
struct BodyFraming {
  enum class Kind { kNone, kLength, kChunked } kind = Kind::kNone;
  std::uint64_t length = 0;
};

struct UpstreamRequest {
  std::string method;
  std::string target;           // upstream_target()
  std::uint16_t port = 0;       // Host: localhost:<port>
  std::vector<Header> headers;  // the client's, as received
  BodyFraming body;
  std::string forwarded_host;    // the client's Host: X-Forwarded-Host
  std::string forwarded_prefix;  // "/v1/sandboxes/<id>/ports/<port>": X-Forwarded-Prefix
  std::string upgrade;           // requested_upgrade(): sent on, with Connection: Upgrade
  std::string host;              // the Host header; "": localhost:<port>
};

// The request head for the service, ending in the blank line. The client's headers less the
// hop-by-hop ones, Host, Expect, Content-Length, the X-Forwarded-Host/Prefix it sent and the
// controller's credentials (none reaches the sandbox: Authorization, e2b-traffic-access-token,
// the pvs_preview cookie, "bearer.*" WebSocket subprotocols); then Host, the body's framing,
// X-Forwarded-Host, X-Forwarded-Prefix and Connection: close, or for an upgrade the Upgrade
// header and Connection: Upgrade.
std::string request_head(const UpstreamRequest& request);

struct ResponseHead {
  int status = 0;
  std::string reason;
  std::vector<Header> headers;  // less the hop-by-hop ones, Content-Length, Transfer-Encoding
  enum class Framing { kNone, kLength, kChunked, kUntilClose } framing = Framing::kNone;
  std::uint64_t length = 0;  // kLength
  std::string content_type;  // also in headers
  std::string upgrade;       // a 101's Upgrade header (not in headers)
};

// The end of a response head in `buffer` (the offset just past its blank line), or nullopt.
std::optional<std::size_t> head_end(std::string_view buffer);

// Parses a response head (status line and headers, with or without its blank line) of a reply
// to `method`. kInvalidArgument for what is not HTTP/1.x or not well formed: bad status line,
// obsolete line folding, bare CR or LF, NUL, a header without a name or with a bad one, a bad or
// conflicting Content-Length, a Transfer-Encoding other than chunked.
Result<ResponseHead> parse_response_head(std::string_view head, std::string_view method);

// A chunked body, decoded as it arrives (trailers are read and dropped).
class ChunkedDecoder {
 public:
  // Consumes all of `in`, appending the data to *out; stops at the end of the body (bytes after
  // it are not consumed). Returns the bytes consumed, or kInvalidArgument when malformed.
  Result<std::size_t> feed(std::string_view in, std::string* out);
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kSize, kSizeLf, kData, kDataCr, kDataLf, kTrailer, kTrailerLf, kDone };
  State state_ = State::kSize;
  std::uint64_t remaining_ = 0;
  std::size_t line_ = 0;  // bytes of the current size or trailer line
  bool size_digits_ = false;
  bool in_extension_ = false;
  bool final_ = false;  // the trailer line being ended is the empty one
  std::size_t trailer_bytes_ = 0;
};

// The headers every proxied reply gets, whatever the service sent: the page runs in an opaque
// origin (it cannot read the controller's origin's storage, e.g. the console's token).
inline constexpr std::string_view kSandboxCsp =
    "sandbox allow-scripts allow-forms allow-popups allow-modals allow-downloads";

}  // namespace pvs::service::ports
