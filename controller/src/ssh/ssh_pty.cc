// The PTY operation: one session channel with a pseudo-terminal, driven non-blockingly by the
// session's I/O thread.
//
// States: wait for a channel slot -> open -> pty request -> exec -> running (queued writes out,
// window changes, output in until EOF or a hang-up) -> close -> wait closed (exit status) ->
// free -> on_exit. The caller of open_pty waits until the exec request was answered.
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>

#include "pvesandbox/common/log.h"
#include "pvesandbox/ssh_pty.h"
#include "session_impl.h"

namespace pvs {

struct PtyChannel::Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::string pending;                      // GUARDED_BY(mu): bytes to write
  std::optional<std::pair<int, int>> size;  // GUARDED_BY(mu): rows, cols to announce
  bool close_requested = false;             // GUARDED_BY(mu)
  bool ended = false;                       // GUARDED_BY(mu): on_exit has run
  std::weak_ptr<SshSession::Impl> io;

  void poke() {
    if (auto p = io.lock()) p->poke();
  }
};

namespace ssh_detail {
namespace {

using Op = SshSession::Impl::Op;
using Step = Op::Step;

constexpr std::size_t kReadChunk = 32 * 1024;
constexpr int kMaxReadsPerStep = 16;

class PtyOp : public Op {
 public:
  PtyOp(std::string command, PtyOptions options, PtyCallbacks callbacks,
        std::shared_ptr<PtyChannel::Shared> shared, std::shared_ptr<std::promise<Status>> started)
      : command_(std::move(command)),
        options_(std::move(options)),
        cb_(std::move(callbacks)),
        shared_(std::move(shared)),
        started_(std::move(started)) {}

  Clock::time_point deadline() const override {
    return state_ == State::kClosing || state_ == State::kWaitClosed ? close_deadline_
                                                                     : Clock::time_point::max();
  }

  Step step(SshSession::Impl& io) override {
    switch (state_) {
      case State::kWaitSlot: {
        if (close_requested()) return deliver_start_error(ErrorCode::kConflict, "closed");
        if (LIBSSH2_CHANNEL* spare = io.take_spare()) {
          channel_ = spare;
          reserved_ = true;
          state_ = State::kPty;
          return step(io);
        }
        if (!io.try_take_opener(this)) return Step::kIdle;
        if (!io.try_reserve_channel()) {
          io.release_opener(this);
          return Step::kIdle;
        }
        reserved_ = true;
        state_ = State::kOpening;
        [[fallthrough]];
      }
      case State::kOpening: {
        channel_ =
            libssh2_channel_open_ex(io.session(), "session", 7, LIBSSH2_CHANNEL_WINDOW_DEFAULT,
                                    LIBSSH2_CHANNEL_PACKET_DEFAULT, nullptr, 0);
        if (channel_ == nullptr) {
          int rc = libssh2_session_last_errno(io.session());
          if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
          io.release_opener(this);
          release_slot(io);
          return start_failed(io, rc, "ssh pty: open channel");
        }
        io.release_opener(this);
        state_ = State::kPty;
        [[fallthrough]];
      }
      case State::kPty: {
        sent_ = true;
        int rc = libssh2_channel_request_pty_ex(channel_, options_.term.data(),
                                                static_cast<unsigned>(options_.term.size()),
                                                nullptr, 0, options_.cols, options_.rows, 0, 0);
        if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
        if (rc != 0) return start_failed(io, rc, "ssh pty: pty request");
        state_ = State::kStarting;
        [[fallthrough]];
      }
      case State::kStarting: {
        int rc = libssh2_channel_process_startup(channel_, "exec", 4, command_.data(),
                                                 static_cast<unsigned>(command_.size()));
        if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
        if (rc != 0) return start_failed(io, rc, "ssh pty: exec request");
        state_ = State::kRunning;
        started_->set_value({});
        return Step::kProgress;
      }
      case State::kRunning: return run(io);
      case State::kClosing: {
        int rc = libssh2_channel_close(channel_);
        if (rc == LIBSSH2_ERROR_EAGAIN) return check_grace(io);
        if (is_fatal_session_error(rc)) return fatal(io, rc, "ssh pty: close");
        state_ = State::kWaitClosed;
        [[fallthrough]];
      }
      case State::kWaitClosed: {
        int rc = libssh2_channel_wait_closed(channel_);
        if (rc == LIBSSH2_ERROR_EAGAIN) return check_grace(io);
        if (is_fatal_session_error(rc)) return fatal(io, rc, "ssh pty: wait closed");
        exit_.exit_code = libssh2_channel_get_exit_status(channel_);
        char* sig = nullptr;
        std::size_t sig_len = 0;
        libssh2_channel_get_exit_signal(channel_, &sig, &sig_len, nullptr, nullptr, nullptr,
                                        nullptr);
        if (sig != nullptr) {
          exit_.exit_signal.assign(sig, sig_len);
          exit_.exit_code = -1;
          libssh2_free(io.session(), sig);
        }
        state_ = State::kFreeing;
        [[fallthrough]];
      }
      case State::kFreeing: {
        int rc = libssh2_channel_free(channel_);
        if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
        channel_ = nullptr;
        release_slot(io);
        return finish();
      }
      case State::kDone: return Step::kDone;
    }
    return Step::kIdle;
  }

