// Ports of a sandbox (room api/ports/, docs/design/ports.md): `/v1/sandboxes/{id}/ports/{port}/
// {path...}` proxies one HTTP/1.1 request to the service listening on <port> in the sandbox,
// streamed both ways through a PortStream (port_stream.h): an SSH direct-tcpip channel on the
// sandbox's session to its 127.0.0.1 (ssh_tunnel.h), or with ports.transport `route` a TCP
// connection to its address over a route its node's agent opens (SSH for a service on loopback
// only); a request that upgrades (a WebSocket) becomes a two-way byte stream on a thread of
// its own (routes_ports_upgrade.cc). A handler class with narrow dependencies: the sandboxes a
// caller may use (SandboxOps), the reply helpers, the metrics and the audit sink; the pure parts
// are port_proxy.h.
#pragma once

#include <chrono>
#include <functional>

#include "api/ports/listening.h"
#include "api/ports/port_proxy.h"
#include "api/sandboxes/sandbox_ops.h"
#include "core/observability/audit.h"
#include "core/observability/metrics.h"
#include "http/auth.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "http/token_limits.h"
#include "http/ws_sessions.h"
#include "policy/gate.h"

namespace pvs::service {

// What listens in `sandbox` (listening.h), read from its kernel's /proc/net/tcp{,6} over SFTP:
// no command runs. ApiErrors as the sandbox's file reads give them (409 paused, ...).
std::vector<ports::ListeningPort> read_listening(Sandbox& sandbox);

// {"port": 1-65535, "expires_in_seconds": 60-max_seconds (optional)}: a preview link's request
// (REST's body, MCP's sandbox_preview arguments less sandbox_id). 400 for anything else.
struct PreviewRequest {
  std::uint16_t port = 0;
  std::optional<std::int64_t> seconds;
};
ApiResult<PreviewRequest> parse_preview_request(std::string_view body, std::int64_t max_seconds);

class PortRoutes {
 public:
  struct Deps {
    SandboxOps& sandboxes;
    Replies& replies;
    PolicyGate& gate;  // the `ports` action, judged per request (docs/policy.md, "Ports")
    Metrics* metrics;  // pvs_port_* (app/api_metrics.cc)
    std::function<void(const AuditRecord&)> audit;  // an upgraded connection's record, at its end
    WsSessions::Limits upgrades;       // ports.max_upgrades_per_token, ports.max_upgrades
    const TokenStore& tokens;          // a preview link acts for its maker (previews.cc)
    TokenLimits& limits;               // ... within its requests in flight
    std::int64_t preview_max_seconds;  // ports.preview_max_seconds
    std::string preview_key;           // ports.preview_secret; "": a random key of this process
    bool route = false;                // ports.transport: route (else ssh)
  };
  explicit PortRoutes(Deps deps);

  void proxy(RequestContext& ctx);  // GET/HEAD/POST/PUT/PATCH/DELETE/OPTIONS .../ports/{port}/...
  void list(RequestContext& ctx);   // GET .../ports: what listens (listening.h)
  // Preview links (previews.cc): POST .../ports/{port}/preview makes one, a sealed URL under
  // /v1/previews/ that proxies to the port without the bearer token until it expires; any
  // method on /v1/previews/{token}/{path...} (a public route) is served through it.
  void make_preview(RequestContext& ctx);
  void preview(RequestContext& ctx);
  // A preview link to `port` of `sandbox` (one `principal` may use: the caller checked),
  // acting for `principal`, for `seconds` (nullopt: an hour, or preview_max_seconds if less).
  // Its path, "/v1/previews/<link>/", and its expiry (Unix seconds). MCP's sandbox_preview.
  struct Preview {
    std::string path;
    std::int64_t expires = 0;
  };
  Preview preview_link(const Principal& principal, const std::string& sandbox, std::uint16_t port,
                       std::optional<std::int64_t> seconds) const;
  // How forward() reaches the service: its request-target (upstream_target*), the
  // X-Forwarded-Prefix ("": none), the Host it sees ("": localhost:<port>), and whether the
  // reply runs in an opaque origin (kSandboxCsp: the replies served from the controller's own
  // origin; not on a host of the sandbox's own), and whether it is E2B's routing (a `ports`
  // approval still pending is an error, 503, as for E2B's other calls, instead of REST's 202).
  struct Target {
    std::uint16_t port = 0;
    std::string path;
    std::string prefix;
    std::string host;
    bool opaque_origin = true;
    bool e2b = false;
  };
  // The proxying itself, for a sandbox and port the caller found and checked: the policy's
  // `ports` rules first (a refusal throws 403, an approval pending answers 202 on REST).
  void forward(RequestContext& ctx, Sandbox& sandbox, const Target& target);
  // Hangs up every upgraded connection and joins their threads (HttpServer::stop).
  void stop_upgrades() { upgrades_.stop(); }
  std::size_t upgrades_open() const { return upgrades_.active(); }

  // The service may be silent this long (for its reply's head, between body bytes, or while
  // it takes the request body) before the request fails (504, or the reply is cut off).
  static constexpr std::chrono::seconds kIdleTimeout{60};

 private:
  // The policy's say on the request to `to` (`upgrade`: the protocol asked for): false when the
  // reply was sent (REST: 202, an approval pending). Asked only when a rule could judge it.
  bool admit(RequestContext& ctx, const Target& to, const std::string& upgrade);
  // Switches the client's connection to a two-way stream with the service's (the 101 reply
  // is sent here), run off the pool until either side closes.
  void splice(RequestContext& ctx, const Target& to, std::unique_ptr<PortStream> stream,
              std::string pending, const ports::ResponseHead& head, WsSessions::Ticket ticket,
              std::uint64_t sent);

  Deps d_;
  WsSessions upgrades_;
};

}  // namespace pvs::service
