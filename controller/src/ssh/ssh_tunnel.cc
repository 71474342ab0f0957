// The tunnel operation: one direct-tcpip channel (the state machine of channel_op.h), driven
// non-blockingly by the session's I/O thread, and its caller-side handle (TcpTunnel).
//
// Opening is the channel open itself (sshd connects to host:port before it answers); running:
// queued bytes out, then EOF once shutdown_write() asked for it; bytes in while the reader's
// queue has room. The channel closes on close(), or once the service's EOF came and ours went.
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>

#include "channel_op.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/ssh_tunnel.h"

namespace pvs {

class TcpTunnel::Shared {
 public:
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::string out;                   // GUARDED_BY(mu): bytes for the service, not yet sent
  std::string in;                    // GUARDED_BY(mu): bytes from the service, not yet read
  std::size_t in_pos = 0;            // GUARDED_BY(mu): read up to here
  bool write_shut = false;           // GUARDED_BY(mu): shutdown_write() was called
  bool close_requested = false;      // GUARDED_BY(mu)
  bool peer_eof = false;             // GUARDED_BY(mu): the service closed its side
  bool ended = false;                // GUARDED_BY(mu): the channel is gone
  std::optional<Error> error;        // GUARDED_BY(mu): the channel or connection failed
  std::optional<Error> write_error;  // GUARDED_BY(mu): the service no longer takes bytes
  std::uint64_t sent = 0;            // GUARDED_BY(mu)
  std::uint64_t received = 0;        // GUARDED_BY(mu)
  std::size_t max_buffered = 256 << 10;

  std::size_t unread() const { return in.size() - in_pos; }  // REQUIRES: mu held
};

namespace ssh_detail {
namespace {

using Step = ChannelOp::Step;

constexpr std::size_t kTunnelReadChunk = 32 * 1024;
constexpr std::size_t kTunnelWriteChunk = 32 * 1024;
constexpr int kTunnelReadsPerStep = 8;
constexpr auto kTunnelCloseGrace = std::chrono::seconds(5);

class TunnelOp : public ChannelOp {
 public:
  TunnelOp(TunnelOptions options, std::shared_ptr<TcpTunnel::Shared> shared,
           std::shared_ptr<std::promise<Status>> opened)
      : ChannelOp({.what = "ssh tunnel",
                   .window = LIBSSH2_CHANNEL_WINDOW_DEFAULT,
                   .spare = false,
                   .open_hint = ""}),
        options_(std::move(options)),
        shared_(std::move(shared)),
        opened_(std::move(opened)),
        slot_deadline_(Clock::now() + options_.open_timeout) {}

  // While the reader's queue is full and nothing is to be sent, data for this channel stays
  // in libssh2 and the socket: at most the channel's window, which libssh2 1.10 only extends
  // for bytes read (channel.c: remote.window_size -= bytes_read), so the service is held back.
  bool wants_input() const override {
    if (state_ != State::kRunning) return true;
    std::lock_guard lock(shared_->mu);
    return shared_->close_requested || !shared_->out.empty() ||
           (shared_->write_shut && !eof_sent_) ||
           (!shared_->peer_eof && shared_->unread() < shared_->max_buffered);
  }

  Clock::time_point deadline() const override {
    if (state_ == State::kWaitSlot) return slot_deadline_;
    if (state_ == State::kClosing || state_ == State::kWaitClosed) return grace_deadline_;
    return Clock::time_point::max();
  }

 private:
  std::string where() const {
    return options_.host + ":" + std::to_string(options_.port) + " in the sandbox";
  }

  LIBSSH2_CHANNEL* open_channel(SshSession::Impl& io) override {
    // The originator is informational (sshd logs it); the controller is not a TCP peer here.
    return libssh2_channel_direct_tcpip_ex(io.session(), options_.host.c_str(), options_.port,
                                           "127.0.0.1", 0);
  }

  std::optional<Step> before_slot(SshSession::Impl&, Clock::time_point now) override {
    {
      std::lock_guard lock(shared_->mu);
      if (shared_->close_requested)
        return fail_open(ssh_fail(SshErrc::kClosed, "ssh tunnel: closed before it opened").value());
    }
    if (now >= slot_deadline_) {
      return fail_open(
          ssh_fail(SshErrc::kTimeout, "ssh tunnel: no free channel on this connection within " +
                                          std::to_string(options_.open_timeout.count()) +
                                          " ms (SshConfig::max_channels)")
              .value());
    }
    return std::nullopt;
  }

  Step open_failed(Error e) override {
    // libssh2 1.10 names the server's reason in its message.
    if (e.message.find("connect failed") != std::string::npos) {
      retag(e, SshErrc::kConnectRefused);
      e.message = "ssh tunnel: nothing accepts connections at " + where();
    } else if (e.message.find("prohibited") != std::string::npos) {
      retag(e, SshErrc::kChannelRefused);
      e.message = "ssh tunnel: the sandbox's sshd refuses TCP forwarding to " + where() +
                  " (AllowTcpForwarding local, PermitOpen 127.0.0.1:*)";
    }
    return fail_open(std::move(e));
  }

