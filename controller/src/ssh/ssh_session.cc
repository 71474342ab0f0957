// SshSession::Impl: the I/O thread, connection set-up (TCP, handshake, host key, auth), the
// event loop, teardown and reconnect.
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

SshSession::Impl* impl_of(void** abstract) {
  return static_cast<SshSession::Impl*>(*abstract);
}

using AllocHeader = SshSession::Impl::AllocHeader;
static_assert(sizeof(AllocHeader) % 16 == 0);

void link_block(SshSession::Impl* impl, AllocHeader* h) {
  AllocHeader* head = &impl->alloc_list_;
  h->prev = head;
  h->next = head->next;
  head->next->prev = h;
  head->next = h;
}

void unlink_block(AllocHeader* h) {
  h->prev->next = h->next;
  h->next->prev = h->prev;
}

LIBSSH2_ALLOC_FUNC(counting_alloc) {
  auto* h = static_cast<AllocHeader*>(std::malloc(sizeof(AllocHeader) + count));
  if (h == nullptr) return nullptr;
  h->size = count;
  link_block(impl_of(abstract), h);
  impl_of(abstract)->live_allocations_.fetch_add(1, std::memory_order_relaxed);
  return h + 1;
}

LIBSSH2_FREE_FUNC(counting_free) {
  if (ptr == nullptr) return;
  AllocHeader* h = static_cast<AllocHeader*>(ptr) - 1;
  unlink_block(h);
  impl_of(abstract)->live_allocations_.fetch_sub(1, std::memory_order_relaxed);
  std::free(h);
}

LIBSSH2_REALLOC_FUNC(counting_realloc) {
  if (ptr == nullptr) return counting_alloc(count, abstract);
  AllocHeader* h = static_cast<AllocHeader*>(ptr) - 1;
  unlink_block(h);
  auto* nh = static_cast<AllocHeader*>(std::realloc(h, sizeof(AllocHeader) + count));
  if (nh == nullptr) {
    link_block(impl_of(abstract), h);
    return nullptr;
  }
  nh->size = count;
  link_block(impl_of(abstract), nh);
  return nh + 1;
}

// Constant-time comparison of two fingerprints.
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Accepts "SHA256:abc", "sha256:abc", "abc", with or without base64 padding.
std::string normalize_fingerprint(std::string_view fp) {
  if (fp.size() > 7 && (fp.substr(0, 7) == "SHA256:" || fp.substr(0, 7) == "sha256:")) {
    fp.remove_prefix(7);
  }
  while (!fp.empty() && fp.back() == '=') fp.remove_suffix(1);
  return "SHA256:" + std::string(fp);
}

int knownhost_key_bit(int hostkey_type) {
  switch (hostkey_type) {
    case LIBSSH2_HOSTKEY_TYPE_RSA: return LIBSSH2_KNOWNHOST_KEY_SSHRSA;
    case LIBSSH2_HOSTKEY_TYPE_DSS: return LIBSSH2_KNOWNHOST_KEY_SSHDSS;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: return LIBSSH2_KNOWNHOST_KEY_ECDSA_256;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: return LIBSSH2_KNOWNHOST_KEY_ECDSA_384;
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: return LIBSSH2_KNOWNHOST_KEY_ECDSA_521;
    case LIBSSH2_HOSTKEY_TYPE_ED25519: return LIBSSH2_KNOWNHOST_KEY_ED25519;
    default: return LIBSSH2_KNOWNHOST_KEY_UNKNOWN;
  }
}

