#include "relay.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::agent {
namespace {

bool write_all(int fd, const char* data, std::size_t len) {
  while (len > 0) {
    ssize_t n = ::write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

int run_relay(const std::string& socket_path, int in_fd, int out_fd) {
  ::signal(SIGPIPE, SIG_IGN);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    log::error("socket path too long: " + socket_path);
    return 2;
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock || ::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    log::error(errno_error("connecting to " + socket_path, errno).message);
    return 1;
  }
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
      if (!write_all(out_fd, buf, static_cast<std::size_t>(got))) return 1;
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
      if (!write_all(sock.get(), buf, static_cast<std::size_t>(got))) return 1;
    }
  }
}

}  // namespace pvs::agent
