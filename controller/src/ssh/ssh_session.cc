// SshSession::Impl: the I/O thread, its event loop, channel and SFTP slot accounting, and the
// public SshSession calls (connection set-up is in ssh_connect.cc).
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"
#include "session_impl.h"

namespace pvs {

using ssh_detail::Clock;

namespace {

std::once_flag g_libssh2_init;

void libssh2_global_init() {
  // libssh2_init is not thread-safe; do it once before any session exists.
  std::call_once(g_libssh2_init, [] { libssh2_init(0); });
}

// Completes when the connection is up (the loop connects before stepping any op).
class ConnectOp : public SshSession::Impl::Op {
 public:
  explicit ConnectOp(std::shared_ptr<std::promise<Status>> p) : promise_(std::move(p)) {}
  Step step(SshSession::Impl&) override {
    promise_->set_value({});
    return Step::kDone;
  }
  void abandon(SshSession::Impl&) override {}
  bool on_session_lost(const Error& error, bool) override {
    promise_->set_value(tl::unexpected<Error>(error));
    return false;
  }

 private:
  std::shared_ptr<std::promise<Status>> promise_;
};

// Connects a pool member in the background; `done` runs on that member's I/O thread.
class BackgroundConnectOp : public SshSession::Impl::Op {
 public:
  explicit BackgroundConnectOp(std::function<void(bool)> done) : done_(std::move(done)) {}
  Step step(SshSession::Impl&) override {
    finish(true);
    return Step::kDone;
  }
  void abandon(SshSession::Impl&) override {}
  bool on_session_lost(const Error& error, bool) override {
    if (!error.is(SshErrc::kClosed)) {
      log::warn("ssh: extra exec connection failed: " + error.message);
    }
    finish(false);
    return false;
  }

 private:
  void finish(bool ok) {
    auto done = std::move(done_);
    done_ = nullptr;
    if (done) done(ok);
  }
  std::function<void(bool)> done_;
};

}  // namespace

// The connections execs are spread over (SshConfig::exec_connections): the primary (impl_)
// and extras opened in the background when execs pile up. Large uploads use the first
// transfer_connections - 1 extras as well (opening them when needed).
struct SshSession::ExecPool {
  struct Member {
    std::shared_ptr<Impl> impl;
    std::shared_ptr<std::atomic<int>> inflight = std::make_shared<std::atomic<int>>(0);
    std::shared_ptr<std::atomic<bool>> connecting = std::make_shared<std::atomic<bool>>(false);
  };
  std::mutex mu;
  std::shared_ptr<std::atomic<int>> primary_inflight = std::make_shared<std::atomic<int>>(0);
  std::vector<Member> extras;  // GUARDED_BY(mu)

  // A new, unconnected member with the primary's configuration.
  Member& add(const Impl& primary) {  // REQUIRES: mu held
    SshConfig cfg = primary.config();
    // The extra connection must meet the key the primary accepted (for TOFU: not a new first).
    if (cfg.host_key_policy == HostKeyPolicy::kTrustOnFirstUse) {
      cfg.host_key_fingerprint = primary.accepted_fingerprint();
    }
    Member m;
    m.impl = std::make_shared<Impl>(std::move(cfg));
    extras.push_back(std::move(m));
    return extras.back();
  }
};

// ---------------------------------------------------------------------------------------------
// Caller side.

SshSession::Impl::Impl(SshConfig config) : config_(std::move(config)) {
  libssh2_global_init();
  wake_fd_ = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  tofu_fingerprint_ = config_.host_key_fingerprint.empty()
                          ? std::string()
                          : ssh_detail::normalize_fingerprint(config_.host_key_fingerprint);
}

SshSession::Impl::~Impl() {
  close();
}

void SshSession::Impl::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_.get(), &one, sizeof one);
}

void SshSession::Impl::ensure_thread() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void SshSession::Impl::submit(std::shared_ptr<Op> op) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(op));
    ensure_thread();
  }
  wake();
}