struct KnownHostsDeleter {
  void operator()(LIBSSH2_KNOWNHOSTS* k) const { libssh2_knownhost_free(k); }
};
using KnownHostsPtr = std::unique_ptr<LIBSSH2_KNOWNHOSTS, KnownHostsDeleter>;

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
// and extras opened in the background when execs pile up.
struct SshSession::ExecPool {
  struct Member {
    std::shared_ptr<Impl> impl;
    std::shared_ptr<std::atomic<int>> inflight = std::make_shared<std::atomic<int>>(0);
    std::shared_ptr<std::atomic<bool>> connecting = std::make_shared<std::atomic<bool>>(false);
  };
  std::mutex mu;
  std::shared_ptr<std::atomic<int>> primary_inflight = std::make_shared<std::atomic<int>>(0);
  std::vector<Member> extras;  // GUARDED_BY(mu)
};

// ---------------------------------------------------------------------------------------------
// Caller side.

SshSession::Impl::Impl(SshConfig config) : config_(std::move(config)) {
  libssh2_global_init();
  wake_fd_ = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  tofu_fingerprint_ = config_.host_key_fingerprint.empty()
                          ? std::string()
                          : normalize_fingerprint(config_.host_key_fingerprint);
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

SshStats SshSession::Impl::stats() const {
  SshStats s;
  s.connects = connects_.load();
  s.keepalives_sent = keepalives_.load();
  s.libssh2_live_allocations = live_allocations_.load();
  s.channels_open = stat_channels_open_.load();
  s.channel_limit = stat_channel_limit_.load();
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

void SshSession::Impl::learn_channel_limit() {
  // Only the first refusal sets the limit: later ones are usually sshd still counting a
  // session we already closed, and must not ratchet the limit down.
  int limit = std::max(1, channels_open_);
  if (!limit_learned_ && limit < channel_limit_) {
    limit_learned_ = true;
    log::warn("ssh " + config_.host + ": server refused channel number " +
              std::to_string(channels_open_ + 1) + ", using at most " + std::to_string(limit) +
              " channels (raise MaxSessions in the sandbox's sshd_config)");
    channel_limit_ = limit;
    stat_channel_limit_.store(limit);
  }
}

Result<int> SshSession::Impl::acquire_sftp(const Op* op) {
  for (std::size_t i = 0; i < sftp_slots_.size(); ++i) {
    if (sftp_slots_[i].sftp != nullptr && !sftp_slots_[i].busy) {
      sftp_slots_[i].busy = true;
      return static_cast<int>(i);
    }
  }
  if (static_cast<int>(sftp_slots_.size()) >= std::max(1, config_.max_sftp_channels)) return -1;
  if (sftp_refused_ && release_epoch_ == sftp_refused_epoch_ && Clock::now() < sftp_retry_at_) {
    return -1;
  }
  sftp_refused_ = false;
  if (opener_ != op) {
    if (opener_ != nullptr) return -1;
    if (!try_reserve_channel()) {
      if (!spares_.empty()) {  // give a spare exec channel's slot to SFTP
        adopt_zombie(take_spare());
      }
      return -1;
    }
    opener_ = op;
  }
  LIBSSH2_SFTP* sftp = libssh2_sftp_init(session_);
  if (sftp == nullptr) {
    int rc = libssh2_session_last_errno(session_);
    if (rc == LIBSSH2_ERROR_EAGAIN) return -1;
    release_opener(op);
    release_channel();
    Error e = ssh_detail::session_error(session_, rc, "sftp subsystem");
    if (ssh_detail::is_fatal_session_error(rc)) {
      fatal(e);
      return -1;
    }
    if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE && channels_open_ > 0) {
      learn_channel_limit();
      sftp_refused_ = true;
      sftp_refused_epoch_ = release_epoch_;
      sftp_retry_at_ = Clock::now() + std::chrono::milliseconds(20);
      return -1;
    }
    return tl::unexpected<Error>(std::move(e));
  }
  release_opener(op);
  sftp_slots_.push_back(SftpSlot{sftp, true});
  return static_cast<int>(sftp_slots_.size() - 1);
}

void SshSession::Impl::release_sftp(int slot) {
  if (slot >= 0 && static_cast<std::size_t>(slot) < sftp_slots_.size()) {
    sftp_slots_[static_cast<std::size_t>(slot)].busy = false;
  }
}

void SshSession::Impl::discard_sftp(int slot) {
  // Kept simple: the instance stays in the pool but is marked free; libssh2 recovers per call.
  release_sftp(slot);
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
// Connection set-up.

Status SshSession::Impl::wait_socket(Clock::time_point deadline) {
  int dirs = libssh2_session_block_directions(session_);
  short events = 0;
  if (dirs & LIBSSH2_SESSION_BLOCK_INBOUND) events |= POLLIN;
  if (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) events |= POLLOUT;
  if (events == 0) events = POLLIN;
  pollfd fds[2] = {{sock_.get(), events, 0}, {wake_fd_.get(), POLLIN, 0}};
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) {
    return ssh_fail(SshErrc::kConnectTimeout, "ssh " + config_.host + ":" +
                                                  std::to_string(config_.port) +
                                                  ": no answer within connect_timeout");
  }
  int n = ::poll(fds, 2, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 60000)));
  if (n < 0 && errno != EINTR) {
    return ssh_fail(SshErrc::kNetwork, std::string("ssh: poll: ") + strerror(errno));
  }
  if (fds[1].revents & POLLIN) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return ssh_fail(SshErrc::kClosed, "ssh session closed while connecting");
  }
  return {};
}

