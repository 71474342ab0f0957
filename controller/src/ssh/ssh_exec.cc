// The exec operation: one channel (the state machine of channel_op.h), driven non-blockingly by
// the session's I/O thread.
//
// Its start is the exec request; running: stdin out, stdout+stderr drained together until EOF;
// the exit status arrives by the close. On timeout the command's process group is killed through a
// second channel and the channel is drained for kill_grace; after that it is abandoned to the
// zombie list and the partial result returned. A timed command's process group (its pid marker)
// is registered with the session's watchdog (ssh_watchdog.cc) once the command has run
// kWatchAfter, and let go when its channel closes. One whose timeout passed is registered all
// the same: should its kill not end it, the watchdog is the guard that is left.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "channel_op.h"
#include "pvesandbox/common/log.h"

namespace pvs::ssh_detail {
namespace {

using Step = ChannelOp::Step;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kMaxReadsPerStep = 16;  // fairness between channels
// A timed command is registered with the session's watchdog once it has run this long: one
// that ends sooner needs no guard, and nothing about it travels but its pid marker (most
// commands; a connection whose commands are all short starts no watchdog at all).
constexpr auto kWatchAfter = std::chrono::milliseconds(50);

class ExecOp : public ChannelOp {
 public:
  ExecOp(std::string command, ExecOptions options, ExecDone done, bool internal)
      : ChannelOp({.what = "ssh exec",
                   .window = LIBSSH2_CHANNEL_WINDOW_DEFAULT * 2,
                   .internal = internal,
                   .retry_refused = true}),
        command_(std::move(command)),
        options_(std::move(options)),
        done_(std::move(done)),
        out_(options_.max_output),
        err_(options_.max_output),
        want_marker_(!internal && options_.timeout.count() > 0) {
    start_ = Clock::now();
    if (options_.timeout.count() > 0) deadline_ = start_ + options_.timeout;
  }

  ~ExecOp() override {
    count_done();
    // Every exec is answered once, even one whose session went without telling it.
    if (done_) deliver(ssh_fail(SshErrc::kClosed, "ssh session closed"));
  }

  void set_inflight_counter(std::shared_ptr<std::atomic<int>> c) { inflight_ = std::move(c); }

  Clock::time_point deadline() const override {
    if (state_ == State::kDone) return Clock::time_point::max();
    if (refused()) return std::min(retry_at(), deadline_);
    const auto due = timed_out_ ? grace_deadline_ : deadline_;
    // Only a running command is registered (the steps after its EOF never do it).
    const bool watch_due = watch_pending_ && state_ == State::kRunning;
    return watch_due ? std::min(due, watch_at_) : due;
  }

 private:
  std::optional<Step> before_slot(SshSession::Impl&, Clock::time_point now) override {
    if (now < deadline_) return std::nullopt;
    timed_out_ = true;
    return finish();
  }

  Step start(SshSession::Impl& io) override {
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
      begin_close();
      return Step::kProgress;
    }
    state_ = State::kRunning;
    watch_at_ = Clock::now() + kWatchAfter;  // counted from the command's start, not its queue
    return Step::kProgress;
  }

  Step open_failed(Error e) override { return deliver_error(std::move(e)); }

  Step freed(SshSession::Impl& io) override {
    // The login shell is gone: the guard has nothing left to watch.
    if (watched_) io.unwatch(pgid_);
    if (error_) return deliver_error(std::move(*error_));
    return finish();
  }

  // After a timeout: the channel did not close within kill_grace.
  Step abandoned() override {
    log::warn(
        "ssh exec: command did not end within kill_grace after its timeout; abandoning "
        "its channel");
    flush_marker_window();
    return finish();
  }

  void lost(const Error& error) override {
    if (timed_out_) {
      finish();  // the command was being killed anyway: its partial output is the result
      return;
    }
    deliver_error(error);
  }

