// Internal: the state machine every channel operation shares (exec and pty), driven
// non-blockingly by the session's I/O thread.
//
//   wait for a channel slot -> open (session-wide single flight) -> start (the op's requests)
//   -> running (the op's own I/O) -> close -> wait closed (exit status) -> free -> done
//
// The base owns the channel and its slot: a spare channel or a reserved slot, the single-flight
// open, a refused open (retried when the kind asks for it), the close, the exit status, the free,
// a channel that does not close within its grace (handed to the zombie list), and a lost session
// (retried while nothing was sent). The op supplies its requests, its I/O and its result.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "session_impl.h"

namespace pvs::ssh_detail {

// The pid marker a command's shell prints first (ssh_util's wrapping): "\036pvs:<pid>\036",
// which must appear within the first kMarkerWindow bytes of its output.
inline constexpr std::string_view kMarkerStart = "\036pvs:";
inline constexpr std::size_t kMarkerWindow = 4096;

class ChannelOp : public SshSession::Impl::Op {
 public:
  Step step(SshSession::Impl& io) final;
  void abandon(SshSession::Impl& io) final;
  bool on_session_lost(const Error& error, bool may_retry) final;

 protected:
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
  struct Kind {
    std::string_view what;       // "ssh exec": the prefix of its errors
    unsigned window;             // the channel's receive window
    bool internal = false;       // takes no spare and may exceed the channel limit (a kill)
    bool retry_refused = false;  // a refused open waits for a slot to free up, not fails
    bool spare = true;           // may start on a spare "session" channel (a tunnel may not)
    bool retry_lost = true;      // a lost session before any request: retried on a new one
    // At the channel limit it waits without taking an idle SFTP instance's channel, and gives
    // its own up when a command waits for one (the session's watchdog).
    bool gives_way = false;
    // Appended to an open's error that is neither fatal nor retried.
    std::string_view open_hint = " (sshd MaxSessions reached?)";
  };
  explicit ChannelOp(Kind kind) : kind_(kind) {}

  // ---- what the op supplies ----
  // One non-blocking attempt to open the channel: nullptr with the session's last errno set
  // (EAGAIN: call again). The default is a "session" channel; a tunnel opens direct-tcpip.
  // libssh2 keeps an open's state in the session: only the opener (single flight) calls this.
  virtual LIBSSH2_CHANNEL* open_channel(SshSession::Impl& io);
  // In kWaitSlot, before a slot is sought: the step that ends the wait (a deadline passed), or
  // nullopt to go on.
  virtual std::optional<Step> before_slot(SshSession::Impl& io, Clock::time_point now) = 0;
  // On the open channel: the op's requests (pty, exec). Sets kRunning, or begin_close().
  virtual Step start(SshSession::Impl& io) = 0;
  virtual Step run(SshSession::Impl& io, Clock::time_point now) = 0;
  // The channel could not be opened (neither a fatal session error nor a retried refusal).
  virtual Step open_failed(Error e) = 0;
  // Before each wait for the close (pty: output written right before the end still counts).
  virtual void while_closing(SshSession::Impl&) {}
  // The channel is freed (exit_code_, exit_signal_ are set): deliver the result.
  virtual Step freed(SshSession::Impl& io) = 0;
  // The channel did not close within the grace and went to the zombie list: end the op.
  virtual Step abandoned() = 0;
  // The session is gone and the op is not retried: deliver `error` (no libssh2 calls).
  virtual void lost(const Error& error) = 0;

  // ---- for the op ----
  // Reports a fatal session error of `rc` during `what` ("read") and returns kIdle.
  Step fail_session(SshSession::Impl& io, int rc, std::string_view what);
  // Moves to kClosing; past `grace` (or the grace set before) the channel is abandoned.
  void begin_close(Clock::time_point grace = Clock::time_point::max());
  // kIdle, or after the grace: the channel goes to the zombie list and abandoned() ends the op.
  Step check_grace(SshSession::Impl& io, Clock::time_point now);
  // Waiting for a slot after a refused open: until a channel is released, or this.
  bool refused() const { return refused_; }
  Clock::time_point retry_at() const { return retry_at_; }

  State state_ = State::kWaitSlot;
  LIBSSH2_CHANNEL* channel_ = nullptr;
  bool requested_ = false;  // a request went out: a lost session is not retried
  int exit_code_ = -1;
  std::string exit_signal_;
  Clock::time_point grace_deadline_ = Clock::time_point::max();

 private:
  std::optional<Step> wait_slot(SshSession::Impl& io, Clock::time_point now);
  std::optional<Step> open(SshSession::Impl& io);
  void release_slot(SshSession::Impl& io);
  std::string what(std::string_view stage) const;

  Kind kind_;
  bool reserved_ = false;
  bool force_reserved_ = false;
  bool refused_ = false;
  std::uint64_t refused_epoch_ = 0;
  int lag_retries_ = 0;
  Clock::time_point retry_at_{};
};

}  // namespace pvs::ssh_detail
