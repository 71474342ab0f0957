// The exec operation: one channel, driven non-blockingly by the session's I/O thread.
//
// States: wait for a channel slot -> open (session-wide single flight) -> exec request ->
// running (stdin out, stdout+stderr drained together until EOF) -> close -> wait closed (exit
// status arrives by then) -> free. On timeout the command's process group is killed through a
// second channel and the channel is drained for kill_grace; after that it is abandoned to the
// zombie list and the partial result returned.
#include <cstring>

#include "pvesandbox/common/log.h"
#include "session_impl.h"

namespace pvs::ssh_detail {
namespace {

using Op = SshSession::Impl::Op;
using Step = Op::Step;

constexpr std::string_view kMarkerStart = "\036pvs:";
constexpr std::size_t kMarkerWindow = 4096;  // the marker must appear within this prefix
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kMaxReadsPerStep = 16;  // fairness between channels

class ExecOp : public Op {
 public:
  ExecOp(std::string command, ExecOptions options,
         std::shared_ptr<std::promise<Result<ExecResult>>> promise, bool internal)
      : command_(std::move(command)),
        options_(std::move(options)),
        promise_(std::move(promise)),
        internal_(internal),
        out_(options_.max_output),
        err_(options_.max_output),
        want_marker_(!internal && options_.timeout.count() > 0) {
    start_ = Clock::now();
    if (options_.timeout.count() > 0) deadline_ = start_ + options_.timeout;
  }

  ~ExecOp() override { count_done(); }

  void set_inflight_counter(std::shared_ptr<std::atomic<int>> c) { inflight_ = std::move(c); }

  Clock::time_point deadline() const override {
    if (state_ == State::kDone) return Clock::time_point::max();
    if (refused_) return std::min(retry_at_, deadline_);
    return timed_out_ ? kill_deadline_ : deadline_;
  }