  // Nothing to request: the open was the connect.
  Step start(SshSession::Impl&) override {
    opened_->set_value({});
    opened_sent_ = true;
    state_ = State::kRunning;
    return Step::kProgress;
  }

  Step run(SshSession::Impl& io, Clock::time_point now) override {
    std::string chunk;
    bool shut = false;
    bool close = false;
    bool peer_eof = false;
    std::size_t space = 0;
    {
      std::lock_guard lock(shared_->mu);
      chunk = shared_->out.substr(0, kTunnelWriteChunk);
      shut = shared_->write_shut;
      close = shared_->close_requested;
      peer_eof = shared_->peer_eof;
      std::size_t unread = shared_->unread();
      space = unread < shared_->max_buffered ? shared_->max_buffered - unread : 0;
    }
    if (close) {
      begin_close(now + kTunnelCloseGrace);
      return Step::kProgress;
    }
    bool progress = false;
    if (!chunk.empty()) {
      auto w = send(io, chunk);
      if (!w) return Step::kIdle;  // fatal: reported
      progress = *w;
    } else if (shut && !eof_sent_) {
      int rc = libssh2_channel_send_eof(channel_);
      if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
      if (rc != 0 && is_fatal_session_error(rc)) return fail_session(io, rc, "send eof");
      eof_sent_ = true;  // a channel the service already closed takes no EOF: nothing to send
      progress = true;
    }
    if (!peer_eof) {
      if (drain(io, space)) progress = true;
      if (fatal_) return Step::kIdle;
      if (libssh2_channel_eof(channel_) != 0) {
        set_peer_eof();
        progress = true;
        peer_eof = true;
      }
    }
    if (peer_eof && eof_sent_) {
      begin_close(now + kTunnelCloseGrace);
      return Step::kProgress;
    }
    return progress ? Step::kProgress : Step::kIdle;
  }

  // Writes what libssh2 takes of `chunk`: true if it took any, nullopt on a fatal error.
  std::optional<bool> send(SshSession::Impl& io, const std::string& chunk) {
    ssize_t w = libssh2_channel_write(channel_, chunk.data(), chunk.size());
    if (w == LIBSSH2_ERROR_EAGAIN || w == 0) return false;
    if (w < 0 && is_fatal_session_error(static_cast<int>(w))) {
      fail_session(io, static_cast<int>(w), "write");
      return std::nullopt;
    }
    {
      std::lock_guard lock(shared_->mu);
      if (w > 0) {
        shared_->out.erase(0, static_cast<std::size_t>(w));
        shared_->sent += static_cast<std::uint64_t>(w);
      } else {
        // The service closed its side: what waits is dropped, the writer is told.
        shared_->out.clear();
        shared_->write_error =
            ssh_fail(SshErrc::kDisconnected,
                     "ssh tunnel: the service at " + where() + " no longer takes bytes")
                .value();
        eof_sent_ = true;
      }
    }
    shared_->cv.notify_all();
    return true;
  }

  // Reads up to `space` bytes of what is there; true if any.
  bool drain(SshSession::Impl& io, std::size_t space) {
    bool any = false;
    char buf[kTunnelReadChunk];
    for (int i = 0; i < kTunnelReadsPerStep && space > 0; ++i) {
      ssize_t r = libssh2_channel_read_ex(channel_, 0, buf, std::min(space, sizeof buf));
      if (r > 0) {
        auto n = static_cast<std::size_t>(r);
        {
          std::lock_guard lock(shared_->mu);
          if (shared_->in_pos > 0 && shared_->in_pos == shared_->in.size()) {
            shared_->in.clear();
            shared_->in_pos = 0;
          }
          shared_->in.append(buf, n);
          shared_->received += n;
        }
        shared_->cv.notify_all();
        space -= n;
        any = true;
        continue;
      }
      if (r < 0 && r != LIBSSH2_ERROR_EAGAIN && is_fatal_session_error(static_cast<int>(r))) {
        fail_session(io, static_cast<int>(r), "read");
        fatal_ = true;
      }
      break;
    }
    return any;
  }

  void set_peer_eof() {
    {
      std::lock_guard lock(shared_->mu);
      shared_->peer_eof = true;
    }
    shared_->cv.notify_all();
  }

  Step freed(SshSession::Impl&) override { return finish(std::nullopt); }

  Step abandoned() override {
    log::warn("ssh tunnel: channel to " + where() + " did not close; abandoning it");
    return finish(std::nullopt);
  }

  void lost(const Error& error) override {
    if (!opened_sent_) {
      fail_open(error);
      return;
    }
    finish(error);
  }

  Step fail_open(Error e) {
    state_ = State::kDone;
    opened_sent_ = true;
    {
      std::lock_guard lock(shared_->mu);
      shared_->ended = true;
    }
    opened_->set_value(tl::unexpected<Error>(std::move(e)));
    return Step::kDone;
  }

  Step finish(std::optional<Error> error) {
    if (state_ == State::kDone) return Step::kDone;
    state_ = State::kDone;
    {
      std::lock_guard lock(shared_->mu);
      shared_->ended = true;
      if (error && !shared_->peer_eof && !shared_->close_requested) shared_->error = *error;
      shared_->out.clear();
    }
    shared_->cv.notify_all();
    return Step::kDone;
  }

