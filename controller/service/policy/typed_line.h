// The line a person or an agent is typing into a terminal, as a shell's line editor would end up
// with it, so that the policy can judge terminal input a whole line at a time (docs/policy.md):
// "rm -r" in one call and "f /" plus Enter in the next are judged together as "rm -rf /".
//
//   TypedLine typed;                          // one per terminal
//   auto next = typed.after("ls -l\r");       // next.lines == {"ls -l"}, next.rest == ""
//   ...judge next.lines...; typed.commit(std::move(next));   // only once the input was sent
//
// Modelled exactly (bash's readline with its default emacs bindings, checked against bash 5.2):
// printable text (UTF-8), Enter (CR, LF, and C-o, which runs the line too: the line is
// complete), Backspace (DEL, BS: one character), C-w (a word), C-u and C-c (the whole line),
// C-d, C-g and C-l (no change to a line whose cursor is at its end), F1-F4 (ESC O P..S,
// unbound). Anything else changes the line in ways this model does not follow: cursor and
// history keys, completion (Tab), yank, undo, quoted insert, Alt-x (readline's meta-x), ESC
// before a control byte (ESC CR switches to vi mode and runs nothing), any other escape
// sequence (readline ends an unbound one where its key map ends: ESC [ 1 2 r inserts "r"), an
// escape sequence left unfinished. Such input is `understood = false`; the controller refuses
// it wherever terminal.input is judged (docs/policy.md), so what the shell runs is always what
// the policy judged.
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
    // False when some byte's effect on the line is not modelled (above); what follows it is
    // then a best guess: lines and rest are not what the shell has.
    bool understood = true;
    std::string not_understood;  // the first such key, as a C string literal ("\\x1b[A")
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

// Input to a pipe rather than a terminal (E2B's stdin, process.Process/SendInput): nothing
// edits a line there, so its reader gets the lines exactly as sent, each ended by LF. The
// input is understood when it is whole lines of text: printable bytes (UTF-8) and Tab, each
// line ended by LF (the input ends in LF, or is empty). A line left unended would be continued
// by the next input, after this one was judged, and a control byte (CR, ESC, C-d, ...) means
// what the reader makes of it: both are not understood (`not_understood` names the first).
TypedLine::Next piped_lines(std::string_view bytes);

}  // namespace pvs::service
