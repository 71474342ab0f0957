// Interactive terminals: a program on a pty in a sandbox (PtyChannel, ssh_pty.h) whose output
// feeds a terminal emulator (libvterm), so that an agent reads the screen as a person sees it
// and types text and named keys, while people watch the raw bytes (TerminalWatcher).
//
//   pvs::TerminalOptions o;
//   o.command = "vi /tmp/notes.txt";
//   auto term = pvs::Terminal::open(*sandbox, o);          // or (SshSession&, o)
//   (*term)->send({pvs::InputItem::text("ihello"), pvs::InputItem::key("Escape")});
//   auto w = (*term)->wait({.pattern = std::regex("hello"), .timeout = 5s});
//   pvs::ScreenSnapshot s = (*term)->screen(100);           // lines, cursor, title, scrollback
//   (*term)->close();                                       // hang up; the program's session dies
//
// Thread-safe. Output arrives on the SSH session's I/O thread, which only feeds the emulator and
// copies bytes into each watcher's bounded buffer: a slow reader never slows the terminal (its
// watcher is dropped instead).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/ssh_pty.h"

namespace pvs {

class Sandbox;
class SshSession;

// What the screen shows.
struct ScreenSnapshot {
  int cols = 0, rows = 0;
  std::vector<std::string> lines;      // `rows` lines of UTF-8, trailing spaces trimmed
  int cursor_row = 0, cursor_col = 0;  // 0-based
  bool cursor_visible = true;
  bool alternate_screen = false;        // a full-screen program (vi, less, top) is drawing
  std::string title;                    // set by the program (OSC 0/2); empty if never
  std::vector<std::string> scrollback;  // the last lines scrolled off the top, oldest first
  std::uint64_t output_bytes = 0;       // bytes the program wrote so far
  // The visible lines joined with '\n' (what a wait pattern is matched against).
  std::string text() const;
};

// A libvterm screen fed with program output. Not thread-safe (Terminal serialises it).
class TerminalScreen {
 public:
  TerminalScreen(int cols, int rows, std::size_t scrollback_lines = 1000);
  ~TerminalScreen();
  TerminalScreen(const TerminalScreen&) = delete;
  TerminalScreen& operator=(const TerminalScreen&) = delete;

  void feed(std::string_view bytes);
  void resize(int cols, int rows);
  // The last `scrollback` lines of scrollback are included (0: none).
  ScreenSnapshot snapshot(std::size_t scrollback = 0) const;
  // The bytes a key press sends in the terminal's current modes (application cursor keys, ...).
  // Names: see encode_key(). kInvalidArgument names an unknown key.
  Result<std::string> key(std::string_view name);
  // Bytes the emulator answers to the program's queries (cursor position, device attributes)
  // since the last call.
  std::string take_replies();
  int cols() const { return cols_; }
  int rows() const { return rows_; }
  std::uint64_t output_bytes() const;  // fed so far

  struct State;