Status SshSession::Impl::connect_sync() {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  submit(std::make_shared<ConnectOp>(promise));
  return future.get();
}

void SshSession::Impl::close() {
  bulk_clients_.stop();
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    t = std::move(thread_);
  }
  wake();
  if (t.joinable()) t.join();
  // Anything queued after the loop exited.
  std::deque<std::shared_ptr<Op>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(queue_);
  }
  Error closed = ssh_fail(SshErrc::kClosed, "ssh session closed").value();
  for (auto& op : left) op->on_session_lost(closed, false);
}

std::string SshSession::Impl::fingerprint() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fingerprint_;
}

std::pair<std::string, std::uint64_t> SshSession::Impl::host_key() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {host_key_, key_from_};
}

SshStats SshSession::Impl::stats() const {
  SshStats s;
  s.connects = connects_.load();
  s.keepalives_sent = keepalives_.load();
  s.libssh2_live_allocations = live_allocations_.load();
  s.channels_open = stat_channels_open_.load();
  s.channel_limit = stat_channel_limit_.load();
  s.watched = watched_.load();
  s.bulk_transfers = bulk_transfers_.load();
  std::lock_guard<std::mutex> lock(mu_);
  s.methods = methods_;
  return s;
}

// ---------------------------------------------------------------------------------------------
// I/O thread: bookkeeping used by ops.

bool SshSession::Impl::try_take_opener(const Op* op) {
  if (opener_ != nullptr && opener_ != op) return false;
  opener_ = op;
  return true;
}

void SshSession::Impl::release_opener(const Op* op) {
  if (opener_ == op) opener_ = nullptr;
}

bool SshSession::Impl::try_reserve_channel() {
  if (channels_open_ >= channel_limit_) return false;
  ++channels_open_;
  stat_channels_open_.store(channels_open_);
  return true;
}

void SshSession::Impl::release_channel() {
  ++release_epoch_;
  if (channels_open_ > 0) --channels_open_;
  stat_channels_open_.store(channels_open_);
}

bool SshSession::Impl::refusal_is_busy(int& lag_retries) {
  if (channels_open_ == 0) {
    // 50 retries 20 ms apart: a second for sshd to free a session it still counts. A server
    // that refuses every session is told apart by that second.
    constexpr int kMaxLagRetries = 50;
    return ++lag_retries <= kMaxLagRetries;
  }
  // Only the first refusal sets the limit: later ones are usually sshd still counting a
  // session we already closed, and must not ratchet the limit down.
  if (!limit_learned_ && channels_open_ < channel_limit_) {
    limit_learned_ = true;
    log::warn("ssh " + config_.host + ": server refused channel number " +
              std::to_string(channels_open_ + 1) + ", using at most " +
              std::to_string(channels_open_) +
              " channels (raise MaxSessions in the sandbox's sshd_config)");
    channel_limit_ = channels_open_;
    stat_channel_limit_.store(channels_open_);
  }
  return true;
}

void SshSession::Impl::fatal(Error error) {
  if (!fatal_pending_) {
    fatal_pending_ = true;
    fatal_error_ = std::move(error);
  }
}

