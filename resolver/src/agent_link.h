// The resolver's connection to pve-sandbox-agent: one request line, one reply line, over the
// agent's unix socket (docs/protocol.md). Reconnects once when the connection was lost.
#pragma once

#include <string>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/protocol.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::resolver {

class AgentLink {
 public:
  AgentLink(std::string socket, int timeout_ms)
      : socket_(std::move(socket)), timeout_ms_(timeout_ms) {}
  Result<proto::Reply> call(const std::string& line);

 private:
  Result<proto::Reply> once(const std::string& line);
  std::string socket_;
  int timeout_ms_;
  UniqueFd fd_;
  std::string buffer_;
};

}  // namespace pvs::resolver
