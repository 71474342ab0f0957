// The session's watchdog: one long-lived exec channel per connection whose shell guards the
// timed commands of that connection for when the controller is gone (docs/ssh.md).
//
// While the controller lives it kills a command at its timeout itself (a second channel runs
// `kill -- -PGID`). The watchdog is for when it cannot: the controller died, or the connection
// broke. Each timed command's login shell prints its pid (= its process group) first; the exec
// op registers it here ("+ PGID GUARD"), and lets it go when its channel closes ("- PGID").
// The script answers "+" for each registration it holds: sshd drops channel data it has not
// yet written to the script when the connection ends, so only an answered one is guarded.
// The remote script only reads those lines, with no process forked per command; at EOF (the
// connection is gone) it kills every registered group whose leader still runs GUARD seconds
// after the leader's start, polling once a second, and exits when none is left.
//
// A pid can be reused: the script records the leader's start time (field 22 of
// /proc/PID/stat, clock ticks since boot) at registration and kills only a group whose leader
// has that same start time. "Now" on the same clock is the start time of a subshell it forks
// (`$(...)`), once per second after EOF: /proc/uptime is not that clock in a container (lxcfs
// gives the container's own uptime there). Ticks are USER_HZ, 100 on Linux.
#include <algorithm>
#include <memory>
#include <string>

#include "channel_op.h"
#include "pvesandbox/common/log.h"

