#include "agent_link.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>

#include "mono_clock.h"
#include "pvesandbox/common/io.h"

namespace pvs::resolver {
bool AgentLink::connect_now() {
  if (fd_) return true;
  auto fd = connect_unix(socket_);
  if (!fd) return false;
  ::fcntl(fd->get(), F_SETFL, ::fcntl(fd->get(), F_GETFL) | O_NONBLOCK);
  fd_ = std::move(*fd);
  in_.clear();
  out_.clear();
  for (auto& r : pending_) out_ += r.line + "\n";  // requests left over from a lost connection
  return true;
}

void AgentLink::call(const std::string& line, Callback done) {
  if (!connect_now()) {
    done(fail(ErrorCode::kUnavailable, "agent " + socket_ + ": cannot connect"));
    return;
  }
  pending_.push_back(Request{line, std::move(done), mono_ms() + timeout_ms_, false});
  out_ += line + "\n";
  flush();
}

void AgentLink::flush() {
  while (fd_ && !out_.empty()) {
    ssize_t n = ::send(fd_.get(), out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return lost(errno_error("send", errno).message, true);
    out_.erase(0, static_cast<std::size_t>(n));
  }
}

void AgentLink::read_replies() {
  char buf[16384];
  while (fd_) {
    ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      return lost(n == 0 ? "connection closed" : errno_error("recv", errno).message, true);
    }
    in_.append(buf, static_cast<std::size_t>(n));
    if (in_.size() > proto::kMaxReplyLine) return lost("reply too long", false);
  }
  std::size_t nl;
  while (fd_ && (nl = in_.find('\n')) != std::string::npos) {
    auto reply = proto::parse_reply(std::string_view(in_).substr(0, nl));
    in_.erase(0, nl + 1);
    if (pending_.empty() || !reply) return lost("unexpected reply", false);
    Request r = std::move(pending_.front());
    pending_.pop_front();
    r.done(std::move(*reply));  // may call() again: pending_ is consistent here
  }
}

void AgentLink::lost(const std::string& why, bool may_retry) {
  fd_ = UniqueFd();
  std::deque<Request> failed;
  std::deque<Request> retry;
  for (auto& r : pending_) {  // a closed connection may be an agent restart: retry once
    bool again = may_retry && !r.retried;
    r.retried = true;
    (again ? retry : failed).push_back(std::move(r));
  }
  pending_ = std::move(retry);
  if (!pending_.empty() && !connect_now()) {
    for (auto& r : pending_) failed.push_back(std::move(r));
    pending_.clear();
  }
  for (auto& r : failed) r.done(fail(ErrorCode::kUnavailable, "agent " + socket_ + ": " + why));
  if (fd_) flush();
}

void AgentLink::add_pollfd(std::vector<pollfd>& out) const {
  if (!fd_ || pending_.empty()) return;
  out.push_back(pollfd{fd_.get(), static_cast<short>(POLLIN | (out_.empty() ? 0 : POLLOUT)), 0});
}

void AgentLink::process(const std::vector<pollfd>& fds, std::int64_t now_ms) {
  for (const auto& p : fds) {
    if (!fd_ || p.fd != fd_.get() || p.revents == 0) continue;
    if (p.revents & POLLOUT) flush();
    if (p.revents & (POLLIN | POLLERR | POLLHUP)) read_replies();
  }
  if (!pending_.empty() && pending_.front().deadline_ms <= now_ms) {
    lost("no reply within " + std::to_string(timeout_ms_) + " ms", false);
  }
}

int AgentLink::next_timeout_ms(std::int64_t now_ms) const {
  if (pending_.empty()) return -1;
  return static_cast<int>(std::max<std::int64_t>(0, pending_.front().deadline_ms - now_ms));
}

}  // namespace pvs::resolver
