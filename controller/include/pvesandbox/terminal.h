// Terminal: an interactive program in a sandbox, on a PTY over the sandbox's SSH session, with
// a terminal emulator (libvterm) that renders its output as a person would see it.
//
//   pvs::TerminalOptions o;
//   o.command = "";  // the login shell
//   auto t = pvs::Terminal::open(ssh, o);
//   (*t)->input({pvs::TerminalInput::text("echo hi"), pvs::TerminalInput::key("Enter")});
//   auto w = (*t)->wait({.pattern = "^hi$", .timeout = std::chrono::seconds(5)});
//   if (w && w->matched) use(w->screen.lines);
//   (*t)->close();  // hangs up; the session's processes get SIGHUP
//
// Thread-safe: input, screen, wait, resize and close may be called from any thread; several
// threads may wait at once. Output is read by the SSH session's I/O thread and fed to the
// emulator as it arrives, whether anyone is looking or not.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs {

class SshSession;

// What the terminal shows, as text.
struct TerminalScreen {
  int rows = 0;
  int cols = 0;
  // One entry per row, top to bottom, UTF-8, trailing blanks trimmed (a wide character takes
  // two columns but is one character here).
  std::vector<std::string> lines;
  int cursor_row = 0;  // 0-based
  int cursor_col = 0;
  bool cursor_visible = true;
  std::string title;        // set by the program (OSC 0 / OSC 2); empty if never set
  bool alt_screen = false;  // a full-screen program (vi, top, less) uses the alternate screen
  // The last lines that scrolled off the top of the primary screen, oldest first (as many as
  // asked for and kept).
  std::vector<std::string> scrollback;
  std::uint64_t output_bytes = 0;  // bytes of output so far (changes whenever output arrives)
};

// One item of input: literal text (sent as is, UTF-8) or a named key.
//
// Key names: Enter, Tab, Escape, Backspace, Space, Up, Down, Right, Left, Home, End, PageUp,
// PageDown, Insert, Delete, F1..F12 (xterm sequences), C-a..C-z (control characters; C-c is
// interrupt, C-d end of input), C-@, C-[, C-], C-\, C-^, C-_ and M-<char> (Escape, then the
// character; M-x, M-Enter ...). Names are case-sensitive as written here, except that the
// letter after C- may be upper case.
struct TerminalInput {
  static TerminalInput text(std::string t) { return {std::move(t), {}}; }
  static TerminalInput key(std::string k) { return {{}, std::move(k)}; }
  std::string text_;  // used when key_ is empty
  std::string key_;
};

// The bytes of a named key, or kInvalidArgument naming the unknown key.
Result<std::string> terminal_key_bytes(std::string_view name);
// The bytes of a list of input items (fails on the first unknown key; nothing is sent then).
Result<std::string> encode_terminal_input(const std::vector<TerminalInput>& items);

struct TerminalOptions {
  // Run through the login shell ($SHELL -c). Empty: the user's login shell itself.
  std::string command;
  int cols = 80;  // 1..1000
  int rows = 24;  // 1..1000
  // Exported before the command runs (names [A-Za-z_][A-Za-z0-9_]*). TERM is xterm-256color.
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;  // empty: the login directory
  std::size_t scrollback_lines = 1000;
  // Raw PTY output as it arrives (for watchers), on the SSH session's I/O thread. Keep it short
  // and never call back into the Terminal or the SshSession from it.
  std::function<void(std::string_view)> on_output;
};

// What to wait for. Whatever comes first ends the wait: the pattern matches the screen, output
// has been quiet for `quiet`, the program exited, or `timeout` passed.
struct TerminalWait {
  // std::regex ECMAScript, multiline: searched in the visible lines joined by '\n' (^ and $
  // match at line ends). Empty: no pattern.
  std::string pattern;
  // 0: not used. Quiet means no output for this long, counted from the later of the call and
  // the last output.
  std::chrono::milliseconds quiet{0};
  std::chrono::milliseconds timeout{10000};
  std::size_t scrollback_lines = 0;  // put into the returned screen
};

struct TerminalWaitResult {
  bool matched = false;    // the pattern matched
  bool quiet = false;      // output was quiet for TerminalWait::quiet
  bool exited = false;     // the program has ended
  bool timed_out = false;  // none of the above before the timeout
  TerminalScreen screen;   // the screen when the wait ended
};

class Terminal {
 public:
  // Opens a PTY channel on `ssh` and starts the command on it. `ssh` must outlive the
  // Terminal. Errors: kInvalidArgument (size, env name), the SSH session's errors.
  static Result<std::unique_ptr<Terminal>> open(SshSession& ssh, TerminalOptions options);
  ~Terminal();  // close()
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  // Sends the items in order. kInvalidArgument for an unknown key (nothing sent), kConflict
  // once the program has ended.
  Status input(const std::vector<TerminalInput>& items);
  // Sends raw bytes (what a person's terminal would send).
  Status write(std::string_view bytes);
  TerminalScreen screen(std::size_t scrollback_lines = 0) const;
  // Error: kInvalidArgument for a pattern std::regex refuses.
  Result<TerminalWaitResult> wait(const TerminalWait& what);
  // Tells the program the new size (SIGWINCH) and resizes the emulator.
  Status resize(int rows, int cols);
  // Hangs up: the channel is closed, sshd closes the PTY and the session's processes get
  // SIGHUP. Waits (up to a few seconds) for the channel to be gone. Idempotent.
  void close();

  bool exited() const;
  // Once exited: the exit status (-1 if killed by a signal, or the connection was lost).
  std::optional<int> exit_code() const;
  std::string exit_signal() const;  // "HUP", "KILL", ... if killed by a signal

  struct State;

 private:
  explicit Terminal(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace pvs
