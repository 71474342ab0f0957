// PortStream: a two-way byte stream to a service in a sandbox, whichever way the bytes travel:
// an SSH direct-tcpip channel on the sandbox's session (TcpTunnel, ssh_tunnel.h), or a TCP
// connection from the controller to the sandbox's address over a route the node's agent opened
// in its ruleset (Sandbox::open_route; docs/design/ports.md, section 10). The port proxy reads
// and writes through this shape only.
//
// One reader and one writer may use a stream at once (close() from any thread). Errors carry
// the same kinds whatever the transport (SshErrc, so callers test one vocabulary): kTimeout (the
// wait ran out), kClosed (after close() or shutdown_write()), kDisconnected (the service's side
// is gone), kConnectRefused (at the open: nothing accepts connections there).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pvesandbox/common/error.h"

namespace pvs {

class PortStream {
 public:
  virtual ~PortStream() = default;
  // Sends `bytes` to the service, waiting at most `timeout` in all while it does not read.
  virtual Status write(std::string_view bytes, std::chrono::milliseconds timeout) = 0;
  // No more bytes for the service: it sees EOF once everything was sent. Idempotent.
  virtual void shutdown_write() = 0;
  // Up to `n` bytes from the service, waiting at most `timeout` for the first; 0 once the
  // service closed its side and everything was read.
  virtual Result<std::size_t> read(char* buf, std::size_t n, std::chrono::milliseconds timeout) = 0;
  // Closes the stream (the service sees its connection end); returns at once. Idempotent.
  virtual void close() = 0;
};

// Sandbox::open_route: a TCP connection to `port` on the sandbox's own address (a service
// listening on 0.0.0.0 or that address; one on the sandbox's loopback only refuses it).
struct RouteOptions {
  std::uint16_t port = 0;  // 1..65535
  // The route element's life at the node (1..300 s); a stream used longer than half of it asks
  // the agent again when it is next read or written.
  std::chrono::seconds lease{60};
  std::chrono::milliseconds connect_timeout{5000};
};

}  // namespace pvs