bool SshSession::Impl::peer_closed() const {
  if (!sock_) return true;
  char c;
  ssize_t r = ::recv(sock_.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

LIBSSH2_CHANNEL* SshSession::Impl::take_spare() {
  if (spares_.empty()) return nullptr;
  LIBSSH2_CHANNEL* c = spares_.back();
  spares_.pop_back();
  return c;
}

bool SshSession::Impl::step_spare() {
  const Op* token = reinterpret_cast<const Op*>(&spare_token_);
  if (!spare_opening_) {
    if (spares_disabled_ || static_cast<int>(spares_.size()) >= config_.spare_channels ||
        channels_open_ + 2 > channel_limit_ || opener_ != nullptr) {
      return false;
    }
    if (!try_reserve_channel()) return false;
    opener_ = token;
    spare_opening_ = true;
  }
  LIBSSH2_CHANNEL* c =
      libssh2_channel_open_ex(session_, "session", 7, LIBSSH2_CHANNEL_WINDOW_DEFAULT * 2,
                              LIBSSH2_CHANNEL_PACKET_DEFAULT, nullptr, 0);
  if (c == nullptr) {
    int rc = libssh2_session_last_errno(session_);
    if (rc == LIBSSH2_ERROR_EAGAIN) return false;
    spare_opening_ = false;
    release_opener(token);
    release_channel();
    spares_disabled_ = true;  // the server said no: do not insist on this connection
    if (ssh_detail::is_fatal_session_error(rc)) {
      fatal(ssh_detail::session_error(session_, rc, "ssh: open spare channel"));
    }
    return true;
  }
  spare_opening_ = false;
  release_opener(token);
  spares_.push_back(c);
  return true;
}

void SshSession::Impl::adopt_zombie(LIBSSH2_CHANNEL* channel, bool counted) {
  zombies_.emplace_back(channel, counted);
}

void SshSession::Impl::reap_zombies() {
  for (auto it = sftp_zombies_.begin(); it != sftp_zombies_.end();) {
    if (libssh2_sftp_shutdown(*it) == LIBSSH2_ERROR_EAGAIN) {
      ++it;
      continue;
    }
    it = sftp_zombies_.erase(it);
    release_channel();
  }
  for (auto it = zombies_.begin(); it != zombies_.end();) {
    int rc = libssh2_channel_free(it->first);
    if (rc == LIBSSH2_ERROR_EAGAIN) {
      ++it;
      continue;
    }
    bool counted = it->second;
    it = zombies_.erase(it);
    if (counted) release_channel();
  }
}

// ---------------------------------------------------------------------------------------------
// The loop.

void SshSession::Impl::run() {
  bool idle_data_pending = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) break;
      while (!queue_.empty()) {
        active_.push_back(std::move(queue_.front()));
        queue_.pop_front();
        idle_data_pending = false;
      }
    }
    std::uint64_t drained;
    [[maybe_unused]] ssize_t n = ::read(wake_fd_.get(), &drained, sizeof drained);

    if (!active_.empty() && session_ == nullptr) {
      auto st = do_connect();
      if (!st) {
        fail_all(st.error(), false);
        continue;
      }
    }

    const std::uint64_t bytes_before = bytes_in_;
    bool progress = step_ops();

    if (fatal_pending_) {
      fatal_pending_ = false;
      log::warn("ssh " + config_.host + ": connection lost: " + fatal_error_.message);
      teardown(false);
      fail_all(fatal_error_, true);
      continue;
    }
    if (session_ != nullptr && (!zombies_.empty() || !sftp_zombies_.empty())) reap_zombies();
    if (session_ != nullptr && config_.spare_channels > 0 && step_spare()) progress = true;

    if (!send_keepalive()) continue;
    // Packets read meanwhile may belong to an op stepped before the read: step them again.
    if (progress || bytes_in_ != bytes_before) continue;
    wait_for_work(&idle_data_pending);
  }
  // Stopping: everything still queued or running fails with kClosed.
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!queue_.empty()) {
      active_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  Error closed = ssh_fail(SshErrc::kClosed, "ssh session closed").value();
  teardown(true);
  fail_all(closed, false);
  active_.clear();
  spawned_.clear();
}

// One step of every active op; true if any moved. Ops spawned meanwhile join the active ones.
bool SshSession::Impl::step_ops() {
  bool progress = false;
  for (std::size_t i = 0; i < active_.size() && !fatal_pending_; ++i) {
    auto step = active_[i]->step(*this);
    if (step == Op::Step::kDone) {
      active_[i].reset();
      progress = true;
    } else if (step == Op::Step::kProgress) {
      progress = true;
    }
  }
  active_.erase(std::remove(active_.begin(), active_.end(), nullptr), active_.end());
  for (auto& op : spawned_) active_.push_back(std::move(op));
  if (!spawned_.empty()) progress = true;
  spawned_.clear();
  return progress;
}