  void abandon(SshSession::Impl&) override {
    channel_ = nullptr;
    reserved_ = false;
  }

  bool on_session_lost(const Error& error, bool may_retry) override {
    if (state_ == State::kDone) return false;
    channel_ = nullptr;
    reserved_ = false;
    if (!running() && !sent_ && may_retry) {
      state_ = State::kWaitSlot;
      return true;
    }
    if (!running()) {
      state_ = State::kDone;
      started_->set_value(tl::unexpected<Error>(error));
      mark_ended();
      return false;
    }
    exit_.exit_code = -1;
    exit_.error = error;
    finish();
    return false;
  }

 private:
  enum class State {
    kWaitSlot,
    kOpening,
    kPty,
    kStarting,
    kRunning,
    kClosing,
    kWaitClosed,
    kFreeing,
    kDone
  };

  bool running() const { return state_ >= State::kRunning; }

  bool close_requested() {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->close_requested;
  }

  void release_slot(SshSession::Impl& io) {
    if (!reserved_) return;
    reserved_ = false;
    io.release_channel();
  }

  Step fatal(SshSession::Impl& io, int rc, std::string_view what) {
    io.fatal(session_error(io.session(), rc, what));
    return Step::kIdle;
  }

  // Before the command runs: the caller of open_pty gets the error.
  Step start_failed(SshSession::Impl& io, int rc, std::string_view what) {
    if (is_fatal_session_error(rc)) return fatal(io, rc, what);
    Error e = session_error(io.session(), rc, what);
    if (channel_ != nullptr) {
      io.adopt_zombie(channel_, reserved_);
      channel_ = nullptr;
      reserved_ = false;
    }
    state_ = State::kDone;
    started_->set_value(tl::unexpected<Error>(std::move(e)));
    mark_ended();
    return Step::kDone;
  }

  Step deliver_start_error(ErrorCode code, std::string message) {
    state_ = State::kDone;
    started_->set_value(fail(code, "ssh pty: " + message));
    mark_ended();
    return Step::kDone;
  }

  Step run(SshSession::Impl& io) {
    bool progress = false;
    bool hang_up = false;
    std::optional<std::pair<int, int>> size;
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      out_ += shared_->pending;
      shared_->pending.clear();
      size = shared_->size;
      shared_->size.reset();
      hang_up = shared_->close_requested;
    }
    if (size) pending_size_ = size;
    if (hang_up) {
      close_deadline_ = Clock::now() + io.config().kill_grace;
      state_ = State::kClosing;
      return Step::kProgress;
    }
    while (out_off_ < out_.size()) {
      ssize_t w = libssh2_channel_write(channel_, out_.data() + out_off_, out_.size() - out_off_);
      if (w == LIBSSH2_ERROR_EAGAIN) break;
      if (w < 0) {
        if (is_fatal_session_error(static_cast<int>(w))) {
          return fatal(io, static_cast<int>(w), "ssh pty: write");
        }
        out_off_ = out_.size();  // the channel is closing: drop the rest
        break;
      }
      out_off_ += static_cast<std::size_t>(w);
      progress = true;
    }
    if (out_off_ == out_.size()) {
      out_.clear();
      out_off_ = 0;
    }
    if (pending_size_) {
      int rc = libssh2_channel_request_pty_size_ex(channel_, pending_size_->second,
                                                   pending_size_->first, 0, 0);
      if (rc != LIBSSH2_ERROR_EAGAIN) {
        if (is_fatal_session_error(rc)) return fatal(io, rc, "ssh pty: window change");
        pending_size_.reset();
        progress = true;
      }
    }
    char buf[kReadChunk];
    for (int stream = 0; stream < 2; ++stream) {
      for (int i = 0; i < kMaxReadsPerStep; ++i) {
        ssize_t r = libssh2_channel_read_ex(channel_, stream, buf, sizeof buf);
        if (r > 0) {
          notify(std::string_view(buf, static_cast<std::size_t>(r)));
          progress = true;
          continue;
        }
        if (r == 0 || r == LIBSSH2_ERROR_EAGAIN) break;
        if (is_fatal_session_error(static_cast<int>(r))) {
          return fatal(io, static_cast<int>(r), "ssh pty: read");
        }
        break;
      }
    }
    if (libssh2_channel_eof(channel_) != 0) {
      close_deadline_ = Clock::now() + io.config().kill_grace;
      state_ = State::kClosing;
      return Step::kProgress;
    }
    return progress ? Step::kProgress : Step::kIdle;
  }