Status SshSession::Impl::do_connect() {
  const std::string where = config_.host + ":" + std::to_string(config_.port);
  if (config_.host.empty()) return ssh_fail(SshErrc::kInvalidArgument, "ssh: no host configured");
  const auto deadline = Clock::now() + config_.connect_timeout;

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int gai = ::getaddrinfo(config_.host.c_str(), std::to_string(config_.port).c_str(), &hints, &res);
  if (gai != 0 || res == nullptr) {
    return ssh_fail(SshErrc::kResolveFailed,
                    "ssh: cannot resolve " + pvs::quoted(config_.host) + ": " + gai_strerror(gai));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> res_guard(res, ::freeaddrinfo);

  UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return ssh_fail(SshErrc::kNetwork, "ssh: socket: " + std::string(strerror(errno)));
  if (::connect(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      int e = errno;
      return ssh_fail(e == ECONNREFUSED ? SshErrc::kConnectRefused : SshErrc::kNetwork,
                      "ssh " + where + ": connect: " + strerror(e));
    }
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        return ssh_fail(SshErrc::kConnectTimeout, "ssh " + where + ": TCP connect timed out");
      }
      pollfd p{fd.get(), POLLOUT, 0};
      int n = ::poll(&p, 1, static_cast<int>(left.count() + 1));
      if (n < 0 && errno == EINTR) continue;
      if (n > 0) break;
    }
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      return ssh_fail(err == ECONNREFUSED ? SshErrc::kConnectRefused : SshErrc::kNetwork,
                      "ssh " + where + ": connect: " + strerror(err));
    }
  }
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = 30, intvl = 10, cnt = 3;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  unsigned int user_timeout =
      static_cast<unsigned int>(std::chrono::milliseconds(config_.dead_peer_timeout).count());
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  sock_ = std::move(fd);

  live_allocations_.store(0);
  session_ = libssh2_session_init_ex(counting_alloc, counting_free, counting_realloc, this);
  if (session_ == nullptr) {
    sock_.reset();
    free_leftover_allocations();
    return ssh_fail(SshErrc::kProtocol, "ssh: libssh2_session_init failed");
  }
  libssh2_session_set_blocking(session_, 0);
  if (!config_.host_key_algorithms.empty()) {
    libssh2_session_method_pref(session_, LIBSSH2_METHOD_HOSTKEY,
                                config_.host_key_algorithms.c_str());
  }
  auto fail_teardown = [this](Error e) -> Status {
    teardown(false);
    return tl::unexpected<Error>(std::move(e));
  };

  int rc;
  while ((rc = libssh2_session_handshake(session_, sock_.get())) == LIBSSH2_ERROR_EAGAIN) {
    if (auto w = wait_socket(deadline); !w) return fail_teardown(w.error());
  }
  if (rc != 0) {
    Error e = ssh_detail::session_error(session_, rc, "ssh " + where + ": handshake");
    ssh_detail::retag(e, SshErrc::kHandshake);
    if (rc == LIBSSH2_ERROR_KEX_FAILURE) {
      e.message += " (the server must offer an ssh-ed25519 host key)";
    }
    return fail_teardown(std::move(e));
  }
  if (auto st = verify_host_key(); !st) return fail_teardown(st.error());
  if (auto st = authenticate(); !st) return fail_teardown(st.error());

  if (config_.keepalive_interval.count() > 0) {
    // want_reply=0: with 1, libssh2 1.10 queues every REQUEST_FAILURE reply forever (#623).
    libssh2_keepalive_config(session_, 0,
                             static_cast<unsigned>(config_.keepalive_interval.count()));
    next_keepalive_ = Clock::now() + config_.keepalive_interval;
  } else {
    next_keepalive_ = Clock::time_point::max();
  }
  {
    auto method = [this](int which) {
      const char* m = libssh2_session_methods(session_, which);
      return std::string(m != nullptr ? m : "?");
    };
    std::string methods =
        "kex=" + method(LIBSSH2_METHOD_KEX) + " hostkey=" + method(LIBSSH2_METHOD_HOSTKEY) +
        " cipher=" + method(LIBSSH2_METHOD_CRYPT_CS) + " mac=" + method(LIBSSH2_METHOD_MAC_CS);
    std::lock_guard<std::mutex> lock(mu_);
    methods_ = std::move(methods);
  }
  channels_open_ = 0;
  channel_limit_ = std::max(1, config_.max_channels);
  limit_learned_ = false;
  stat_channels_open_.store(0);
  stat_channel_limit_.store(channel_limit_);
  ++generation_;
  connects_.fetch_add(1);
  connected_.store(true);
  return {};
}

