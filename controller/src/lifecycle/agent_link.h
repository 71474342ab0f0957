// A minimal, private client of pve-sandbox-agent for the lifecycle code: one unix-socket
// connection, HELLO on connect, one request and one reply per line (pvs::proto), requests
// serialised by a mutex, one reconnect attempt when the connection turned out to be dead.
// (The public AgentClient of the agent issue replaces this once it lands.)
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/protocol.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::lifecycle {

class AgentLink {
 public:
  AgentLink(std::string socket_path, std::chrono::milliseconds timeout)
      : socket_path_(std::move(socket_path)), timeout_(timeout) {}

  Status allow(Ipv4Address address, std::uint32_t ttl_seconds);
  Status revoke(Ipv4Address address);
  Result<std::uint64_t> sync(const std::vector<proto::Grant>& grants);
  Result<std::vector<proto::Grant>> list();
  Status bind(const proto::Binding& binding);
  Status unbind(const std::string& port);
  Result<std::vector<proto::Binding>> bindings();
  Result<proto::StatusFields> status();
  // Connects (if needed) and says HELLO.
  Status ping();
  // Connections made so far (1 + reconnects); the manager reconciles when this grows.
  std::uint64_t connects() const;

 private:
  Result<std::string> call(const proto::Request& request);  // payload of OK
  Status connect_locked();
  Result<std::string> roundtrip_locked(const std::string& line);

  const std::string socket_path_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  UniqueFd fd_;
  std::string buffer_;
  std::uint64_t connects_ = 0;
};

}  // namespace pvs::lifecycle
