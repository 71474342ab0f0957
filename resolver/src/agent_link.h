// The resolver's connections to pve-sandbox-agent (docs/protocol.md): one request line, one reply
// line. Requests are pipelined on a few connections shared by every query (#32: no connection
// per client); the agent answers a connection's lines in order. A connection that is lost
// reconnects on the next request; requests pending on a connection that closes (the agent
// restarted) are sent once more on a fresh one (ASK and PAIR may be repeated).
#pragma once

#include <poll.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/protocol.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::resolver {

class AgentLink {
 public:
  using Callback = std::function<void(Result<proto::Reply>)>;
  AgentLink(std::string socket, int timeout_ms)
      : socket_(std::move(socket)), timeout_ms_(timeout_ms) {}

  // Sends `line`; `done` runs on the loop when the reply (or an error) is there.
  void call(const std::string& line, Callback done);
  std::size_t pending() const { return pending_.size(); }

  // Event loop: the socket to poll (none when idle), what it reported, the timeout.
  void add_pollfd(std::vector<pollfd>& out) const;
  void process(const std::vector<pollfd>& fds, std::int64_t now_ms);
  // Milliseconds until the oldest request times out; -1: none pending.
  int next_timeout_ms(std::int64_t now_ms) const;

 private:
  struct Request {
    std::string line;
    Callback done;
    std::int64_t deadline_ms = 0;
    bool retried = false;
  };
  bool connect_now();
  void flush();
  void read_replies();
  // The connection is gone: retry what may be retried, fail the rest.
  void lost(const std::string& why, bool may_retry);

  std::string socket_;
  int timeout_ms_;
  UniqueFd fd_;
  std::string out_;
  std::string in_;
  std::deque<Request> pending_;  // sent (or queued in out_), in order
};

}  // namespace pvs::resolver
