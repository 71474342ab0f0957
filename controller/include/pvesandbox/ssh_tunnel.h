// TcpTunnel: a TCP connection made by the sandbox's sshd (an SSH "direct-tcpip" channel) on an
// SshSession's connection, e.g. to a service listening on the sandbox's own loopback.
//
//   pvs::TunnelOptions o;
//   o.port = 8080;                                  // 127.0.0.1:8080 as the sandbox sees it
//   auto t = ssh.open_tunnel(o);                    // returns once sshd connected to it
//   (*t)->write("GET / HTTP/1.1\r\n...", 10s);      // waits while the send queue is full
//   (*t)->shutdown_write();                         // EOF to the service once all is sent
//   char buf[16384];
//   auto n = (*t)->read(buf, sizeof buf, 30s);      // 0 at the service's EOF
//   t->reset();                                     // closes the channel
//
// The channel is driven by the session's I/O thread like an exec (docs/ssh.md). Both directions
// are bounded: write() waits while `max_buffered` bytes are not yet sent, and the I/O thread stops
// reading from the channel while `max_buffered` bytes wait for read(), so the SSH window holds
// the service back (nothing is buffered whole). The sandbox's sshd must allow it
// (`AllowTcpForwarding local`, `PermitOpen 127.0.0.1:*`; docs/design/ports.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "pvesandbox/common/error.h"
#include "pvesandbox/port_stream.h"

namespace pvs {

struct TunnelOptions {
  std::string host = "127.0.0.1";  // as the sandbox's sshd resolves it
  std::uint16_t port = 0;          // 1..65535
  // Waiting for a channel slot on the connection (SshConfig::max_channels); the open itself
  // is the server's round trip.
  std::chrono::milliseconds open_timeout{10000};
  std::size_t max_buffered = 256 << 10;  // per direction, bytes
};

class TcpTunnel final : public PortStream {
 public:
  class Shared;  // the state shared with the I/O thread (ssh_tunnel.cc)
  TcpTunnel(std::shared_ptr<Shared> shared, std::function<void()> wake);
  ~TcpTunnel() override;  // close()
  TcpTunnel(const TcpTunnel&) = delete;
  TcpTunnel& operator=(const TcpTunnel&) = delete;

  // Queues `bytes` for the service, waiting (at most `timeout` in all) while the queue is full.
  // kClosed after shutdown_write() or close(), kTimeout, or the channel's error.
  Status write(std::string_view bytes, std::chrono::milliseconds timeout) override;
  // No more bytes for the service: EOF goes out once the queue is sent. Idempotent.
  void shutdown_write() override;
  // Up to `n` bytes from the service, waiting at most `timeout` for the first; 0 once the
  // service closed its side and everything was read. kTimeout, or the channel's error.
  Result<std::size_t> read(char* buf, std::size_t n, std::chrono::milliseconds timeout) override;
  // Closes the channel (the service sees its connection closed); returns at once. Idempotent.
  void close() override;
  std::uint64_t bytes_sent() const;      // to the service
  std::uint64_t bytes_received() const;  // from the service

 private:
  std::shared_ptr<Shared> shared_;
  std::function<void()> wake_;
};

}  // namespace pvs