  Step step(SshSession::Impl& io) override {
    auto now = Clock::now();
    switch (state_) {
      case State::kWaitSlot: {
        if (now >= deadline_) {
          timed_out_ = true;
          return finish();
        }
        // After a refusal: wait for a channel to close, or 20 ms.
        if (refused_ && io.release_epoch() == refused_epoch_ && now < retry_at_) {
          return Step::kIdle;
        }
        refused_ = false;
        if (!internal_) {
          if (LIBSSH2_CHANNEL* spare = io.take_spare()) {
            channel_ = spare;
            reserved_ = true;
            state_ = State::kStarting;
            return step(io);
          }
        }
        if (!io.try_take_opener(this)) return Step::kIdle;
        if (!internal_ && !io.try_reserve_channel()) {
          io.release_opener(this);
          return Step::kIdle;
        }
        if (internal_) {
          // The kill must not wait behind the commands it is meant to stop.
          force_reserved_ = !io.try_reserve_channel();
        }
        reserved_ = true;
        state_ = State::kOpening;
        [[fallthrough]];
      }
      case State::kOpening: {
        channel_ =
            libssh2_channel_open_ex(io.session(), "session", 7, LIBSSH2_CHANNEL_WINDOW_DEFAULT * 2,
                                    LIBSSH2_CHANNEL_PACKET_DEFAULT, nullptr, 0);
        if (channel_ == nullptr) {
          int rc = libssh2_session_last_errno(io.session());
          if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
          io.release_opener(this);
          release_slot(io);
          Error e = session_error(io.session(), rc, "ssh exec: open channel");
          if (is_fatal_session_error(rc)) {
            io.fatal(e);
            state_ = State::kWaitSlot;
            return Step::kIdle;
          }
          if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE && io.channels_open() > 0) {
            io.learn_channel_limit();
            refused_ = true;
            refused_epoch_ = io.release_epoch();
            retry_at_ = Clock::now() + std::chrono::milliseconds(20);
            state_ = State::kWaitSlot;
            return Step::kProgress;
          }
          e.message += " (sshd MaxSessions reached?)";
          return deliver_error(std::move(e));
        }
        io.release_opener(this);
        state_ = State::kStarting;
        [[fallthrough]];
      }
      case State::kStarting: {
        if (!started_) {
          // A connection that died while idle (e.g. sshd restarted) is noticed here, before
          // the command is sent, so that it can be retried on a new connection.
          if (io.peer_closed()) {
            io.fatal(
                ssh_fail(SshErrc::kDisconnected, "ssh exec: server closed the connection").value());
            return Step::kIdle;
          }
          started_ = true;
        }
        int rc = libssh2_channel_process_startup(channel_, "exec", 4, command_.data(),
                                                 static_cast<unsigned>(command_.size()));
        if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
        if (rc != 0) {
          Error e = session_error(io.session(), rc, "ssh exec: exec request");
          if (is_fatal_session_error(rc)) {
            io.fatal(e);
            return Step::kIdle;
          }
          error_ = std::move(e);
          state_ = State::kClosing;
          return Step::kProgress;
        }
        state_ = State::kRunning;
        return Step::kProgress;
      }
      case State::kRunning: return run(io, now);
      case State::kClosing: {
        int rc = libssh2_channel_close(channel_);
        if (rc == LIBSSH2_ERROR_EAGAIN) return check_grace(io, now);
        if (is_fatal_session_error(rc)) {
          io.fatal(session_error(io.session(), rc, "ssh exec: close"));
          return Step::kIdle;
        }
        state_ = State::kWaitClosed;
        [[fallthrough]];
      }
      case State::kWaitClosed: {
        int rc = libssh2_channel_wait_closed(channel_);
        if (rc == LIBSSH2_ERROR_EAGAIN) return check_grace(io, now);
        if (is_fatal_session_error(rc)) {
          io.fatal(session_error(io.session(), rc, "ssh exec: wait closed"));
          return Step::kIdle;
        }
        exit_code_ = libssh2_channel_get_exit_status(channel_);
        char* sig = nullptr;
        std::size_t sig_len = 0;
        libssh2_channel_get_exit_signal(channel_, &sig, &sig_len, nullptr, nullptr, nullptr,
                                        nullptr);
        if (sig != nullptr) {
          exit_signal_.assign(sig, sig_len);
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
        if (error_) return deliver_error(std::move(*error_));
        return finish();
      }
      case State::kDone: return Step::kDone;
    }
    return Step::kIdle;
  }

  void abandon(SshSession::Impl&) override {
    // libssh2_session_free frees the channel; nothing to do but forget it.
    channel_ = nullptr;
    reserved_ = false;
  }

  bool on_session_lost(const Error& error, bool may_retry) override {
    if (state_ == State::kDone) return false;
    channel_ = nullptr;
    reserved_ = false;
    if (!started_ && may_retry) {
      state_ = State::kWaitSlot;
      return true;
    }
    if (timed_out_) {
      finish();  // the command was being killed anyway: its partial output is the result
      return false;
    }
    deliver_error(error);
    return false;
  }

 private:
  enum class State {
    kWaitSlot,
    kOpening,
    kStarting,
    kRunning,
    kClosing,
    kWaitClosed,
    kFreeing,
    kDone
  };

  void release_slot(SshSession::Impl& io) {
    if (!reserved_) return;
    reserved_ = false;
    if (!force_reserved_) io.release_channel();
  }

