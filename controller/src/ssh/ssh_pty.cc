// The pty operation: one channel with a pseudo-terminal, driven non-blockingly by the session's
// I/O thread, and its caller-side handle (PtyChannel).
//
// The state machine of channel_op.h; its start is the pty request, then the exec request;
// running: queued input out, resizes, output in until EOF or a hang-up. The first output is a
// marker with the Unix session id that the remote shell prints before anything else; it is cut from
// the output and names the session a hang-up kills (`pkill -s`).
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "channel_op.h"
#include "pvesandbox/common/log.h"

namespace pvs {

class PtyChannel::Shared {
 public:
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::string input;                          // GUARDED_BY(mu): bytes not yet sent
  std::optional<std::pair<int, int>> resize;  // GUARDED_BY(mu): latest cols, rows asked
  bool close_requested = false;               // GUARDED_BY(mu)
  std::optional<PtyExit> exit;                // GUARDED_BY(mu): set once, when it ended
  std::size_t max_pending = 1 << 20;
};

namespace ssh_detail {

Result<std::string> build_pty_command(const PtyOptions& options) {
  if (options.cols < 1 || options.cols > 1000 || options.rows < 1 || options.rows > 1000) {
    return ssh_fail(SshErrc::kInvalidArgument, "cols and rows must be 1..1000");
  }
  ExecOptions eo;
  eo.env = options.env;
  eo.cwd = options.cwd;
  std::string command =
      options.command.empty() ? std::string("exec \"${SHELL:-/bin/sh}\" -l") : options.command;
  auto body = build_remote_command(command, eo);
  if (!body) return body;
  // sshd makes the shell that runs this the leader of a new Unix session: $$ is its id.
  return "printf '\\036pvs:%s\\036' \"$$\"\n" + *body;
}

namespace {

using Step = ChannelOp::Step;

constexpr auto kMarkerWait = std::chrono::seconds(3);
constexpr std::size_t kPtyReadChunk = 32 * 1024;
constexpr std::size_t kWriteChunk = 32 * 1024;
constexpr int kPtyReadsPerStep = 8;
constexpr auto kCloseGrace = std::chrono::seconds(5);
constexpr auto kSlotWait = std::chrono::seconds(10);

class PtyOp : public ChannelOp {
 public:
  PtyOp(std::string command, PtyOptions options, std::shared_ptr<PtyChannel::Shared> shared,
        std::shared_ptr<std::promise<Status>> started)
      : ChannelOp({.what = "ssh pty", .window = LIBSSH2_CHANNEL_WINDOW_DEFAULT}),
        command_(std::move(command)),
        options_(std::move(options)),
        shared_(std::move(shared)),
        started_promise_(std::move(started)) {}

  Clock::time_point deadline() const override {
    if (state_ == State::kWaitSlot) return slot_deadline_;
    if (state_ == State::kRunning && want_marker_) return marker_deadline_;
    if (state_ == State::kClosing || state_ == State::kWaitClosed) return grace_deadline_;
    return Clock::time_point::max();
  }

 private:
  std::optional<Step> before_slot(SshSession::Impl&, Clock::time_point now) override {
    if (hangup_requested() && !started_) return end_before_start("closed before it started");
    // A terminal holds its channel for long: waiting for one to free up could be forever.
    if (now >= slot_deadline_) {
      return fail_start(
          ssh_fail(SshErrc::kChannelRefused, "ssh pty: no free channel on this connection within " +
                                                 std::to_string(kSlotWait.count()) +
                                                 " s (SshConfig::max_channels, sshd MaxSessions)")
              .value());
    }
    return std::nullopt;
  }

