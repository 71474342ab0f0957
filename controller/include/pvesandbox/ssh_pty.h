// PtyChannel: one interactive program on a pseudo-terminal, over an SshSession's connection.
//
//   pvs::PtyOptions o;
//   o.command = "";                                  // the login shell
//   o.cols = 120; o.rows = 40;
//   o.on_output = [](std::string_view bytes) { ... };  // on the session's I/O thread
//   o.on_exit = [](const pvs::PtyExit& e) { ... };     // once, on the I/O thread
//   auto pty = ssh.open_pty(std::move(o));            // returns once the program runs
//   (*pty)->write("ls\r");
//   (*pty)->resize(100, 30);                          // window-change
//   pty.reset();                                      // hangs up (see close())
//
// The channel is driven by the session's I/O thread like an exec (docs/ssh.md): it asks for a
// pty ("xterm-256color" by default), then execs `$SHELL -c` with the command, or the user's login
// shell. write() and resize() queue and wake that thread; output reaches on_output as it arrives.
// The remote program runs as its own SSH session (sshd gives each pty its Unix session): close()
// hangs up the channel (SIGHUP through the pty) and a side exec sends SIGHUP, then SIGKILL after
// two seconds, to every process left in that Unix session (`pkill -s`). The exit status arrives
// in on_exit; a dropped connection (or SshSession::close()) ends the channel with an error.
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

// How a pty program ended.
struct PtyExit {
  int exit_code = -1;    // -1 when it died of a signal or the channel was lost
  std::string signal;    // "HUP", "KILL", ... (no "SIG" prefix); empty if it exited
  std::string error;     // not empty: the connection or channel failed (the message)
  bool hung_up = false;  // ended by close()
};

struct PtyOptions {
  std::string command;  // empty: the user's login shell ($SHELL -l)
  int cols = 80;        // 1..1000
  int rows = 24;        // 1..1000
  std::string term = "xterm-256color";
  // Exported before the command runs; names [A-Za-z_][A-Za-z0-9_]*.
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;  // empty: the login directory
  // Called on the session's I/O thread: keep them short, never call back into the SshSession.
  std::function<void(std::string_view)> on_output;
  std::function<void(const PtyExit&)> on_exit;
  // Input bytes queued and not yet sent beyond this: write() fails with kTooLarge.
  std::size_t max_pending_input = 1 << 20;
};

class PtyChannel {
 public:
  class Shared;  // the state shared with the I/O thread (ssh_pty.cc)
  PtyChannel(std::shared_ptr<Shared> shared, std::function<void()> wake);
  ~PtyChannel();  // close()
  PtyChannel(const PtyChannel&) = delete;
  PtyChannel& operator=(const PtyChannel&) = delete;

  // Queues bytes for the program's terminal. kClosed once it ended, kTooLarge when more than
  // max_pending_input bytes wait.
  Status write(std::string_view bytes);
  // Sends window-change; kInvalidArgument outside 1..1000, kClosed once it ended.
  Status resize(int cols, int rows);
  // Hangs up and kills the program's Unix session (see above); returns at once. Idempotent.
  void close();
  bool running() const;
  std::optional<PtyExit> exit() const;
  // Waits until the program ended, at most `timeout`; its exit, or nullopt.
  std::optional<PtyExit> wait(std::chrono::milliseconds timeout) const;

 private:
  std::shared_ptr<Shared> shared_;
  std::function<void()> wake_;
};

namespace ssh_detail {
// The command line sent for a pty: marker with the Unix session id, cwd, env, then the command
// or the login shell.
Result<std::string> build_pty_command(const PtyOptions& options);
}  // namespace ssh_detail

}  // namespace pvs
