// Ports of a sandbox (room api/ports/, docs/design/ports.md): `/v1/sandboxes/{id}/ports/{port}/
// {path...}` proxies one HTTP/1.1 request to the service listening at 127.0.0.1:<port> in the
// sandbox, through an SSH direct-tcpip channel on the sandbox's session (ssh_tunnel.h), streamed
// both ways. A handler class with narrow dependencies: the sandboxes a caller may use
// (SandboxOps) and the reply helpers; the pure parts are port_proxy.h.
#pragma once

#include <chrono>

#include "api/ports/listening.h"
#include "api/sandboxes/sandbox_ops.h"
#include "http/replies.h"
#include "http/request_context.h"

namespace pvs::service {

// What listens in `sandbox` (listening.h), read from its kernel's /proc/net/tcp{,6} over SFTP:
// no command runs. ApiErrors as the sandbox's file reads give them (409 paused, ...).
std::vector<ports::ListeningPort> read_listening(Sandbox& sandbox);

class PortRoutes {
 public:
  PortRoutes(SandboxOps& sandboxes, Replies& replies) : sandboxes_(sandboxes), replies_(replies) {}

  void proxy(RequestContext& ctx);  // GET/HEAD/POST/PUT/PATCH/DELETE/OPTIONS .../ports/{port}/...
  void list(RequestContext& ctx);   // GET .../ports: what listens (listening.h)
  // The proxying itself, for a sandbox and port the caller found and checked: `target` is the
  // service's request-target (upstream_target*), `prefix` its X-Forwarded-Prefix ("": none).
  void forward(RequestContext& ctx, Sandbox& sandbox, std::uint16_t port, const std::string& target,
               const std::string& prefix);

  // The service may be silent this long (for its reply's head, between body bytes, or while
  // it takes the request body) before the request fails (504, or the reply is cut off).
  static constexpr std::chrono::seconds kIdleTimeout{60};

 private:
  SandboxOps& sandboxes_;
  Replies& replies_;
};

}  // namespace pvs::service