  // The pty request, then the exec request.
  Step start(SshSession::Impl& io) override {
    if (!pty_granted_) {
      int rc = libssh2_channel_request_pty_ex(channel_, options_.term.data(),
                                              static_cast<unsigned>(options_.term.size()), nullptr,
                                              0, options_.cols, options_.rows, 0, 0);
      if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
      if (rc != 0) return request_failed(io, rc, "ssh pty: pty request");
      cols_ = options_.cols;
      rows_ = options_.rows;
      pty_granted_ = true;
    }
    int rc = libssh2_channel_process_startup(channel_, "exec", 4, command_.data(),
                                             static_cast<unsigned>(command_.size()));
    if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
    if (rc != 0) return request_failed(io, rc, "ssh pty: exec request");
    started_ = true;
    marker_deadline_ = Clock::now() + kMarkerWait;
    started_promise_->set_value({});
    state_ = State::kRunning;
    return Step::kProgress;
  }

  Step open_failed(Error e) override { return fail_start(std::move(e)); }

  void while_closing(SshSession::Impl& io) override { drain(io); }

  Step freed(SshSession::Impl&) override {
    exit_.exit_code = exit_code_;
    if (!exit_signal_.empty()) {
      exit_.signal = exit_signal_;
      exit_.exit_code = -1;
    }
    return finish();
  }

  // A channel whose program does not end after the hang-up: abandoned (freed in the background).
  Step abandoned() override {
    log::warn("ssh pty: channel did not close after the hang-up; abandoning it");
    exit_.exit_code = -1;
    return finish();
  }

  void lost(const Error& error) override {
    if (!started_) {
      fail_start(error);
      return;
    }
    exit_.exit_code = -1;
    if (!hung_up_) exit_.error = error.message;
    finish();
  }

  bool hangup_requested() const {
    std::lock_guard lock(shared_->mu);
    return shared_->close_requested;
  }

  Step request_failed(SshSession::Impl& io, int rc, std::string_view what) {
    Error e = session_error(io.session(), rc, what);
    if (is_fatal_session_error(rc)) {
      io.fatal(e);
      return Step::kIdle;
    }
    start_error_ = std::move(e);
    begin_close(Clock::now() + kCloseGrace);
    return Step::kProgress;
  }

  Step fail_start(Error e) {
    state_ = State::kDone;
    started_promise_->set_value(tl::unexpected<Error>(std::move(e)));
    return Step::kDone;
  }

  Step end_before_start(std::string why) {
    return fail_start(ssh_fail(SshErrc::kClosed, "ssh pty: " + std::move(why)).value());
  }

  Step run(SshSession::Impl& io, Clock::time_point) override {
    bool progress = false;
    std::string chunk;
    std::optional<std::pair<int, int>> resize;
    bool hangup = false;
    {
      std::lock_guard lock(shared_->mu);
      chunk = shared_->input.substr(0, kWriteChunk);
      resize = shared_->resize;
      hangup = shared_->close_requested;
    }
    if (hangup) {
      hung_up_ = true;
      exit_.hung_up = true;
      kill_session(io);
      begin_close(Clock::now() + kCloseGrace);
      return Step::kProgress;
    }
    if (resize && (resize->first != cols_ || resize->second != rows_)) {
      int rc = libssh2_channel_request_pty_size_ex(channel_, resize->first, resize->second, 0, 0);
      if (rc != LIBSSH2_ERROR_EAGAIN) {
        if (is_fatal_session_error(rc)) return fail_session(io, rc, "window-change");
        cols_ = resize->first;
        rows_ = resize->second;
        progress = true;
      }
    }
    if (!chunk.empty()) {
      ssize_t w = libssh2_channel_write(channel_, chunk.data(), chunk.size());
      if (w > 0) {
        std::lock_guard lock(shared_->mu);
        shared_->input.erase(0, static_cast<std::size_t>(w));
        progress = true;
      } else if (w != LIBSSH2_ERROR_EAGAIN && w < 0) {
        if (is_fatal_session_error(static_cast<int>(w))) {
          return fail_session(io, static_cast<int>(w), "write");
        }
        std::lock_guard lock(shared_->mu);
        shared_->input.clear();  // the channel no longer takes input
      }
    }
    if (drain(io)) progress = true;
    if (fatal_) return Step::kIdle;
    if (want_marker_ && Clock::now() >= marker_deadline_) flush_marker();
    if (libssh2_channel_eof(channel_) != 0) {
      flush_marker();
      begin_close(Clock::now() + kCloseGrace);
      return Step::kProgress;
    }
    return progress ? Step::kProgress : Step::kIdle;
  }