  Step run(SshSession::Impl& io, Clock::time_point now) {
    bool progress = false;
    // stdin
    while (stdin_off_ < options_.stdin_data.size()) {
      ssize_t w = libssh2_channel_write(channel_, options_.stdin_data.data() + stdin_off_,
                                        options_.stdin_data.size() - stdin_off_);
      if (w == LIBSSH2_ERROR_EAGAIN) break;
      if (w < 0) {
        if (is_fatal_session_error(static_cast<int>(w))) {
          io.fatal(session_error(io.session(), static_cast<int>(w), "ssh exec: stdin"));
          return Step::kIdle;
        }
        stdin_off_ = options_.stdin_data.size();  // the command closed its stdin: drop the rest
        eof_sent_ = true;
        break;
      }
      stdin_off_ += static_cast<std::size_t>(w);
      progress = true;
    }
    if (stdin_off_ >= options_.stdin_data.size() && !eof_sent_) {
      int rc = libssh2_channel_send_eof(channel_);
      if (rc != LIBSSH2_ERROR_EAGAIN) {
        eof_sent_ = true;
        progress = true;
        if (is_fatal_session_error(rc)) {
          io.fatal(session_error(io.session(), rc, "ssh exec: eof"));
          return Step::kIdle;
        }
      }
    }
    // stdout and stderr, always both (never block on one while the other fills the window).
    char buf[kReadChunk];
    for (int stream = 0; stream < 2; ++stream) {
      for (int i = 0; i < kMaxReadsPerStep; ++i) {
        ssize_t r = libssh2_channel_read_ex(channel_, stream, buf, sizeof buf);
        if (r > 0) {
          consume(stream, std::string_view(buf, static_cast<std::size_t>(r)), io);
          progress = true;
          continue;
        }
        if (r == 0 || r == LIBSSH2_ERROR_EAGAIN) break;
        if (is_fatal_session_error(static_cast<int>(r))) {
          io.fatal(session_error(io.session(), static_cast<int>(r), "ssh exec: read"));
          return Step::kIdle;
        }
        break;  // channel-level error (closed): treat as end of stream
      }
    }
    if (libssh2_channel_eof(channel_) != 0) {
      flush_marker_window(io);
      state_ = State::kClosing;
      return Step::kProgress;
    }
    if (!timed_out_ && now >= deadline_) {
      timed_out_ = true;
      kill_deadline_ = now + io.config().kill_grace;
      maybe_kill(io);
      progress = true;
    }
    if (timed_out_) {
      Step s = check_grace(io, now);
      if (s == Step::kDone) return s;
    }
    return progress ? Step::kProgress : Step::kIdle;
  }

  // After a timeout: give the channel kill_grace to close, then abandon it.
  Step check_grace(SshSession::Impl& io, Clock::time_point now) {
    if (!timed_out_ || now < kill_deadline_) return Step::kIdle;
    log::warn(
        "ssh exec: command did not end within kill_grace after its timeout; abandoning "
        "its channel");
    if (channel_ != nullptr) {
      io.adopt_zombie(channel_, reserved_ && !force_reserved_);  // keeps its slot until freed
      channel_ = nullptr;
      reserved_ = false;
    }
    flush_marker_window(io);
    return finish();
  }

  void maybe_kill(SshSession::Impl& io) {
    if (kill_sent_ || pgid_ <= 1 || !timed_out_) return;
    kill_sent_ = true;
    std::string pg = std::to_string(pgid_);
    auto p = std::make_shared<std::promise<Result<ExecResult>>>();
    ExecOptions o;
    o.timeout = io.config().kill_grace;
    o.max_output = 4096;
    io.spawn(std::make_shared<ExecOp>("kill -s KILL -- -" + pg + " 2>/dev/null || kill -9 -" + pg,
                                      std::move(o), std::move(p), /*internal=*/true));
  }

  void consume(int stream, std::string_view data, SshSession::Impl& io) {
    if (stream == 0) {
      out_.append(data);
      notify(ExecStream::kStdout, data);
      return;
    }
    if (!want_marker_) {
      emit_err(data);
      return;
    }
    // Until the pid marker has been seen, stderr is held back (at most kMarkerWindow bytes).
    window_.append(data);
    std::size_t at = window_.find(kMarkerStart);
    if (at != std::string::npos) {
      std::size_t end = window_.find('\036', at + kMarkerStart.size());
      if (end == std::string::npos) {
        if (window_.size() < kMarkerWindow) return;
      } else {
        std::string digits =
            window_.substr(at + kMarkerStart.size(), end - at - kMarkerStart.size());
        pgid_ = std::strtol(digits.c_str(), nullptr, 10);
        window_.erase(at, end + 1 - at);
        want_marker_ = false;
        emit_err(window_);
        window_.clear();
        maybe_kill(io);
        return;
      }
    } else if (window_.size() < kMarkerWindow) {
      return;
    }
    flush_marker_window(io);
  }