namespace pvs {
namespace ssh_detail {

std::string_view session_watchdog_script() {
  // w PID: S = the start time of PID if it leads its own process group, else fails.
  static constexpr std::string_view kScript = R"(# pve-sandbox: the session's watchdog
exec 2>/dev/null;trap '' HUP PIPE
w(){ p=$1;S=;read -r S <"/proc/$p/stat"||return 1;S=${S##*) };set -- $S;[ "$3" = "$p" ]||return 1;S=${20};}
L=
while read -r o p g;do
case $o in
+)w "$p" 2>/dev/null&&L="$L $p:$S:$g"&&echo +;;
-)N=;for e in $L;do case $e in "$p":*);;*)N="$N $e";;esac;done;L=$N;;
esac
done
while [ -n "$L" ];do
T=$(read -r X </proc/self/stat;X=${X##*) };set -- $X;echo "${20}")
N=
for e in $L;do
p=${e%%:*};r=${e#*:};t=${r%%:*};g=${r#*:}
w "$p" 2>/dev/null&&[ "$S" = "$t" ]||continue
if [ $((t+g*100)) -le "$T" ];then kill -s KILL -- "-$p" 2>/dev/null||kill -9 "-$p" 2>/dev/null;else N="$N $e";fi
done
L=$N
[ -z "$L" ]||sleep 1
done
)";
  return kScript;
}

namespace {

using Step = ChannelOp::Step;

constexpr auto kWatchdogCloseGrace = std::chrono::seconds(5);

}  // namespace

class WatchdogOp : public ChannelOp {
 public:
  WatchdogOp()
      : ChannelOp({.what = "ssh watchdog",
                   .window = 64 * 1024,
                   .retry_refused = true,
                   .retry_lost = false,
                   .gives_way = true}) {}

  // Closing or closed: registrations go to the next one.
  bool finished() const { return state_ >= State::kClosing; }
  void yield() { yield_ = true; }

  Clock::time_point deadline() const override {
    if (refused()) return retry_at();
    if (state_ == State::kClosing || state_ == State::kWaitClosed) return grace_deadline_;
    return Clock::time_point::max();
  }

 private:
  std::optional<Step> before_slot(SshSession::Impl&, Clock::time_point) override {
    if (yield_) return done();  // never opened: nothing to give up
    return std::nullopt;
  }

  Step start(SshSession::Impl& io) override {
    const std::string_view script = session_watchdog_script();
    int rc = libssh2_channel_process_startup(channel_, "exec", 4, script.data(),
                                             static_cast<unsigned>(script.size()));
    if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
    if (rc != 0) {
      Error e = session_error(io.session(), rc, "ssh watchdog: exec request");
      if (is_fatal_session_error(rc)) {
        io.fatal(e);
        return Step::kIdle;
      }
      log::warn(e.message);
      begin_close(Clock::now() + kWatchdogCloseGrace);
      return Step::kProgress;
    }
    state_ = State::kRunning;
    return Step::kProgress;
  }

  Step run(SshSession::Impl& io, Clock::time_point now) override {
    if (yield_) {
      begin_close(now + kWatchdogCloseGrace);
      return Step::kProgress;
    }
    bool progress = false;
    if (out_.empty()) io.take_watch_lines(&out_);
    while (off_ < out_.size()) {
      ssize_t w = libssh2_channel_write(channel_, out_.data() + off_, out_.size() - off_);
      if (w == LIBSSH2_ERROR_EAGAIN) break;
      if (w < 0) {
        if (is_fatal_session_error(static_cast<int>(w))) {
          return fail_session(io, static_cast<int>(w), "write");
        }
        begin_close(now + kWatchdogCloseGrace);  // the watchdog is gone: the next
        return Step::kProgress;                  // registration starts another
      }
      off_ += static_cast<std::size_t>(w);
      progress = true;
    }
    if (off_ == out_.size() && !out_.empty()) {
      out_.clear();
      off_ = 0;
    }
    // It prints one "+" per registration it holds; anything else is read and dropped, so the
    // window stays open.
    char buf[1024];
    for (int stream = 0; stream < 2; ++stream) {
      for (;;) {
        ssize_t r = libssh2_channel_read_ex(channel_, stream, buf, sizeof buf);
        if (r > 0) {
          if (stream == 0)
            io.count_watched(static_cast<std::uint64_t>(std::count(buf, buf + r, '+')));
          progress = true;
          continue;
        }
        // The connection's end shows here first when nothing else runs on it (a hot pool's
        // idle member whose container stopped): it must not be swallowed.
        if (r < 0 && is_fatal_session_error(static_cast<int>(r))) {
          return fail_session(io, static_cast<int>(r), "read");
        }
        break;
      }
    }
    if (libssh2_channel_eof(channel_) != 0) {
      log::warn("ssh watchdog: the watchdog's shell ended; the next registration starts one");
      begin_close(now + kWatchdogCloseGrace);
      return Step::kProgress;
    }
    return progress ? Step::kProgress : Step::kIdle;
  }

  Step open_failed(Error e) override {
    log::warn(e.message + "; timed commands of this connection have no remote guard for now");
    return done();
  }
  Step freed(SshSession::Impl&) override { return done(); }
  Step abandoned() override { return done(); }
  void lost(const Error&) override { state_ = State::kDone; }

  Step done() {
    state_ = State::kDone;
    return Step::kDone;
  }

  bool yield_ = false;
  std::string out_;  // registrations being written
  std::size_t off_ = 0;
};

}  // namespace ssh_detail

void SshSession::Impl::ensure_watchdog() {
  if (watchdog_ && !watchdog_->finished()) return;
  watchdog_ = std::make_shared<ssh_detail::WatchdogOp>();
  spawn(watchdog_);
}

void SshSession::Impl::watch(long pgid, int guard_seconds) {
  watch_queue_.emplace_back(pgid, guard_seconds);
  ensure_watchdog();
}

void SshSession::Impl::unwatch(long pgid) {
  // Not yet sent: never sent. Sent: the watchdog forgets it (one that was replaced meanwhile
  // finds the leader gone, or a newer start time under its pid, and does nothing).
  auto queued = std::find_if(watch_queue_.begin(), watch_queue_.end(),
                             [&](const auto& w) { return w.first == pgid && w.second > 0; });
  if (queued != watch_queue_.end()) {
    watch_queue_.erase(queued);
    return;
  }
  if (watchdog_ && !watchdog_->finished()) watch_queue_.emplace_back(pgid, 0);
}

void SshSession::Impl::yield_watchdog() {
  if (watchdog_ && !watchdog_->finished()) watchdog_->yield();
}

void SshSession::Impl::resume_watchdog() {
  // Not on the watchdog's own release: it gave way to a command that waits for that channel.
  const bool waiting = std::any_of(watch_queue_.begin(), watch_queue_.end(),
                                   [](const auto& w) { return w.second > 0; });
  if (waiting) ensure_watchdog();
}

void SshSession::Impl::take_watch_lines(std::string* out) {
  for (const auto& [pgid, guard] : watch_queue_) {
    *out += guard > 0 ? "+ " + std::to_string(pgid) + " " + std::to_string(guard) + "\n"
                      : "- " + std::to_string(pgid) + "\n";
  }
  watch_queue_.clear();
}

}  // namespace pvs
