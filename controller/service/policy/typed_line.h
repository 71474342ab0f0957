// The line a person or an agent is typing into a terminal, as a shell's line editor would end up
// with it, so that the policy can judge terminal input a whole line at a time (docs/policy.md):
// "rm -r" in one call and "f /" plus Enter in the next are judged together as "rm -rf /".
//
//   TypedLine typed;                          // one per terminal
//   auto next = typed.after("ls -l\r");       // next.lines == {"ls -l"}, next.rest == ""
//   ...judge next.lines...; typed.commit(std::move(next));   // only once the input was sent
//
// Understood: printable text (UTF-8), Enter (CR or LF: the line is complete), Backspace (DEL,
// BS: one character), C-w (a word), C-u and C-c (the whole line). Escape sequences (arrows,
// function keys, Alt-x) and other control bytes are skipped: what the shell makes of them
// (history, completion, cursor editing) is not modelled, a known limit docs/policy.md states.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace pvs::service {

class TypedLine {
 public:
  // A line longer than this keeps its last kMaxLine bytes.
  static constexpr std::size_t kMaxLine = 64 << 10;

  struct Next {
    std::vector<std::string> lines;  // lines the input completes, in order
    std::string rest;                // the line still being typed afterwards
    std::string escape_seq;          // an unfinished escape sequence at the end
  };

  // The state after `bytes` were typed; this one is unchanged.
  Next after(std::string_view bytes) const;
  void commit(Next next);
  // Forget the line (it was refused, and the terminal got C-u).
  void clear();
  const std::string& current() const { return line_; }

 private:
  std::string line_;
  std::string escape_seq_;  // an escape sequence split across calls
};

}  // namespace pvs::service