  // Reads what output is there; true if any.
  bool drain(SshSession::Impl& io) {
    bool any = false;
    char buf[kPtyReadChunk];
    for (int i = 0; i < kPtyReadsPerStep; ++i) {
      ssize_t r = libssh2_channel_read_ex(channel_, 0, buf, sizeof buf);
      if (r > 0) {
        consume(io, std::string_view(buf, static_cast<std::size_t>(r)));
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

  // Until the marker is seen, output is held back (at most kMarkerWindow bytes or
  // kMarkerWait): input typed right after the start is echoed by the tty before the shell
  // prints the marker, so the marker need not come first.
  void consume(SshSession::Impl& io, std::string_view data) {
    if (!want_marker_) {
      emit(data);
      return;
    }
    window_.append(data);
    std::size_t at = window_.find(kMarkerStart);
    std::size_t end = at == std::string::npos ? at : window_.find('\036', at + kMarkerStart.size());
    if (end == std::string::npos) {
      if (window_.size() >= kMarkerWindow) flush_marker();
      return;
    }
    sid_ = std::strtol(
        window_.substr(at + kMarkerStart.size(), end - at - kMarkerStart.size()).c_str(), nullptr,
        10);
    window_.erase(at, end + 1 - at);
    flush_marker();
    if (hung_up_) kill_session(io);
  }

  void flush_marker() {
    if (!want_marker_) return;
    want_marker_ = false;
    if (!window_.empty()) emit(window_);
    window_.clear();
  }

  void emit(std::string_view data) {
    if (!options_.on_output || data.empty()) return;
    try {
      options_.on_output(data);
    } catch (...) {
      log::warn("ssh pty: on_output threw; no further output is delivered to it");
      options_.on_output = nullptr;
    }
  }

  // A side exec: SIGHUP to every process of the program's Unix session, SIGKILL to what is
  // left 2 s later.
  void kill_session(SshSession::Impl& io) {
    if (kill_sent_ || sid_ <= 1) return;
    kill_sent_ = true;
    const std::string s = std::to_string(sid_);
    ExecOptions o;
    o.max_output = 4096;
    o.timeout = std::chrono::seconds(10);
    // Polls for up to 2 s whether anything is left before the SIGKILL (usually nothing is).
    auto cmd = "pkill -HUP -s " + s + " 2>/dev/null || kill -HUP -- -" + s +
               " 2>/dev/null; for i in 1 2 3 4 5 6 7 8 9 10; do pgrep -s " + s +
               " >/dev/null 2>&1 || exit 0; sleep 0.2; done; pkill -KILL -s " + s +
               " 2>/dev/null || kill -KILL -- -" + s + " 2>/dev/null; true";
    auto remote = build_remote_command(cmd, o);
    if (!remote) return;
    io.spawn(make_exec_op(std::move(*remote), std::move(o), [](Result<ExecResult>) {}));
  }

  Step finish() {
    if (state_ == State::kDone) return Step::kDone;
    state_ = State::kDone;
    if (!started_) {
      Error e = start_error_
                    ? *start_error_
                    : ssh_fail(SshErrc::kClosed, "ssh pty: ended before it started").value();
      started_promise_->set_value(tl::unexpected<Error>(std::move(e)));
      return Step::kDone;
    }
    flush_marker();
    {
      std::lock_guard lock(shared_->mu);
      shared_->exit = exit_;
      shared_->input.clear();
    }
    shared_->cv.notify_all();
    if (options_.on_exit) {
      try {
        options_.on_exit(exit_);
      } catch (...) {
        log::warn("ssh pty: on_exit threw");
      }
    }
    return Step::kDone;
  }

  std::string command_;
  PtyOptions options_;
  std::shared_ptr<PtyChannel::Shared> shared_;
  std::shared_ptr<std::promise<Status>> started_promise_;
  bool pty_granted_ = false;
  bool started_ = false;
  bool hung_up_ = false;
  bool kill_sent_ = false;
  bool fatal_ = false;
  bool want_marker_ = true;
  std::string window_;
  long sid_ = -1;
  int cols_ = 0, rows_ = 0;
  std::optional<Error> start_error_;
  PtyExit exit_;
  Clock::time_point slot_deadline_ = Clock::now() + kSlotWait;
  Clock::time_point marker_deadline_ = Clock::time_point::max();
};

}  // namespace

std::shared_ptr<SshSession::Impl::Op> make_pty_op(std::string remote_command, PtyOptions options,
                                                  std::shared_ptr<PtyChannel::Shared> shared,
                                                  std::shared_ptr<std::promise<Status>> started) {
  return std::make_shared<PtyOp>(std::move(remote_command), std::move(options), std::move(shared),
                                 std::move(started));
}

}  // namespace ssh_detail

// ---- the handle ----------------------------------------------------------------------------

PtyChannel::PtyChannel(std::shared_ptr<Shared> shared, std::function<void()> wake)
    : shared_(std::move(shared)), wake_(std::move(wake)) {}

PtyChannel::~PtyChannel() {
  close();
}

Status PtyChannel::write(std::string_view bytes) {
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->exit || shared_->close_requested) {
      return ssh_fail(SshErrc::kClosed, "the terminal's program has ended");
    }
    if (shared_->input.size() + bytes.size() > shared_->max_pending) {
      return fail(ErrorCode::kTooLarge, "more than " + std::to_string(shared_->max_pending) +
                                            " input bytes are waiting to be sent");
    }
    shared_->input.append(bytes);
  }
  wake_();
  return {};
}

Status PtyChannel::resize(int cols, int rows) {
  if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000) {
    return fail(ErrorCode::kInvalidArgument, "cols and rows must be 1..1000");
  }
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->exit) return ssh_fail(SshErrc::kClosed, "the terminal's program has ended");
    shared_->resize = std::make_pair(cols, rows);
  }
  wake_();
  return {};
}