  void flush_marker_window(SshSession::Impl&) {
    if (!want_marker_) return;
    want_marker_ = false;
    emit_err(window_);
    window_.clear();
  }

  // The caller's callback runs on the I/O thread: an exception must not take the thread down.
  void notify(ExecStream stream, std::string_view data) {
    if (!options_.on_output) return;
    try {
      options_.on_output(stream, data);
    } catch (...) {
      log::warn("ssh exec: on_output callback threw; no further chunks are delivered to it");
      options_.on_output = nullptr;
    }
  }

  void emit_err(std::string_view data) {
    if (data.empty()) return;
    err_.append(data);
    notify(ExecStream::kStderr, data);
  }

  Step finish() {
    if (state_ == State::kDone) return Step::kDone;
    state_ = State::kDone;
    ExecResult r;
    if (!exit_signal_.empty()) {
      r.exit_code = -1;
      r.exit_signal = exit_signal_;
    } else {
      r.exit_code = timed_out_ && channel_ == nullptr && exit_code_ < 0 ? -1 : exit_code_;
    }
    r.out_total = out_.total();
    r.err_total = err_.total();
    r.truncated = out_.truncated() || err_.truncated();
    r.out = out_.take();
    r.err = err_.take();
    r.timed_out = timed_out_;
    r.duration = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_);
    count_done();  // before the caller wakes up (and perhaps picks a connection for the next)
    promise_->set_value(std::move(r));
    return Step::kDone;
  }

  Step deliver_error(Error e) {
    if (state_ == State::kDone) return Step::kDone;
    state_ = State::kDone;
    count_done();
    promise_->set_value(tl::unexpected<Error>(std::move(e)));
    return Step::kDone;
  }

  void count_done() {
    if (inflight_) inflight_->fetch_sub(1, std::memory_order_relaxed);
    inflight_.reset();
  }

  std::string command_;
  ExecOptions options_;
  std::shared_ptr<std::promise<Result<ExecResult>>> promise_;
  std::shared_ptr<std::atomic<int>> inflight_;
  bool internal_;
  State state_ = State::kWaitSlot;
  LIBSSH2_CHANNEL* channel_ = nullptr;
  bool reserved_ = false;
  bool force_reserved_ = false;
  bool started_ = false;
  bool refused_ = false;
  std::uint64_t refused_epoch_ = 0;
  Clock::time_point retry_at_{};
  std::size_t stdin_off_ = 0;
  bool eof_sent_ = false;
  CappedBuffer out_;
  CappedBuffer err_;
  bool want_marker_;
  std::string window_;
  long pgid_ = -1;
  bool timed_out_ = false;
  bool kill_sent_ = false;
  int exit_code_ = -1;
  std::string exit_signal_;
  std::optional<Error> error_;
  Clock::time_point start_;
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point kill_deadline_ = Clock::time_point::max();
};

}  // namespace

std::shared_ptr<SshSession::Impl::Op> make_exec_op(
    std::string remote_command, ExecOptions options,
    std::shared_ptr<std::promise<Result<ExecResult>>> promise,
    std::shared_ptr<std::atomic<int>> inflight) {
  auto op = std::make_shared<ExecOp>(std::move(remote_command), std::move(options),
                                     std::move(promise), false);
  op->set_inflight_counter(std::move(inflight));
  return op;
}

}  // namespace pvs::ssh_detail
