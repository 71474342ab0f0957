// PtyChannel: an interactive command on a pseudo-terminal, on one channel of an SshSession.
//
//   pvs::PtyOptions o;                       // the login shell, 80x24, TERM=xterm-256color
//   pvs::PtyCallbacks cb;
//   cb.on_output = [](std::string_view bytes) { ... };    // on the session's I/O thread
//   cb.on_exit = [](const pvs::PtyExit& e) { ... };       // once
//   auto pty = ssh.open_pty(o, cb);
//   (*pty)->write("ls\r");
//   (*pty)->resize(50, 132);
//   (*pty)->close();                         // hang up
//
// The channel is driven by the session's I/O thread like an exec (see ssh_session.h): output is
// read as it comes and handed to on_output; writes and resizes are queued from any thread.
// A PTY merges the program's stdout and stderr into one stream.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs {

struct PtyOptions {
  // Run through the login shell ($SHELL -c), like an exec. Empty: the login shell itself
  // (exec "$SHELL" -l).
  std::string command;
  std::string term = "xterm-256color";
  int cols = 80;  // 1..1000
  int rows = 24;  // 1..1000
  // Exported before the command runs (sshd usually refuses env requests, so the command line
  // exports them). Names must match [A-Za-z_][A-Za-z0-9_]*.
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;  // empty: the login directory
};

struct PtyExit {
  int exit_code = -1;          // -1: killed by a signal, or the channel was lost
  std::string exit_signal;     // "HUP", "KILL", ... (no "SIG" prefix); empty if exited normally
  std::optional<Error> error;  // the connection or the channel failed (exit_code is -1)
};

struct PtyCallbacks {
  // Each chunk of output, in order, on the session's I/O thread. Keep it short; it may call
  // PtyChannel::write/resize (they only queue) but nothing that waits for the session.
  std::function<void(std::string_view)> on_output;
  // Exactly once, after the last on_output (also on a failure after the open succeeded).
  std::function<void(const PtyExit&)> on_exit;
};

class PtyChannel {
 public:
  ~PtyChannel();  // hangs up without waiting (callbacks may still run briefly)
  PtyChannel(const PtyChannel&) = delete;
  PtyChannel& operator=(const PtyChannel&) = delete;

  // Queues bytes for the program's terminal. kConflict once the channel has ended.
  Status write(std::string_view bytes);
  // Queues a window-change (the program gets SIGWINCH). kInvalidArgument out of 1..1000.
  Status resize(int rows, int cols);
  // Hangs up: closes the channel (sshd closes the PTY; the session gets SIGHUP) and waits up
  // to `grace` for it to be gone (on_exit has run then). Idempotent.
  void close(std::chrono::milliseconds grace = std::chrono::milliseconds(3000));
  bool ended() const;

  struct Shared;
  explicit PtyChannel(std::shared_ptr<Shared> shared);

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace pvs
