// The controller's client of pve-sandbox-agent (protocol in docs/protocol.md, codec in pvs::proto).
//
//   pvs::AgentClient agent;  // AgentClientOptions{}: the socket is kDefaultAgentSocket
//   if (auto ok = agent.allow(*pvs::Ipv4Address::parse("10.99.0.7"), 3600); !ok) ...
//
// A remote node is reached by spawning a command that relays stdin/stdout to the agent socket,
// typically `ssh -T agent@node` with a forced command `pve-sandbox-agent relay`:
//
//   pvs::AgentClientOptions options;
//   options.command = {"ssh", "-T", "-o", "BatchMode=yes", "pve-sandbox-relay@node1"};
//   pvs::AgentClient remote(options);
//
// The connection is made lazily and begins with HELLO. Every verb of the protocol is
// idempotent, so a call that finds the connection broken reconnects and is sent again (once by
// default). A call that times out closes the connection (the reply could still arrive later) and
// fails with ErrorCode::kTimeout. All methods are thread-safe; calls are serialised.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/io.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/protocol.h"
#include "pvesandbox/egress.h"

namespace pvs {

struct AgentClientOptions {
  std::string socket_path{kDefaultAgentSocket};
  // If not empty: run this program (argv, looked up in PATH) and speak over its stdin/stdout
  // instead of connecting to socket_path.
  std::vector<std::string> command;
  std::chrono::milliseconds connect_timeout{5000};
  // Per request, from sending the line to receiving the whole reply.
  std::chrono::milliseconds request_timeout{10000};
  // Extra attempts after a broken connection.
  int retries = 1;
};

class AgentClient {
 public:
  explicit AgentClient(AgentClientOptions options = {});
  ~AgentClient();
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;

  // Connects (if needed) and returns what the agent said to HELLO.
  Result<proto::HelloInfo> connect();
  // Closes the connection (and ends a spawned command). The next call reconnects.
  void close();

  Status allow(Ipv4Address address, std::optional<std::uint32_t> ttl_seconds = std::nullopt);
  Status revoke(Ipv4Address address);
  // Replaces the whole set atomically; returns the number of addresses. Fails with kTooLarge
  // (without sending) if the request does not fit one protocol line (about 5,000 addresses).
  Result<std::uint64_t> sync(const std::vector<proto::Grant>& grants);
  Result<std::vector<proto::Grant>> list();
  Status bind(const proto::Binding& binding);
  Status unbind(std::string_view port);
  Result<std::vector<proto::Binding>> bindings();
  Result<proto::StatusFields> status();
  // Egress allowlists (egress.h, egress_wire.h): replace the list of `address` (validated and
  // sent normalised; kInvalidArgument without sending), remove it, or read every list.
  Status egress(Ipv4Address address, EgressList list);
  Status egress_off(Ipv4Address address);
  Result<std::map<Ipv4Address, EgressList>> egresses();
  // The egress log the agent keeps for a listed source (EGRESSLOG): the resolver's decisions,
  // aggregated per window, oldest first. Empty for a source without a list.
  Result<std::vector<proto::EgressLogLine>> egress_log(Ipv4Address address);
  // The connection attempts of `address` the ruleset refused (EGRESSREFUSED): at most
  // proto::kMaxRefusedPerReply destinations, most recent first, and one `others` item for the
  // rest (docs/protocol.md "Refused connections").
  Result<std::vector<proto::RefusedConnection>> egress_refused(Ipv4Address address);

  // The port proxy's routes (docs/protocol.md "Routes"): the controller addresses may open TCP
  // connections to `port` of `address` (bound to a sandbox port) for `seconds`
  // (1-proto::kMaxRouteSeconds; asking again gives it a new timeout), or no longer.
  Status route(Ipv4Address address, std::uint16_t port, std::uint32_t seconds);
  Status unroute(Ipv4Address address, std::uint16_t port);

  // Sends one request and returns the agent's reply payload (OK) or its error (ERR).
  Result<std::string> call(const proto::Request& request);
  // The same for a request line formatted by the caller (no newline).
  Result<std::string> call_line(const std::string& line);

  // Connections established so far (HELLO answered): a caller that sees this grow knows the
  // agent was reconnected (e.g. restarted) and may want to re-assert its state.
  std::uint64_t connections() const { return connections_.load(); }

 private:
  Status ensure_connected_locked();
  Status open_transport_locked();
  void close_locked();
  Status write_all_locked(std::string_view bytes, std::chrono::steady_clock::time_point deadline);
  Result<std::string> read_line_locked(std::chrono::steady_clock::time_point deadline);
  Result<std::string> exchange_locked(const std::string& line);

  AgentClientOptions options_;
  std::mutex mu_;
  int read_fd_ = -1;
  int write_fd_ = -1;
  pid_t child_ = -1;
  std::string buffer_;
  std::optional<proto::HelloInfo> hello_;
  std::atomic<std::uint64_t> connections_{0};
};

}  // namespace pvs