  Step check_grace(SshSession::Impl& io) {
    if (Clock::now() < close_deadline_) return Step::kIdle;
    log::warn("ssh pty: channel did not close within kill_grace; abandoning it");
    io.adopt_zombie(channel_, reserved_);
    channel_ = nullptr;
    reserved_ = false;
    return finish();
  }

  void notify(std::string_view data) {
    if (!cb_.on_output) return;
    try {
      cb_.on_output(data);
    } catch (...) {
      log::warn("ssh pty: on_output callback threw; no further output is delivered to it");
      cb_.on_output = nullptr;
    }
  }

  Step finish() {
    if (state_ == State::kDone) return Step::kDone;
    state_ = State::kDone;
    if (cb_.on_exit) {
      try {
        cb_.on_exit(exit_);
      } catch (...) {
        log::warn("ssh pty: on_exit callback threw");
      }
    }
    mark_ended();
    return Step::kDone;
  }

  void mark_ended() {
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      shared_->ended = true;
      shared_->pending.clear();
    }
    shared_->cv.notify_all();
  }

  std::string command_;
  PtyOptions options_;
  PtyCallbacks cb_;
  std::shared_ptr<PtyChannel::Shared> shared_;
  std::shared_ptr<std::promise<Status>> started_;
  State state_ = State::kWaitSlot;
  LIBSSH2_CHANNEL* channel_ = nullptr;
  bool reserved_ = false;
  bool sent_ = false;  // a request went out on this channel: never retried elsewhere
  std::string out_;
  std::size_t out_off_ = 0;
  std::optional<std::pair<int, int>> pending_size_;
  PtyExit exit_;
  Clock::time_point close_deadline_ = Clock::time_point::max();
};

bool valid_size(int rows, int cols) {
  return rows >= 1 && rows <= 1000 && cols >= 1 && cols <= 1000;
}

}  // namespace
}  // namespace ssh_detail

PtyChannel::PtyChannel(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

// Hangs up without waiting: the last owner may be a callback on the I/O thread itself.
PtyChannel::~PtyChannel() {
  close(std::chrono::milliseconds(0));
}

Status PtyChannel::write(std::string_view bytes) {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->ended || shared_->close_requested) {
      return fail(ErrorCode::kConflict, "pty: the channel has ended");
    }
    shared_->pending.append(bytes);
  }
  shared_->poke();
  return {};
}

Status PtyChannel::resize(int rows, int cols) {
  if (!ssh_detail::valid_size(rows, cols)) {
    return fail(ErrorCode::kInvalidArgument, "pty: rows and cols must be within 1..1000");
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->ended || shared_->close_requested) {
      return fail(ErrorCode::kConflict, "pty: the channel has ended");
    }
    shared_->size = std::make_pair(rows, cols);
  }
  shared_->poke();
  return {};
}

void PtyChannel::close(std::chrono::milliseconds grace) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  if (!shared_->close_requested) {
    shared_->close_requested = true;
    lock.unlock();
    shared_->poke();
    lock.lock();
  }
  shared_->cv.wait_for(lock, grace, [&] { return shared_->ended; });
}

bool PtyChannel::ended() const {
  std::lock_guard<std::mutex> lock(shared_->mu);
  return shared_->ended;
}

Result<std::unique_ptr<PtyChannel>> SshSession::open_pty(const PtyOptions& options,
                                                         PtyCallbacks callbacks) {
  if (!ssh_detail::valid_size(options.rows, options.cols)) {
    return fail(ErrorCode::kInvalidArgument, "pty: rows and cols must be within 1..1000");
  }
  if (options.term.empty() || options.term.find('\0') != std::string::npos) {
    return fail(ErrorCode::kInvalidArgument, "pty: invalid TERM");
  }
  ExecOptions eo;
  eo.env = options.env;
  eo.cwd = options.cwd;
  std::string command =
      options.command.empty() ? std::string("exec \"${SHELL:-/bin/sh}\" -l") : options.command;
  auto remote = ssh_detail::build_remote_command(command, eo);
  if (!remote) return fail(remote.error());

  auto shared = std::make_shared<PtyChannel::Shared>();
  shared->io = impl_;
  auto started = std::make_shared<std::promise<Status>>();
  auto future = started->get_future();
  impl_->submit(std::make_shared<ssh_detail::PtyOp>(std::move(*remote), options,
                                                    std::move(callbacks), shared, started));
  const auto bound = impl_->config().connect_timeout * 2 + std::chrono::seconds(30);
  if (future.wait_for(bound) != std::future_status::ready) {
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->close_requested = true;  // the op hangs up once it gets that far
    }
    shared->poke();
    return fail(ErrorCode::kTimeout, "pty: the channel did not start in time");
  }
  Status st = future.get();
  if (!st) return fail(st.error());
  return std::make_unique<PtyChannel>(std::move(shared));
}

}  // namespace pvs