Status SshSession::Impl::verify_host_key() {
  const std::string where = config_.host + ":" + std::to_string(config_.port);
  std::size_t key_len = 0;
  int key_type = 0;
  const char* key = libssh2_session_hostkey(session_, &key_len, &key_type);
  const char* hash = libssh2_hostkey_hash(session_, LIBSSH2_HOSTKEY_HASH_SHA256);
  if (key == nullptr || hash == nullptr) {
    return ssh_fail(SshErrc::kHandshake, "ssh " + where + ": server sent no host key");
  }
  const std::string fp = ssh_detail::format_sha256_fingerprint(std::string_view(hash, 32));
  {
    std::lock_guard<std::mutex> lock(mu_);
    fingerprint_ = fp;
  }
  auto mismatch = [&](const std::string& expected) {
    return ssh_fail(SshErrc::kHostKeyMismatch, "ssh " + where + ": HOST KEY MISMATCH: server key " +
                                                   fp + ", expected " + expected +
                                                   " (possible man-in-the-middle; refusing)");
  };

  switch (config_.host_key_policy) {
    case HostKeyPolicy::kInsecure:
      log::warn("ssh " + where + ": host key NOT verified (insecure policy), server key " + fp);
      return {};
    case HostKeyPolicy::kPinned: {
      if (config_.host_key_fingerprint.empty()) {
        return ssh_fail(SshErrc::kInvalidArgument,
                        "ssh: host_key_policy pinned needs host_key_fingerprint");
      }
      std::string want = normalize_fingerprint(config_.host_key_fingerprint);
      if (!same_secret(want, fp)) return mismatch(want);
      return {};
    }
    case HostKeyPolicy::kKnownHosts:
    case HostKeyPolicy::kTrustOnFirstUse: break;
  }

  const bool tofu = config_.host_key_policy == HostKeyPolicy::kTrustOnFirstUse;
  const std::string& file = config_.known_hosts_file;
  if (file.empty()) {
    if (!tofu) {
      return ssh_fail(SshErrc::kInvalidArgument,
                      "ssh: host_key_policy known_hosts needs known_hosts_file");
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (tofu_fingerprint_.empty()) {
      tofu_fingerprint_ = fp;
      log::info("ssh " + where + ": trusting host key " + fp + " on first use");
      return {};
    }
    if (!same_secret(tofu_fingerprint_, fp)) return mismatch(tofu_fingerprint_);
    return {};
  }

  KnownHostsPtr kh(libssh2_knownhost_init(session_));
  if (!kh) return ssh_fail(SshErrc::kProtocol, "ssh: libssh2_knownhost_init failed");
  if (::access(file.c_str(), F_OK) == 0) {
    if (libssh2_knownhost_readfile(kh.get(), file.c_str(), LIBSSH2_KNOWNHOST_FILE_OPENSSH) < 0) {
      return ssh_fail(SshErrc::kInvalidArgument,
                      "ssh: cannot parse known_hosts file " + pvs::quoted(file, 256));
    }
  } else if (!tofu) {
    return ssh_fail(SshErrc::kInvalidArgument,
                    "ssh: known_hosts file " + pvs::quoted(file, 256) + " does not exist");
  }
  const int typemask =
      LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | knownhost_key_bit(key_type);
  libssh2_knownhost* found = nullptr;
  int check = libssh2_knownhost_checkp(kh.get(), config_.host.c_str(), config_.port, key, key_len,
                                       typemask, &found);
  switch (check) {
    case LIBSSH2_KNOWNHOST_CHECK_MATCH: return {};
    case LIBSSH2_KNOWNHOST_CHECK_MISMATCH: return mismatch("the key in " + file);
    case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND: break;
    default: return ssh_fail(SshErrc::kProtocol, "ssh: known_hosts check failed");
  }
  if (!tofu) {
    return ssh_fail(SshErrc::kHostKeyUnknown,
                    "ssh " + where + ": host not in " + file + " (server key " + fp + ")");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!tofu_fingerprint_.empty() && !same_secret(tofu_fingerprint_, fp)) {
      return mismatch(tofu_fingerprint_);
    }
    tofu_fingerprint_ = fp;
  }
  std::string host_entry =
      config_.port == 22 ? config_.host : "[" + config_.host + "]:" + std::to_string(config_.port);
  if (libssh2_knownhost_addc(kh.get(), host_entry.c_str(), nullptr, key, key_len, nullptr, 0,
                             typemask, nullptr) != 0 ||
      libssh2_knownhost_writefile(kh.get(), file.c_str(), LIBSSH2_KNOWNHOST_FILE_OPENSSH) != 0) {
    return ssh_fail(SshErrc::kLocalIo, "ssh: cannot record host key in " + pvs::quoted(file, 256));
  }
  log::info("ssh " + where + ": trusting host key " + fp + " on first use (saved to " + file + ")");
  return {};
}

