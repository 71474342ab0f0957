// Internal: a terminal emulator (Debian's libvterm) that PTY output is fed into, rendered as
// text the way a person sees the terminal.
//
//   pvs::terminal::Screen s(24, 80, /*scrollback_limit=*/1000);
//   s.feed("hello\r\nworld");
//   pvs::TerminalScreen view = s.snapshot(/*scrollback_lines=*/0);  // lines {"hello", "world"}
//
// Not thread-safe: the owner (Terminal) serialises access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

#include "pvesandbox/terminal.h"

namespace pvs::terminal {

class Screen {
 public:
  // rows, cols: clamped to [1, 1000]. scrollback_limit: lines kept that scrolled off the top.
  Screen(int rows, int cols, std::size_t scrollback_limit);
  ~Screen();
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  // Interprets bytes as a terminal would (UTF-8, xterm-like escape sequences).
  void feed(std::string_view bytes);
  // New size (clamped like the constructor's). Lines that no longer fit go to the scrollback.
  void resize(int rows, int cols);

  int rows() const { return rows_; }
  int cols() const { return cols_; }

  // The visible screen (one string per row, trailing blanks trimmed), cursor, title and the
  // last `scrollback_lines` lines of the scrollback (oldest first).
  TerminalScreen snapshot(std::size_t scrollback_lines) const;

  // Bytes the emulator wants to send back to the program (answers to queries such as "where is
  // the cursor" or "what terminal are you"); cleared by the call.
  std::string take_replies();

  struct Callbacks;  // the libvterm callbacks (screen.cc)

 private:
  std::string render_row(int row) const;

  struct VTermDeleter {
    void operator()(void* vt) const;
  };
  std::unique_ptr<void, VTermDeleter> vt_;  // VTerm*
  void* screen_ = nullptr;                  // VTermScreen*, owned by vt_
  int rows_ = 0;
  int cols_ = 0;
  std::size_t scrollback_limit_;
  std::deque<std::string> scrollback_;
  std::string title_;
  std::string replies_;
  bool cursor_visible_ = true;
  bool alt_screen_ = false;
  std::uint64_t bytes_fed_ = 0;
};

// The UTF-8 encoding of one code point (invalid ones become U+FFFD).
void append_utf8(std::string& out, std::uint32_t cp);

}  // namespace pvs::terminal