  Step run(SshSession::Impl& io, Clock::time_point now) override {
    bool progress = false;
    // stdin
    while (stdin_off_ < options_.stdin_data.size()) {
      ssize_t w = libssh2_channel_write(channel_, options_.stdin_data.data() + stdin_off_,
                                        options_.stdin_data.size() - stdin_off_);
      if (w == LIBSSH2_ERROR_EAGAIN) break;
      if (w < 0) {
        if (is_fatal_session_error(static_cast<int>(w))) {
          return fail_session(io, static_cast<int>(w), "stdin");
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
        if (is_fatal_session_error(rc)) return fail_session(io, rc, "eof");
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
          return fail_session(io, static_cast<int>(r), "read");
        }
        break;  // channel-level error (closed): treat as end of stream
      }
    }
    if (libssh2_channel_eof(channel_) != 0) {
      flush_marker_window();
      begin_close();
      return Step::kProgress;
    }
    if (watch_pending_ && now >= watch_at_) {
      watch_pending_ = false;
      watched_ = true;
      io.watch(pgid_, guard_seconds());  // starts the watchdog if the connection has none
      progress = true;                   // another pass: the watchdog takes the line
    }
    if (!timed_out_ && now >= deadline_) {
      timed_out_ = true;
      grace_deadline_ = now + io.config().kill_grace;
      maybe_kill(io);
      progress = true;
    }
    if (timed_out_) {
      Step s = check_grace(io, now);
      if (s == Step::kDone) return s;
    }
    return progress ? Step::kProgress : Step::kIdle;
  }

  void maybe_kill(SshSession::Impl& io) {
    if (kill_sent_ || pgid_ <= 1 || !timed_out_) return;
    kill_sent_ = true;
    std::string pg = std::to_string(pgid_);
    ExecOptions o;
    o.timeout = io.config().kill_grace;
    o.max_output = 4096;
    io.spawn(std::make_shared<ExecOp>(
        "kill -s KILL -- -" + pg + " 2>/dev/null || kill -9 -" + pg, std::move(o),
        [](Result<ExecResult>) {},
        /*internal=*/true));
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
        watch_pending_ = pgid_ > 1;
        emit_err(window_);
        window_.clear();
        maybe_kill(io);
        return;
      }
    } else if (window_.size() < kMarkerWindow) {
      return;
    }
    flush_marker_window();
  }

  // The remote guard's time, counted from the command's start: its timeout (whole seconds,
  // rounded up) and 10 s more.
  int guard_seconds() const {
    const auto ms = options_.timeout.count();
    return static_cast<int>(std::min<std::int64_t>((ms + 999) / 1000, 1 << 24)) + 10;
  }

  void flush_marker_window() {
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
    deliver(std::move(r));
    return Step::kDone;
  }

  Step deliver_error(Error e) {
    if (state_ == State::kDone) return Step::kDone;
    state_ = State::kDone;
    count_done();
    deliver(tl::unexpected<Error>(std::move(e)));
    return Step::kDone;
  }

  void deliver(Result<ExecResult> r) {
    ExecDone done = std::exchange(done_, nullptr);
    try {
      done(std::move(r));
    } catch (...) {  // the caller's: it must not end the session's I/O thread
    }
  }

  void count_done() {
    if (inflight_) inflight_->fetch_sub(1, std::memory_order_relaxed);
    inflight_.reset();
  }

  std::string command_;
  ExecOptions options_;
  ExecDone done_;
  std::shared_ptr<std::atomic<int>> inflight_;
  std::size_t stdin_off_ = 0;
  bool eof_sent_ = false;
  CappedBuffer out_;
  CappedBuffer err_;
  bool want_marker_;
  std::string window_;
  long pgid_ = -1;
  bool watch_pending_ = false;  // the pid is known; registered once the command ran kWatchAfter
  bool watched_ = false;        // registered with the session's watchdog
  bool timed_out_ = false;
  bool kill_sent_ = false;
  std::optional<Error> error_;
  Clock::time_point start_;
  Clock::time_point watch_at_ = Clock::time_point::max();  // set when the command starts
  Clock::time_point deadline_ = Clock::time_point::max();
};

}  // namespace

std::shared_ptr<SshSession::Impl::Op> make_exec_op(std::string remote_command, ExecOptions options,
                                                   ExecDone done,
                                                   std::shared_ptr<std::atomic<int>> inflight) {
  auto op = std::make_shared<ExecOp>(std::move(remote_command), std::move(options), std::move(done),
                                     false);
  op->set_inflight_counter(std::move(inflight));
  return op;
}

}  // namespace pvs::ssh_detail