Status SshSession::Impl::authenticate() {
  const std::string where = config_.user + "@" + config_.host + ":" + std::to_string(config_.port);
  std::string key = config_.private_key;
  if (!config_.private_key_file.empty()) {
    if (!key.empty()) {
      return ssh_fail(SshErrc::kInvalidArgument,
                      "ssh: set private_key_file or private_key, not both");
    }
    std::ifstream in(config_.private_key_file, std::ios::binary);
    std::ostringstream buf;
    buf << in.rdbuf();
    if (!in) {
      return ssh_fail(SshErrc::kKeyInvalid, "ssh: cannot read private key file " +
                                                pvs::quoted(config_.private_key_file, 256) + ": " +
                                                strerror(errno));
    }
    key = buf.str();
  }
  if (key.empty()) return ssh_fail(SshErrc::kInvalidArgument, "ssh: no private key configured");
  auto type = ssh_detail::private_key_type(key);
  if (!type) return tl::unexpected<Error>(type.error());
  if (*type == "ssh-rsa" || *type == "ssh-dss") {
    return ssh_fail(SshErrc::kKeyUnsupported,
                    "ssh: the private key is " + *type +
                        "; libssh2 1.10 can sign only with ssh-rsa (SHA-1), which OpenSSH >= 8.8 "
                        "refuses. Use an ed25519 key (ssh-keygen -t ed25519)");
  }
  const char* pass = config_.passphrase.empty() ? nullptr : config_.passphrase.c_str();
  const auto deadline = Clock::now() + config_.connect_timeout;
  int rc;
  while ((rc = libssh2_userauth_publickey_frommemory(session_, config_.user.data(),
                                                     config_.user.size(), nullptr, 0, key.data(),
                                                     key.size(), pass)) == LIBSSH2_ERROR_EAGAIN) {
    if (auto w = wait_socket(deadline); !w) return w;
  }
  // Do not keep the key text around longer than needed.
  std::fill(key.begin(), key.end(), '\0');
  if (rc == 0) return {};
  if (rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED || rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED) {
    return ssh_fail(SshErrc::kAuthFailed,
                    "ssh " + where + ": server refused the " + *type + " key for this user");
  }
  if (rc == LIBSSH2_ERROR_FILE || rc == LIBSSH2_ERROR_KEYFILE_AUTH_FAILED ||
      rc == LIBSSH2_ERROR_METHOD_NOT_SUPPORTED) {
    return ssh_fail(SshErrc::kKeyInvalid,
                    "ssh: cannot use the private key (wrong passphrase or unsupported format)");
  }
  return tl::unexpected<Error>(ssh_detail::session_error(session_, rc, "ssh " + where + ": auth"));
}