// A keepalive when one is due; false when the connection failed sending it.
bool SshSession::Impl::send_keepalive() {
  auto now = Clock::now();
  if (session_ == nullptr || now < next_keepalive_) return true;
  int next = 0;
  int rc = libssh2_keepalive_send(session_, &next);
  if (rc == 0) keepalives_.fetch_add(1);
  if (ssh_detail::is_fatal_session_error(rc)) {
    fatal(ssh_detail::session_error(session_, rc, "keepalive"));
    return false;
  }
  next_keepalive_ = now + std::chrono::seconds(std::max(1, next));
  return true;
}

// Nothing can move: waits for the socket, a new op, or the nearest deadline. An idle
// connection is watched too, so that a server closing it is noticed.
void SshSession::Impl::wait_for_work(bool* idle_data_pending) {
  auto until = next_keepalive_;
  if (sftp_refused_) until = std::min(until, sftp_retry_at_);
  for (auto& op : active_) until = std::min(until, op->deadline());
  int timeout_ms = -1;
  if (until != Clock::time_point::max()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    timeout_ms = static_cast<int>(std::clamp<std::int64_t>(left.count() + 1, 0, 3600000));
  }
  pollfd fds[2] = {{wake_fd_.get(), POLLIN, 0}, {-1, 0, 0}};
  if (session_ != nullptr) {
    fds[1].fd = sock_.get();
    if (!active_.empty()) {
      int dirs = libssh2_session_block_directions(session_);
      bool input = std::any_of(active_.begin(), active_.end(),
                               [](const std::shared_ptr<Op>& op) { return op->wants_input(); });
      fds[1].events = input ? POLLIN : 0;
      if (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) fds[1].events |= POLLOUT;
      if (fds[1].events == 0) fds[1].fd = -1;  // only a wake-up or a deadline moves anything
    } else {
      // To notice the server closing an idle connection; POLLRDHUP also behind SSH data that
      // libssh2 has not read yet.
      fds[1].events = *idle_data_pending ? POLLRDHUP : (POLLIN | POLLRDHUP);
    }
  }
  int pn = ::poll(fds, 2, timeout_ms);
  if (pn > 0 && session_ != nullptr && active_.empty() && fds[1].revents != 0) {
    if ((fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0 || peer_closed()) {
      log::info("ssh " + config_.host + ": server closed the idle connection");
      teardown(false);
    } else if (!spares_.empty()) {
      // SSH data while idle (a server keepalive, hostkeys-00@openssh.com, ...): a read on a
      // spare channel makes libssh2 process it, so EOF behind it is noticed too.
      char buf[512];
      ssize_t rc = libssh2_channel_read_ex(spares_.front(), 0, buf, sizeof buf);
      if (rc < 0 && ssh_detail::is_fatal_session_error(static_cast<int>(rc))) {
        log::info("ssh " + config_.host + ": idle connection failed");
        teardown(false);
      }
    } else {
      *idle_data_pending = true;  // libssh2 reads it with the next op
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Public API.

SshSession::SshSession(SshConfig config)
    : impl_(std::make_shared<Impl>(std::move(config))), pool_(std::make_shared<ExecPool>()) {}

SshSession::~SshSession() {
  close();
}

Status SshSession::connect() {
  return impl_->connect_sync();
}
bool SshSession::is_connected() const {
  return impl_->connected();
}
void SshSession::close() {
  std::vector<ExecPool::Member> extras;
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    extras.swap(pool_->extras);
  }
  for (auto& m : extras) m.impl->close();
  impl_->close();
}
std::string SshSession::host_key_fingerprint() const {
  return impl_->fingerprint();
}
SshStats SshSession::stats() const {
  SshStats s = impl_->stats();
  s.exec_connections = 1;
  std::lock_guard<std::mutex> lock(pool_->mu);
  for (const auto& m : pool_->extras) {
    const SshStats extra = m.impl->stats();
    s.watched += extra.watched;
    if (!m.impl->connected()) continue;
    ++s.exec_connections;
    s.channels_open += extra.channels_open;
  }
  return s;
}

std::future<Result<ExecResult>> SshSession::exec_async(std::string command, ExecOptions options) {
  auto promise = std::make_shared<std::promise<Result<ExecResult>>>();
  auto future = promise->get_future();
  exec_then(std::move(command), std::move(options),
            [promise](Result<ExecResult> r) { promise->set_value(std::move(r)); });
  return future;
}

void SshSession::exec_then(std::string command, ExecOptions options, ExecDone done) {
  auto remote = ssh_detail::build_remote_command(command, options);
  if (!remote) {
    done(tl::unexpected<Error>(remote.error()));
    return;
  }
  std::shared_ptr<Impl> target = impl_;
  std::shared_ptr<std::atomic<int>> counter = pool_->primary_inflight;
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    const SshConfig& cfg = impl_->config();
    int load = counter->load();
    if (cfg.exec_connections > 1 && load > 0) {
      // The least busy connected member; the primary wins ties.
      const auto usable = static_cast<std::size_t>(cfg.exec_connections - 1);
      for (std::size_t i = 0; i < pool_->extras.size() && i < usable; ++i) {
        auto& m = pool_->extras[i];
        if (!m.impl->connected()) continue;
        int l = m.inflight->load();
        if (l < load) {
          load = l;
          target = m.impl;
          counter = m.inflight;
        }
      }
      if (load >= 2 && impl_->connected()) grow_pool_locked();
    }
    counter->fetch_add(1);
  }
  target->submit(
      ssh_detail::make_exec_op(std::move(*remote), std::move(options), std::move(done), counter));
}

void SshSession::grow_pool_locked() {
  for (const auto& m : pool_->extras) {
    if (m.connecting->load()) return;  // one at a time
  }
  // The first exec_connections - 1 extras are the execs' (transfers may have opened more).
  const auto usable = static_cast<std::size_t>(impl_->config().exec_connections - 1);
  ExecPool::Member* member = nullptr;
  for (std::size_t i = 0; i < pool_->extras.size() && i < usable; ++i) {
    if (!pool_->extras[i].impl->connected()) {
      member = &pool_->extras[i];
      break;
    }
  }
  if (member == nullptr) {
    if (pool_->extras.size() >= usable) return;
    member = &pool_->add(*impl_);
  }
  member->connecting->store(true);
  member->impl->submit(std::make_shared<BackgroundConnectOp>(
      [flag = member->connecting](bool) { flag->store(false); }));
}

std::vector<std::shared_ptr<SshSession::Impl>> SshSession::connections_for_transfer(int at_most) {
  std::vector<std::shared_ptr<Impl>> all{impl_};
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    const auto want =
        static_cast<std::size_t>(std::min(at_most, impl_->config().transfer_connections));
    while (pool_->extras.size() + 1 < want) pool_->add(*impl_);
    for (std::size_t i = 0; i + 1 < want; ++i) all.push_back(pool_->extras[i].impl);
  }
  // Connect the missing ones together; one that cannot connect is left out (the transfer
  // goes over the others).
  std::vector<std::pair<std::shared_ptr<Impl>, std::future<Status>>> pending;
  std::vector<std::shared_ptr<Impl>> ready{impl_};
  for (std::size_t i = 1; i < all.size(); ++i) {
    if (all[i]->connected()) {
      ready.push_back(all[i]);
      continue;
    }
    auto promise = std::make_shared<std::promise<Status>>();
    pending.emplace_back(all[i], promise->get_future());
    all[i]->submit(std::make_shared<ConnectOp>(promise));
  }
  for (auto& [impl, connected] : pending) {
    if (connected.get()) ready.push_back(impl);
  }
  return ready;
}

Result<ExecResult> SshSession::exec(std::string command, ExecOptions options) {
  return exec_async(std::move(command), std::move(options)).get();
}

}  // namespace pvs