void PtyChannel::close() {
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->exit || shared_->close_requested) return;
    shared_->close_requested = true;
  }
  wake_();
}

bool PtyChannel::running() const {
  std::lock_guard lock(shared_->mu);
  return !shared_->exit.has_value();
}

std::optional<PtyExit> PtyChannel::exit() const {
  std::lock_guard lock(shared_->mu);
  return shared_->exit;
}

std::optional<PtyExit> PtyChannel::wait(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(shared_->mu);
  shared_->cv.wait_for(lock, timeout, [&] { return shared_->exit.has_value(); });
  return shared_->exit;
}

Result<std::unique_ptr<PtyChannel>> SshSession::open_pty(PtyOptions options) {
  auto remote = ssh_detail::build_pty_command(options);
  if (!remote) return tl::unexpected<Error>(remote.error());
  auto shared = std::make_shared<PtyChannel::Shared>();
  shared->max_pending = options.max_pending_input;
  auto started = std::make_shared<std::promise<Status>>();
  auto future = started->get_future();
  impl_->submit(ssh_detail::make_pty_op(std::move(*remote), std::move(options), shared, started));
  Status st = future.get();
  if (!st) return tl::unexpected<Error>(st.error());
  std::weak_ptr<Impl> weak = impl_;
  return std::make_unique<PtyChannel>(std::move(shared), [weak] {
    if (auto impl = weak.lock()) impl->notify();
  });
}

}  // namespace pvs
