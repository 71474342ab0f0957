#include "policy/typed_line.h"

namespace pvs::service {
namespace {

bool is_continuation(unsigned char c) {
  return (c & 0xc0) == 0x80;
}

void erase_char(std::string& line) {
  while (!line.empty() && is_continuation(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (!line.empty()) line.pop_back();
}

void erase_word(std::string& line) {  // as readline's unix-word-rubout: spaces, then a word
  while (!line.empty() && line.back() == ' ') line.pop_back();
  while (!line.empty() && line.back() != ' ') line.pop_back();
}

// Whether an escape sequence (ESC and what followed so far) is complete: ESC x (Alt-x), ESC O x
// (SS3), ESC [ params final (CSI, final byte 0x40-0x7e), ESC ] ... BEL or ESC \ (OSC).
bool escape_complete(const std::string& seq) {
  if (seq.size() < 2) return false;
  unsigned char kind = static_cast<unsigned char>(seq[1]);
  if (kind == '[') {
    if (seq.size() < 3) return false;
    unsigned char last = static_cast<unsigned char>(seq.back());
    return last >= 0x40 && last <= 0x7e;
  }
  if (kind == 'O') return seq.size() >= 3;
  if (kind == ']') return seq.back() == '\a' || (seq.size() >= 4 && seq.ends_with("\x1b\\"));
  return true;
}

}  // namespace

TypedLine::Next TypedLine::after(std::string_view bytes) const {
  Next n;
  n.rest = line_;
  n.escape_seq = escape_seq_;
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    if (!n.escape_seq.empty()) {
      n.escape_seq += ch;
      // A runaway sequence (no final byte) ends after 64 bytes.
      if (escape_complete(n.escape_seq) || n.escape_seq.size() > 64) n.escape_seq.clear();
      continue;
    }
    switch (c) {
      case '\r':
      case '\n':
        n.lines.push_back(std::move(n.rest));
        n.rest.clear();
        continue;
      case 0x1b: n.escape_seq.assign(1, ch); continue;
      case 0x7f:
      case 0x08: erase_char(n.rest); continue;
      case 0x17: erase_word(n.rest); continue;
      case 0x03:
      case 0x15: n.rest.clear(); continue;
      default: break;
    }
    if (c < 0x20 && c != '\t') continue;  // other control bytes: not part of the line
    n.rest += ch;
    if (n.rest.size() > kMaxLine) n.rest.erase(0, n.rest.size() - kMaxLine);
  }
  return n;
}

void TypedLine::commit(Next next) {
  line_ = std::move(next.rest);
  escape_seq_ = std::move(next.escape_seq);
}

void TypedLine::clear() {
  line_.clear();
  escape_seq_.clear();
}

}  // namespace pvs::service
