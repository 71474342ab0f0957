#include "pvesandbox/agent_client.h"

#include "pvesandbox/egress_wire.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace pvs {
namespace {

using Clock = std::chrono::steady_clock;

int ms_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<long long>(left.count(), 1 << 30));
}

bool is_broken(const Error& e) {
  return e.code == ErrorCode::kUnavailable;
}

// Writes to a pipe or socket without ever raising SIGPIPE in this process.
ssize_t quiet_write(int fd, const char* data, std::size_t len) {
  ssize_t n = ::send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0 || errno != ENOTSOCK) return n;
  // A pipe: block SIGPIPE for this thread, write, and swallow a SIGPIPE we caused.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  n = ::write(fd, data, len);
  int err = errno;
  if (n < 0 && err == EPIPE) {
    timespec zero{0, 0};
    sigtimedwait(&block, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return n;
}

}  // namespace

AgentClient::AgentClient(AgentClientOptions options) : options_(std::move(options)) {}

AgentClient::~AgentClient() {
  close();
}

void AgentClient::close() {
  std::lock_guard lock(mu_);
  close_locked();
}

void AgentClient::close_locked() {
  if (read_fd_ >= 0) ::close(read_fd_);
  if (write_fd_ >= 0 && write_fd_ != read_fd_) ::close(write_fd_);
  read_fd_ = write_fd_ = -1;
  buffer_.clear();
  hello_.reset();
  if (child_ > 0) {
    // stdin is closed: a relay ends by itself. Give it a moment, then insist.
    int status;
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
      gone = ::waitpid(child_, &status, WNOHANG) == child_;
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!gone) {
      ::kill(child_, SIGTERM);
      for (int i = 0; i < 100 && !gone; ++i) {
        gone = ::waitpid(child_, &status, WNOHANG) == child_;
        if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (!gone) {
        ::kill(child_, SIGKILL);
        ::waitpid(child_, &status, 0);
      }
    }
    child_ = -1;
  }
}

Status AgentClient::open_transport_locked() {
  if (options_.command.empty()) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (options_.socket_path.size() >= sizeof(addr.sun_path)) {
      return fail(ErrorCode::kInvalidArgument, "agent socket path too long");
    }
    std::memcpy(addr.sun_path, options_.socket_path.c_str(), options_.socket_path.size() + 1);
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(errno_error("socket", errno));
    // A unix connect completes at once (or fails) unless the backlog is full.
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      int err = errno;
      ::close(fd);
      return fail(ErrorCode::kUnavailable,
                  "connecting to agent " + options_.socket_path + ": " + std::strerror(err));
    }
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    read_fd_ = write_fd_ = fd;
    return {};
  }
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0) return fail(errno_error("pipe", errno));
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(to_child[0]);
    ::close(to_child[1]);
    return fail(errno_error("pipe", err));
  }
  std::vector<char*> argv;
  for (auto& arg : options_.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) ::close(fd);
    return fail(errno_error("fork", err));
  }
  if (pid == 0) {
    ::dup2(to_child[0], STDIN_FILENO);
    ::dup2(from_child[1], STDOUT_FILENO);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  ::fcntl(to_child[1], F_SETFL, O_NONBLOCK);
  ::fcntl(from_child[0], F_SETFL, O_NONBLOCK);
  write_fd_ = to_child[1];
  read_fd_ = from_child[0];
  child_ = pid;
  return {};
}

Status AgentClient::write_all_locked(std::string_view bytes, Clock::time_point deadline) {
  while (!bytes.empty()) {
    ssize_t n = quiet_write(write_fd_, bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOTCONN)) {
      pollfd p{write_fd_, POLLOUT, 0};
      int timeout = ms_until(deadline);
      if (timeout == 0) return fail(ErrorCode::kTimeout, "agent: timed out sending a request");
      ::poll(&p, 1, timeout);
      continue;
    }
    return fail(ErrorCode::kUnavailable,
                std::string("agent connection broken while sending: ") + std::strerror(errno));
  }
  return {};
}

