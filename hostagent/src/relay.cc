#include "relay.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <utility>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/io.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::agent {

int run_relay(const std::string& socket_path, int in_fd, int out_fd) {
  ::signal(SIGPIPE, SIG_IGN);
  auto connected = connect_unix(socket_path);
  if (!connected) {
    log::error(connected.error().message);
    return connected.error().code == ErrorCode::kInvalidArgument ? 2 : 1;
  }
  UniqueFd sock = std::move(*connected);
  char buf[64 * 1024];
  bool in_open = true;
  while (true) {
    pollfd fds[2] = {{sock.get(), POLLIN, 0}, {in_fd, static_cast<short>(in_open ? POLLIN : 0), 0}};
    int n = ::poll(fds, in_open ? 2 : 1, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (fds[0].revents != 0) {
      ssize_t got = ::read(sock.get(), buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return 0;  // the agent closed: we are done
      if (!write_all(out_fd, std::string_view(buf, static_cast<std::size_t>(got)))) return 1;
    }
    if (in_open && fds[1].revents != 0) {
      ssize_t got = ::read(in_fd, buf, sizeof(buf));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        // No more requests: let the agent finish the replies, then it closes.
        in_open = false;
        ::shutdown(sock.get(), SHUT_WR);
        continue;
      }
      if (!write_all(sock.get(), std::string_view(buf, static_cast<std::size_t>(got)))) return 1;
    }
  }
}

}  // namespace pvs::agent