void SshSession::Impl::teardown(bool graceful) {
  if (session_ == nullptr) {
    sock_.reset();
    return;
  }
  if (graceful) {
    // One attempt: a clean SSH_MSG_DISCONNECT if the socket takes it right away.
    libssh2_session_disconnect(session_, "closing");
  }
  // From here on every send fails at once, so no libssh2 call below can block or spin.
  if (sock_) ::shutdown(sock_.get(), SHUT_RDWR);
  for (auto& op : active_) op->abandon(*this);
  for (auto& slot : sftp_slots_) {
    for (int i = 0; i < 100 && libssh2_sftp_shutdown(slot.sftp) == LIBSSH2_ERROR_EAGAIN; ++i) {
    }
  }
  sftp_slots_.clear();
  for (auto& [ch, counted] : zombies_) {
    for (int i = 0; i < 100 && libssh2_channel_free(ch) == LIBSSH2_ERROR_EAGAIN; ++i) {
    }
  }
  zombies_.clear();
  spares_.clear();  // freed with the session
  spare_opening_ = false;
  spares_disabled_ = false;
  libssh2_session_free(session_);
  session_ = nullptr;
  free_leftover_allocations();
  sock_.reset();
  opener_ = nullptr;
  channels_open_ = 0;
  stat_channels_open_.store(0);
  connected_.store(false);
}

void SshSession::Impl::free_leftover_allocations() {
  int n = 0;
  while (alloc_list_.next != &alloc_list_) {
    AllocHeader* h = alloc_list_.next;
    unlink_block(h);
    std::free(h);
    ++n;
  }
  live_allocations_.store(0);
  if (n > 0) {
    log::debug("ssh " + config_.host + ": freed " + std::to_string(n) +
               " allocations libssh2 left behind");
  }
}

