#include "agent_link.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "pvesandbox/common/io.h"

namespace pvs::resolver {

Result<proto::Reply> AgentLink::call(const std::string& line) {
  bool fresh = !fd_;
  auto reply = once(line);
  if (!reply && !fresh && reply.error().code == ErrorCode::kUnavailable) {
    reply = once(line);  // the agent restarted since the last call
  }
  return reply;
}

Result<proto::Reply> AgentLink::once(const std::string& line) {
  if (!fd_) {
    auto fd = connect_unix(socket_);
    if (!fd) return fail(fd.error());
    fd_ = std::move(*fd);
    buffer_.clear();
  }
  auto lost = [&](const std::string& what) {
    fd_ = UniqueFd();
    return fail(ErrorCode::kUnavailable, "agent " + socket_ + ": " + what);
  };
  std::string out = line + "\n";
  if (::send(fd_.get(), out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) {
    return lost(errno_error("send", errno).message);
  }
  while (true) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string reply_line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      auto reply = proto::parse_reply(reply_line);
      if (!reply) {
        fd_ = UniqueFd();
        return fail(reply.error());
      }
      return *reply;
    }
    if (buffer_.size() > proto::kMaxReplyLine) return lost("reply too long");
    pollfd p{fd_.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, timeout_ms_);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return lost("no reply within " + std::to_string(timeout_ms_) + " ms");
    char buf[4096];
    ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return lost(n == 0 ? "connection closed" : errno_error("recv", errno).message);
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

}  // namespace pvs::resolver
