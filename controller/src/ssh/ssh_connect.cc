// SshSession::Impl: connection set-up (TCP, handshake, host key, authentication), teardown and
// the libssh2 allocator that counts what a session still holds.
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"
#include "session_impl.h"

namespace pvs {

using ssh_detail::Clock;

namespace {

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

LIBSSH2_RECV_FUNC(counting_recv) {
  ssize_t n = ::recv(socket, buffer, length, flags);
  if (n < 0) return -errno;  // what libssh2's own recv returns
  impl_of(abstract)->bytes_in_ += static_cast<std::uint64_t>(n);
  return n;
}

// Constant-time comparison of two fingerprints.
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
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

// The receive hook that counts what the peer sends. libssh2 1.11.1 deprecates
// libssh2_session_callback_set for the typed libssh2_session_callback_set2, which 1.10 lacks:
// the one place that tells the two versions apart.
void set_recv_callback(LIBSSH2_SESSION* session) {
#if LIBSSH2_VERSION_NUM >= 0x010b01
  libssh2_session_callback_set2(session, LIBSSH2_CALLBACK_RECV,
                                reinterpret_cast<libssh2_cb_generic*>(&counting_recv));
#else
  libssh2_session_callback_set(session, LIBSSH2_CALLBACK_RECV,
                               reinterpret_cast<void*>(&counting_recv));
#endif
}

// The cipher preference in both directions (ssh_detail::cipher_preference).
void prefer_ciphers(LIBSSH2_SESSION* session, std::string_view prefer) {
  for (int which : {LIBSSH2_METHOD_CRYPT_CS, LIBSSH2_METHOD_CRYPT_SC}) {
    const char** algs = nullptr;
    int n = libssh2_session_supported_algs(session, which, &algs);
    if (n <= 0 || algs == nullptr) continue;  // the library's default order stays
    std::vector<std::string> supported(algs, algs + n);
    libssh2_free(session, static_cast<void*>(algs));
    const std::string pref = ssh_detail::cipher_preference(supported, prefer);
    if (!pref.empty()) libssh2_session_method_pref(session, which, pref.c_str());
  }
}

}  // namespace

std::string ssh_detail::normalize_fingerprint(std::string_view fp) {
  if (fp.size() > 7 && (fp.substr(0, 7) == "SHA256:" || fp.substr(0, 7) == "sha256:")) {
    fp.remove_prefix(7);
  }
  while (!fp.empty() && fp.back() == '=') fp.remove_suffix(1);
  return "SHA256:" + std::string(fp);
}

// ---------------------------------------------------------------------------------------------
// Connection set-up.

Status SshSession::Impl::wait_socket(Clock::time_point deadline, const char* stage) {
  int dirs = libssh2_session_block_directions(session_);
  short events = 0;
  if (dirs & LIBSSH2_SESSION_BLOCK_INBOUND) events |= POLLIN;
  if (dirs & LIBSSH2_SESSION_BLOCK_OUTBOUND) events |= POLLOUT;
  if (events == 0) events = POLLIN;
  pollfd fds[2] = {{sock_.get(), events, 0}, {wake_fd_.get(), POLLIN, 0}};
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) {
    return ssh_fail(SshErrc::kConnectTimeout,
                    "ssh " + config_.host + ":" + std::to_string(config_.port) +
                        ": no answer within connect_timeout (" + stage + ")");
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

  if (auto st = open_socket(where, deadline); !st) return st;
  live_allocations_.store(0);
  session_ = libssh2_session_init_ex(counting_alloc, counting_free, counting_realloc, this);
  if (session_ == nullptr) {
    sock_.reset();
    free_leftover_allocations();
    return ssh_fail(SshErrc::kProtocol, "ssh: libssh2_session_init failed");
  }
  libssh2_session_set_blocking(session_, 0);
  set_recv_callback(session_);
  if (!config_.host_key_algorithms.empty()) {
    libssh2_session_method_pref(session_, LIBSSH2_METHOD_HOSTKEY,
                                config_.host_key_algorithms.c_str());
  }
  prefer_ciphers(session_, config_.prefer_ciphers);
  auto fail_teardown = [this](Error e) -> Status {
    teardown(false);
    return tl::unexpected<Error>(std::move(e));
  };

  int rc;
  while ((rc = libssh2_session_handshake(session_, sock_.get())) == LIBSSH2_ERROR_EAGAIN) {
    if (auto w = wait_socket(deadline, "handshake"); !w) return fail_teardown(w.error());
  }
  if (rc != 0) {
    Error e = ssh_detail::session_error(session_, rc, "ssh " + where + ": handshake");
    ssh_detail::retag(e, SshErrc::kHandshake);
    if (rc == LIBSSH2_ERROR_KEX_FAILURE) {
      e.message += " (the server must offer an ssh-ed25519 host key)";
    }
    return fail_teardown(std::move(e));
  }
  {
    // The key a bulk client may pin (BulkClients) is one the policy accepted, or none.
    auto st = verify_host_key();
    std::size_t key_len = 0;
    int key_type = 0;
    const char* key = st ? libssh2_session_hostkey(session_, &key_len, &key_type) : nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    host_key_ = key != nullptr ? std::string(key, key_len) : std::string();
    ++key_from_;
    accepted_fingerprint_ = key != nullptr ? fingerprint_ : std::string();
    if (!st) return fail_teardown(st.error());
  }
  if (auto st = authenticate(); !st) return fail_teardown(st.error());

  start_session_timers();
  return {};
}

// TCP to host:port within the deadline, with keepalives and a user timeout for a dead peer.
Status SshSession::Impl::open_socket(const std::string& where, Clock::time_point deadline) {
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

  return {};
}

// After a successful handshake: keepalives, the negotiated methods, the channel accounting.
void SshSession::Impl::start_session_timers() {
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
    const std::string cipher = method(LIBSSH2_METHOD_CRYPT_CS);
    // chacha20-poly1305 authenticates by itself: libssh2 still names the MAC it negotiated
    // beside it, and does not use it.
    const std::string mac = cipher.starts_with("chacha20-poly1305") ? std::string("<implicit>")
                                                                    : method(LIBSSH2_METHOD_MAC_CS);
    std::string methods = "kex=" + method(LIBSSH2_METHOD_KEX) +
                          " hostkey=" + method(LIBSSH2_METHOD_HOSTKEY) + " cipher=" + cipher +
                          " mac=" + mac;
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
      std::string want = ssh_detail::normalize_fingerprint(config_.host_key_fingerprint);
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
    if (auto w = wait_socket(deadline, "authentication"); !w) return w;
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
    if (slot.sftp != nullptr) sftp_zombies_.push_back(slot.sftp);
  }
  for (LIBSSH2_SFTP* sftp : sftp_zombies_) {
    for (int i = 0; i < 100 && libssh2_sftp_shutdown(sftp) == LIBSSH2_ERROR_EAGAIN; ++i) {
    }
  }
  sftp_slots_.clear();
  sftp_zombies_.clear();
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
  watchdog_.reset();  // its process sees EOF and keeps guarding what it was told
  watch_queue_.clear();
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

}  // namespace pvs
