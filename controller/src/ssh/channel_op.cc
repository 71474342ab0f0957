// The channel state machine exec and pty share (channel_op.h).
#include "channel_op.h"

#include <algorithm>
#include <optional>

namespace pvs::ssh_detail {

using Step = ChannelOp::Step;

Step ChannelOp::step(SshSession::Impl& io) {
  auto now = Clock::now();
  switch (state_) {
    case State::kWaitSlot:
      if (auto wait = wait_slot(io, now)) return *wait;
      [[fallthrough]];
    case State::kOpening:
      if (auto wait = open(io)) return *wait;
      [[fallthrough]];
    case State::kStarting: {
      if (!requested_) {
        // A connection that died while idle (e.g. sshd restarted) is noticed here, before the
        // first request, so that the op can be retried on a new connection.
        if (io.peer_closed()) {
          io.fatal(ssh_fail(SshErrc::kDisconnected, what("server closed the connection")).value());
          return Step::kIdle;
        }
        requested_ = true;
      }
      return start(io);
    }
    case State::kRunning: return run(io, now);
    case State::kClosing: {
      int rc = libssh2_channel_close(channel_);
      if (rc == LIBSSH2_ERROR_EAGAIN) return check_grace(io, now);
      if (is_fatal_session_error(rc)) return fail_session(io, rc, "close");
      state_ = State::kWaitClosed;
      [[fallthrough]];
    }
    case State::kWaitClosed: {
      while_closing(io);
      int rc = libssh2_channel_wait_closed(channel_);
      if (rc == LIBSSH2_ERROR_EAGAIN) return check_grace(io, now);
      if (is_fatal_session_error(rc)) return fail_session(io, rc, "wait closed");
      exit_code_ = libssh2_channel_get_exit_status(channel_);
      char* sig = nullptr;
      std::size_t sig_len = 0;
      libssh2_channel_get_exit_signal(channel_, &sig, &sig_len, nullptr, nullptr, nullptr, nullptr);
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
      const Step step = freed(io);
      // A watchdog that gave way, with a registration still queued, may have a channel now.
      if (!kind_.gives_way) io.resume_watchdog();
      return step;
    }
    case State::kDone: return Step::kDone;
  }
  return Step::kIdle;
}

// kWaitSlot: nullopt once a slot is reserved (state kOpening); a spare channel starts at once.
std::optional<Step> ChannelOp::wait_slot(SshSession::Impl& io, Clock::time_point now) {
  if (auto end = before_slot(io, now)) return *end;
  // After a refusal: wait for a channel to close, or 20 ms.
  if (refused_ && io.release_epoch() == refused_epoch_ && now < retry_at_) return Step::kIdle;
  refused_ = false;
  if (!kind_.internal && kind_.spare) {
    if (LIBSSH2_CHANNEL* spare = io.take_spare()) {
      channel_ = spare;
      reserved_ = true;
      state_ = State::kStarting;
      return step(io);
    }
  }
  if (!io.try_take_opener(this)) return Step::kIdle;
  if (kind_.internal) {
    // A kill must not wait behind the commands it is meant to stop.
    force_reserved_ = !io.try_reserve_channel();
  } else if (!io.try_reserve_channel()) {
    io.release_opener(this);
    // At the limit an idle SFTP instance, else the session's watchdog, gives way to a command.
    if (!kind_.gives_way && !io.reclaim_idle_sftp()) io.yield_watchdog();
    return Step::kIdle;
  }
  reserved_ = true;
  state_ = State::kOpening;
  return std::nullopt;
}

// kOpening: nullopt once the channel is open (state kStarting).
std::optional<Step> ChannelOp::open(SshSession::Impl& io) {
  channel_ = open_channel(io);
  if (channel_ == nullptr) {
    int rc = libssh2_session_last_errno(io.session());
    if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
    io.release_opener(this);
    release_slot(io);
    Error e = session_error(io.session(), rc, what("open channel"));
    if (is_fatal_session_error(rc)) {
      io.fatal(e);
      state_ = State::kWaitSlot;
      return Step::kIdle;
    }
    if (kind_.retry_refused && rc == LIBSSH2_ERROR_CHANNEL_FAILURE &&
        io.refusal_is_busy(lag_retries_)) {
      refused_ = true;
      refused_epoch_ = io.release_epoch();
      retry_at_ = Clock::now() + std::chrono::milliseconds(20);
      state_ = State::kWaitSlot;
      return Step::kProgress;
    }
    e.message += kind_.open_hint;
    return open_failed(std::move(e));
  }
  io.release_opener(this);
  state_ = State::kStarting;
  return std::nullopt;
}

LIBSSH2_CHANNEL* ChannelOp::open_channel(SshSession::Impl& io) {
  return libssh2_channel_open_ex(io.session(), "session", 7, kind_.window,
                                 LIBSSH2_CHANNEL_PACKET_DEFAULT, nullptr, 0);
}

void ChannelOp::abandon(SshSession::Impl&) {
  // libssh2_session_free frees the channel; nothing to do but forget it.
  channel_ = nullptr;
  reserved_ = false;
}

bool ChannelOp::on_session_lost(const Error& error, bool may_retry) {
  if (state_ == State::kDone) return false;
  channel_ = nullptr;
  reserved_ = false;
  if (!requested_ && may_retry && kind_.retry_lost) {
    state_ = State::kWaitSlot;
    return true;
  }
  lost(error);
  return false;
}

Step ChannelOp::fail_session(SshSession::Impl& io, int rc, std::string_view stage) {
  io.fatal(session_error(io.session(), rc, what(stage)));
  return Step::kIdle;
}

void ChannelOp::begin_close(Clock::time_point grace) {
  state_ = State::kClosing;
  grace_deadline_ = std::min(grace_deadline_, grace);
}

Step ChannelOp::check_grace(SshSession::Impl& io, Clock::time_point now) {
  if (now < grace_deadline_) return Step::kIdle;
  if (channel_ != nullptr) {
    io.adopt_zombie(channel_, reserved_ && !force_reserved_);  // keeps its slot until freed
    channel_ = nullptr;
    reserved_ = false;
  }
  return abandoned();
}

void ChannelOp::release_slot(SshSession::Impl& io) {
  if (!reserved_) return;
  reserved_ = false;
  if (!force_reserved_) io.release_channel();
}

std::string ChannelOp::what(std::string_view stage) const {
  std::string s(kind_.what);
  s += ": ";
  s += stage;
  return s;
}

}  // namespace pvs::ssh_detail