  TunnelOptions options_;
  std::shared_ptr<TcpTunnel::Shared> shared_;
  std::shared_ptr<std::promise<Status>> opened_;
  Clock::time_point slot_deadline_;
  bool opened_sent_ = false;
  bool eof_sent_ = false;
  bool fatal_ = false;
};

}  // namespace

std::shared_ptr<SshSession::Impl::Op> make_tunnel_op(TunnelOptions options,
                                                     std::shared_ptr<TcpTunnel::Shared> shared,
                                                     std::shared_ptr<std::promise<Status>> opened) {
  return std::make_shared<TunnelOp>(std::move(options), std::move(shared), std::move(opened));
}

}  // namespace ssh_detail

// ---- the handle ----------------------------------------------------------------------------

TcpTunnel::TcpTunnel(std::shared_ptr<Shared> shared, std::function<void()> wake)
    : shared_(std::move(shared)), wake_(std::move(wake)) {}

TcpTunnel::~TcpTunnel() {
  close();
}

Status TcpTunnel::write(std::string_view bytes, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!bytes.empty()) {
    {
      std::unique_lock lock(shared_->mu);
      bool ready = shared_->cv.wait_until(lock, deadline, [&] {
        return shared_->out.size() < shared_->max_buffered || shared_->error ||
               shared_->write_error || shared_->ended || shared_->close_requested ||
               shared_->write_shut;
      });
      if (shared_->error) return tl::unexpected<Error>(*shared_->error);
      if (shared_->write_error) return tl::unexpected<Error>(*shared_->write_error);
      if (shared_->ended || shared_->close_requested || shared_->write_shut)
        return ssh_fail(SshErrc::kClosed, "ssh tunnel: closed for writing");
      if (!ready) return ssh_fail(SshErrc::kTimeout, "ssh tunnel: the service does not read");
      std::size_t take = std::min(bytes.size(), shared_->max_buffered - shared_->out.size());
      shared_->out.append(bytes.substr(0, take));
      bytes.remove_prefix(take);
    }
    wake_();
  }
  return {};
}

void TcpTunnel::shutdown_write() {
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->write_shut || shared_->ended) return;
    shared_->write_shut = true;
  }
  wake_();
}

Result<std::size_t> TcpTunnel::read(char* buf, std::size_t n, std::chrono::milliseconds timeout) {
  std::size_t got = 0;
  {
    std::unique_lock lock(shared_->mu);
    shared_->cv.wait_for(lock, timeout, [&] {
      return shared_->unread() > 0 || shared_->peer_eof || shared_->ended || shared_->error ||
             shared_->close_requested;
    });
    if (shared_->unread() > 0 && !shared_->close_requested) {
      got = std::min(n, shared_->unread());
      std::memcpy(buf, shared_->in.data() + shared_->in_pos, got);
      shared_->in_pos += got;
      if (shared_->in_pos == shared_->in.size()) {
        shared_->in.clear();
        shared_->in_pos = 0;
      }
    } else if (shared_->error) {
      return tl::unexpected<Error>(*shared_->error);
    } else if (shared_->close_requested) {
      return ssh_fail(SshErrc::kClosed, "ssh tunnel: closed");
    } else if (shared_->peer_eof || shared_->ended) {
      return 0;
    } else {
      return ssh_fail(SshErrc::kTimeout, "ssh tunnel: the service sent nothing within " +
                                             std::to_string(timeout.count()) + " ms");
    }
  }
  wake_();  // room again: the I/O thread may read on
  return got;
}

void TcpTunnel::close() {
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->ended || shared_->close_requested) return;
    shared_->close_requested = true;
  }
  shared_->cv.notify_all();
  wake_();
}

std::uint64_t TcpTunnel::bytes_sent() const {
  std::lock_guard lock(shared_->mu);
  return shared_->sent;
}

std::uint64_t TcpTunnel::bytes_received() const {
  std::lock_guard lock(shared_->mu);
  return shared_->received;
}

Result<std::unique_ptr<TcpTunnel>> SshSession::open_tunnel(TunnelOptions options) {
  if (options.port == 0 || options.host.empty() || options.host.find('\0') != std::string::npos ||
      options.max_buffered == 0) {
    return ssh_fail(SshErrc::kInvalidArgument,
                    "ssh tunnel: a host, a port 1..65535 and max_buffered > 0 are needed");
  }
  auto shared = std::make_shared<TcpTunnel::Shared>();
  shared->max_buffered = options.max_buffered;
  auto opened = std::make_shared<std::promise<Status>>();
  auto future = opened->get_future();
  impl_->submit(ssh_detail::make_tunnel_op(std::move(options), shared, opened));
  Status st = future.get();
  if (!st) return tl::unexpected<Error>(st.error());
  std::weak_ptr<Impl> weak = impl_;
  return std::make_unique<TcpTunnel>(std::move(shared), [weak] {
    if (auto impl = weak.lock()) impl->notify();
  });
}

}  // namespace pvs