 private:
  std::unique_ptr<State> state_;
  int cols_, rows_;
};

// Bytes for a key name in a terminal in default modes (TerminalScreen::key for a live one).
// Names (case-insensitive): Enter, Tab, Escape (Esc), Backspace, Space, Up, Down, Left, Right,
// Home, End, PageUp, PageDown, Insert, Delete, F1..F12; modifier prefixes C- (Ctrl), M- (Alt,
// sent as ESC first) and S- (Shift) on those or on one character: C-c, C-d, C-[, M-x, C-Left,
// S-Tab. kInvalidArgument for anything else, naming it.
Result<std::string> encode_key(std::string_view name);

// One item of input: text typed as is (UTF-8), or a named key.
struct InputItem {
  enum class Kind { kText, kKey };
  Kind kind = Kind::kText;
  std::string value;
  static InputItem text(std::string t) { return {Kind::kText, std::move(t)}; }
  static InputItem key(std::string k) { return {Kind::kKey, std::move(k)}; }
};

struct TerminalOptions {
  std::string command;  // empty: the login shell
  int cols = 80, rows = 24;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
  std::size_t scrollback_lines = 1000;
  std::size_t max_pending_input = 1 << 20;
};

// What ends a wait: the pattern matched the screen, the output was quiet for `quiet`, the
// program ended, or the timeout passed (checked in that order).
struct WaitCondition {
  std::optional<std::regex> pattern;   // matched (regex_search) against ScreenSnapshot::text()
  std::chrono::milliseconds quiet{0};  // 0: not a condition
  std::chrono::milliseconds timeout{10000};
};

enum class WaitOutcome { kMatched, kQuiet, kExited, kTimeout };
std::string_view to_string(WaitOutcome outcome);  // "matched", "quiet", "exited", "timeout"

struct WaitResult {
  WaitOutcome outcome = WaitOutcome::kTimeout;
  std::chrono::milliseconds waited{0};
  std::string match;  // the text the pattern matched
};

// A reader of the raw output (a WebSocket, a log). Bytes queue up to a bound; past it the
// watcher is dropped (dropped() true, no more bytes), never the terminal slowed.
class TerminalWatcher {
 public:
  explicit TerminalWatcher(std::size_t max_buffered) : max_(max_buffered) {}
  // Waits up to `timeout` for bytes, the end or a drop; returns the bytes queued (maybe none).
  std::string next(std::chrono::milliseconds timeout);
  bool dropped() const;
  // The program's exit once it ended (and every byte before it was taken).
  std::optional<PtyExit> ended() const;
  // Wakes next() and ends this watcher (its reader is gone).
  void cancel();
  bool cancelled() const;

  // For the terminal.
  void push(std::string_view bytes);
  void finish(const PtyExit& exit);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string buffer_;
  std::size_t max_;
  bool dropped_ = false;
  bool cancelled_ = false;
  std::optional<PtyExit> exit_;
};

// How the terminal is doing, as a value.
struct TerminalState {
  bool running = true;
  std::optional<PtyExit> exit;
  int cols = 0, rows = 0;
  std::chrono::steady_clock::time_point last_activity;  // input or output
  std::uint64_t output_bytes = 0;
  std::uint64_t input_bytes = 0;
  int watchers = 0;
};

class Terminal {
 public:
  using Opener = std::function<Result<std::unique_ptr<PtyChannel>>(PtyOptions)>;
  static Result<std::shared_ptr<Terminal>> open(const Opener& opener, TerminalOptions options);
  static Result<std::shared_ptr<Terminal>> open(Sandbox& sandbox, TerminalOptions options);
  static Result<std::shared_ptr<Terminal>> open(SshSession& ssh, TerminalOptions options);
  ~Terminal();  // close()

  // Encodes every item first (an unknown key fails the whole call, nothing sent), then writes.
  Status send(const std::vector<InputItem>& items);
  Status write(std::string_view raw);  // bytes as they are (a WebSocket's input)
  Status resize(int cols, int rows);
  ScreenSnapshot screen(std::size_t scrollback = 0) const;
  WaitResult wait(const WaitCondition& condition) const;
  // A new raw-output watcher (bytes from now on; the terminal's first watcher also gets what
  // the program wrote before anyone watched, its last 1 MiB). Keep the shared_ptr; cancel()
  // when done.
  std::shared_ptr<TerminalWatcher> watch(std::size_t max_buffered);
  // Whether the emulator answers the program's queries itself (default true); a client that
  // answers them (an interactive WebSocket with a real terminal) turns this off meanwhile.
  void set_answer_queries(bool on);
  TerminalState state() const;
  void close();  // hangs up; idempotent

  struct Core;

 private:
  Terminal(std::shared_ptr<Core> core, std::unique_ptr<PtyChannel> pty);
  std::shared_ptr<Core> core_;
  std::unique_ptr<PtyChannel> pty_;
};

}  // namespace pvs