void SshSession::Impl::fail_all(const Error& error, bool allow_retry) {
  std::vector<std::shared_ptr<Op>> keep;
  for (auto& op : active_) {
    bool may_retry = allow_retry && op->retries < 1;
    if (op->on_session_lost(error, may_retry)) {
      ++op->retries;
      keep.push_back(std::move(op));
    }
  }
  active_ = std::move(keep);
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

    if (fatal_pending_) {
      fatal_pending_ = false;
      log::warn("ssh " + config_.host + ": connection lost: " + fatal_error_.message);
      teardown(false);
      fail_all(fatal_error_, true);
      continue;
    }
    if (session_ != nullptr && !zombies_.empty()) reap_zombies();
    if (session_ != nullptr && config_.spare_channels > 0 && step_spare()) progress = true;

    auto now = Clock::now();
    if (session_ != nullptr && now >= next_keepalive_) {
      int next = 0;
      int rc = libssh2_keepalive_send(session_, &next);
      if (rc == 0) keepalives_.fetch_add(1);
      if (ssh_detail::is_fatal_session_error(rc)) {
        fatal(ssh_detail::session_error(session_, rc, "keepalive"));
        continue;
      }
      next_keepalive_ = now + std::chrono::seconds(std::max(1, next));
    }
    if (progress) continue;

    // Nothing can move: wait for the socket, a new op, or the nearest deadline.
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
        fds[1].events = POLLIN;
        if (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) fds[1].events |= POLLOUT;
      } else if (!idle_data_pending) {
        fds[1].events = POLLIN;  // to notice the server closing an idle connection
      }
    }
    int pn = ::poll(fds, 2, timeout_ms);
    if (pn > 0 && session_ != nullptr && active_.empty() && fds[1].revents != 0) {
      if (peer_closed()) {
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
        idle_data_pending = true;  // libssh2 reads it with the next op
      }
    }
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
    if (!m.impl->connected()) continue;
    ++s.exec_connections;
    s.channels_open += m.impl->stats().channels_open;
  }
  return s;
}

std::future<Result<ExecResult>> SshSession::exec_async(std::string command, ExecOptions options) {
  auto promise = std::make_shared<std::promise<Result<ExecResult>>>();
  auto future = promise->get_future();
  auto remote = ssh_detail::build_remote_command(command, options);
  if (!remote) {
    promise->set_value(tl::unexpected<Error>(remote.error()));
    return future;
  }
  std::shared_ptr<Impl> target = impl_;
  std::shared_ptr<std::atomic<int>> counter = pool_->primary_inflight;
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    const SshConfig& cfg = impl_->config();
    int load = counter->load();
    if (cfg.exec_connections > 1 && load > 0) {
      // The least busy connected member; the primary wins ties.
      for (auto& m : pool_->extras) {
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
      ssh_detail::make_exec_op(std::move(*remote), std::move(options), promise, counter));
  return future;
}

void SshSession::grow_pool_locked() {
  for (const auto& m : pool_->extras) {
    if (m.connecting->load()) return;  // one at a time
  }
  ExecPool::Member* member = nullptr;
  for (auto& m : pool_->extras) {
    if (!m.impl->connected()) {
      member = &m;
      break;
    }
  }
  if (member == nullptr) {
    if (static_cast<int>(pool_->extras.size()) + 1 >= impl_->config().exec_connections) return;
    SshConfig cfg = impl_->config();
    // The extra connection must meet the key the primary accepted (for TOFU: not a new first).
    if (cfg.host_key_policy == HostKeyPolicy::kTrustOnFirstUse) {
      cfg.host_key_fingerprint = impl_->fingerprint();
    }
    ExecPool::Member m;
    m.impl = std::make_shared<Impl>(std::move(cfg));
    pool_->extras.push_back(std::move(m));
    member = &pool_->extras.back();
  }
  member->connecting->store(true);
  member->impl->submit(std::make_shared<BackgroundConnectOp>(
      [flag = member->connecting](bool) { flag->store(false); }));
}

Result<ExecResult> SshSession::exec(std::string command, ExecOptions options) {
  return exec_async(std::move(command), std::move(options)).get();
}

}  // namespace pvs