Result<std::string> AgentClient::read_line_locked(Clock::time_point deadline) {
  std::size_t scanned = 0;
  while (true) {
    auto nl = buffer_.find('\n', scanned);
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    scanned = buffer_.size();
    if (buffer_.size() > proto::kMaxReplyLine) {
      return fail(ErrorCode::kTooLarge, "agent reply longer than the protocol allows");
    }
    int timeout = ms_until(deadline);
    if (timeout == 0) return fail(ErrorCode::kTimeout, "agent: no reply in time");
    pollfd p{read_fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, timeout);
    if (ready < 0 && errno != EINTR) return fail(errno_error("poll", errno));
    if (ready <= 0) continue;
    char buf[65536];
    ssize_t n = ::read(read_fd_, buf, sizeof(buf));
    if (n > 0) {
      buffer_.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    return fail(ErrorCode::kUnavailable,
                n == 0 ? std::string("agent closed the connection")
                       : std::string("agent connection broken: ") + std::strerror(errno));
  }
}

Result<std::string> AgentClient::exchange_locked(const std::string& line) {
  auto deadline = Clock::now() + options_.request_timeout;
  if (auto ok = write_all_locked(line + "\n", deadline); !ok) return fail(ok.error());
  return read_line_locked(deadline);
}

Status AgentClient::ensure_connected_locked() {
  if (read_fd_ >= 0 && hello_) return {};
  close_locked();
  if (auto ok = open_transport_locked(); !ok) return ok;
  auto deadline = Clock::now() + options_.connect_timeout;
  std::string hello = proto::format_request(proto::HelloRequest{proto::kProtocolVersion}) + "\n";
  // Even if the write fails, read: a refused peer gets "ERR 403 not authorized" and a close.
  Status sent = write_all_locked(hello, deadline);
  Result<std::string> line =
      read_line_locked(sent ? deadline : Clock::now() + std::chrono::milliseconds(200));
  if (!line && !sent) line = fail(sent.error());
  if (!line) {
    close_locked();
    Error e = line.error();
    if (e.code == ErrorCode::kTimeout) e.message = "agent: no HELLO reply in time";
    return fail(e);
  }
  auto reply = proto::parse_reply(*line);
  if (!reply) {
    close_locked();
    return fail(ErrorCode::kInternal, "agent: malformed HELLO reply: " + reply.error().message);
  }
  if (!reply->ok) {
    close_locked();
    return fail(proto::error_from_reply(*reply));
  }
  auto info = proto::parse_hello_payload(reply->text);
  if (!info) {
    close_locked();
    return fail(ErrorCode::kInternal, info.error().message);
  }
  if (info->protocol != proto::kProtocolVersion) {
    close_locked();
    return fail(ErrorCode::kInternal,
                "agent speaks protocol " + std::to_string(info->protocol) + ", expected 1");
  }
  hello_ = *info;
  ++connections_;
  return {};
}

Result<proto::HelloInfo> AgentClient::connect() {
  std::lock_guard lock(mu_);
  if (auto ok = ensure_connected_locked(); !ok) return fail(ok.error());
  return *hello_;
}

Result<std::string> AgentClient::call(const proto::Request& request) {
  return call_line(proto::format_request(request));
}

Result<std::string> AgentClient::call_line(const std::string& line) {
  if (line.size() > proto::kMaxRequestLine) {
    return fail(ErrorCode::kTooLarge, "request of " + std::to_string(line.size()) +
                                          " bytes exceeds the agent's line limit of " +
                                          std::to_string(proto::kMaxRequestLine));
  }
  std::lock_guard lock(mu_);
  Error last{ErrorCode::kUnavailable, "agent unavailable"};
  for (int attempt = 0; attempt <= options_.retries; ++attempt) {
    if (auto ok = ensure_connected_locked(); !ok) {
      last = ok.error();
      if (!is_broken(last)) return fail(last);
      continue;
    }
    auto reply_line = exchange_locked(line);
    if (!reply_line) {
      close_locked();  // the stream's position is unknown now
      last = reply_line.error();
      if (!is_broken(last)) return fail(last);
      continue;
    }
    auto reply = proto::parse_reply(*reply_line);
    if (!reply) {
      close_locked();
      return fail(ErrorCode::kInternal, "agent: malformed reply: " + reply.error().message);
    }
    if (!reply->ok) return fail(proto::error_from_reply(*reply));
    return reply->text;
  }
  return fail(last);
}

Status AgentClient::allow(Ipv4Address address, std::optional<std::uint32_t> ttl_seconds) {
  auto r = call(proto::AllowRequest{proto::Grant{address, ttl_seconds}});
  if (!r) return fail(r.error());
  return {};
}

Status AgentClient::revoke(Ipv4Address address) {
  auto r = call(proto::RevokeRequest{address});
  if (!r) return fail(r.error());
  return {};
}

Result<std::uint64_t> AgentClient::sync(const std::vector<proto::Grant>& grants) {
  auto r = call(proto::SyncRequest{grants});
  if (!r) return fail(r.error());
  return proto::parse_count_payload(*r);
}

Result<std::vector<proto::Grant>> AgentClient::list() {
  auto r = call(proto::ListRequest{});
  if (!r) return fail(r.error());
  return proto::parse_list_payload(*r);
}

Status AgentClient::bind(const proto::Binding& binding) {
  auto r = call(proto::BindRequest{binding});
  if (!r) return fail(r.error());
  return {};
}

Status AgentClient::unbind(std::string_view port) {
  auto r = call(proto::UnbindRequest{std::string(port)});
  if (!r) return fail(r.error());
  return {};
}

Status AgentClient::route(Ipv4Address address, std::uint16_t port, std::uint32_t seconds) {
  auto r = call(proto::RouteRequest{address, port, seconds});
  if (!r) return fail(r.error());
  return {};
}

Status AgentClient::unroute(Ipv4Address address, std::uint16_t port) {
  auto r = call(proto::UnrouteRequest{address, port});
  if (!r) return fail(r.error());
  return {};
}

Result<std::vector<proto::Binding>> AgentClient::bindings() {
  auto r = call(proto::BindingsRequest{});
  if (!r) return fail(r.error());
  return proto::parse_bindings_payload(*r);
}

Result<proto::StatusFields> AgentClient::status() {
  auto r = call(proto::StatusRequest{});
  if (!r) return fail(r.error());
  return proto::parse_status_payload(*r);
}

Status AgentClient::egress(Ipv4Address address, EgressList list) {
  normalize_egress_list(list);
  if (auto ok = validate_egress_list(list); !ok) return ok;
  auto r = call_line(egress_wire::format_egress(address, list));
  if (!r) return fail(r.error());
  return {};
}

Status AgentClient::egress_off(Ipv4Address address) {
  auto r = call_line(egress_wire::format_egress_off(address));
  if (!r) return fail(r.error());
  return {};
}

Result<std::map<Ipv4Address, EgressList>> AgentClient::egresses() {
  auto r = call_line(std::string(egress_wire::kEgressesRequest));
  if (!r) return fail(r.error());
  auto lists = egress_wire::parse_egresses_payload(*r);
  if (!lists) return fail(ErrorCode::kInternal, "agent: " + lists.error().message);
  return lists;
}

Result<std::vector<proto::EgressLogLine>> AgentClient::egress_log(Ipv4Address address) {
  auto r = call(proto::EgressLogQuery{address});
  if (!r) return fail(r.error());
  auto lines = proto::parse_egress_log_payload(address, *r);
  if (!lines) return fail(ErrorCode::kInternal, "agent: EGRESSLOG reply: " + lines.error().message);
  return lines;
}

Result<std::vector<proto::RefusedConnection>> AgentClient::egress_refused(Ipv4Address address) {
  auto r = call(proto::EgressRefusedQuery{address});
  if (!r) return fail(r.error());
  auto items = proto::parse_egress_refused_payload(*r);
  if (!items)
    return fail(ErrorCode::kInternal, "agent: EGRESSREFUSED reply: " + items.error().message);
  return items;
}

}  // namespace pvs
