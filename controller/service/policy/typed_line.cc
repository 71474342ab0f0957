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

// An escape sequence so far: a key that changes nothing (F1-F4), unfinished, or complete and
// not modelled (its end as ECMA-48 has it: CSI at a final byte, SS3 after one byte, ESC x).
enum class Escape { kInert, kPending, kOther };

Escape classify(std::string_view seq) {
  if (seq.size() < 2) return Escape::kPending;
  if (seq.size() > 64) return Escape::kOther;  // a runaway sequence
  auto last = static_cast<unsigned char>(seq.back());
  if (last < 0x20 || last >= 0x7f) return Escape::kOther;  // a control byte ends it
  if (seq[1] == 'O') {
    if (seq.size() == 2) return Escape::kPending;
    return last >= 'P' && last <= 'S' ? Escape::kInert : Escape::kOther;
  }
  if (seq[1] == '[' && (seq.size() == 2 || last < 0x40)) return Escape::kPending;
  return Escape::kOther;
}

std::string visible(std::string_view bytes) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

void not_modelled(TypedLine::Next& n, std::string_view key) {
  if (!n.understood) return;
  n.understood = false;
  n.not_understood = visible(key);
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
      Escape e = classify(n.escape_seq);
      if (e == Escape::kPending) continue;
      if (e == Escape::kOther) not_modelled(n, n.escape_seq);
      n.escape_seq.clear();
      if (e == Escape::kInert || c >= 0x20) continue;
      // Not modelled either way; a control byte is then taken as itself (a best guess).
    }
    switch (c) {
      case '\r':
      case '\n':
      case 0x0f:  // C-o, readline's operate-and-get-next: runs the line too
        n.lines.push_back(std::move(n.rest));
        n.rest.clear();
        continue;
      case 0x1b: n.escape_seq.assign(1, ch); continue;
      case 0x7f:
      case 0x08: erase_char(n.rest); continue;
      case 0x17: erase_word(n.rest); continue;
      case 0x03:
      case 0x15: n.rest.clear(); continue;
      case 0x04:
      case 0x07:
      case 0x0c: continue;  // C-d, C-g, C-l: nothing changes (the cursor is at the end)
      default: break;
    }
    if (c < 0x20) {  // Tab (completion), C-a, C-y, C-v, ...: not modelled
      not_modelled(n, std::string_view(&ch, 1));
      continue;
    }
    n.rest += ch;
    if (n.rest.size() > kMaxLine) n.rest.erase(0, n.rest.size() - kMaxLine);
  }
  if (!n.escape_seq.empty()) not_modelled(n, n.escape_seq);  // readline waits for more
  return n;
}

void TypedLine::commit(Next next) {
  line_ = std::move(next.rest);
  escape_seq_ = std::move(next.escape_seq);
}

TypedLine::Next piped_lines(std::string_view bytes) {
  TypedLine::Next n;
  for (char ch : bytes) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      n.lines.push_back(std::move(n.rest));
      n.rest.clear();
      continue;
    }
    if ((c < 0x20 && c != '\t') || c == 0x7f) not_modelled(n, std::string_view(&ch, 1));
    n.rest += ch;
  }
  if (!n.rest.empty()) not_modelled(n, "a line not ended by LF");
  return n;
}

void TypedLine::clear() {
  line_.clear();
  escape_seq_.clear();
}

}  // namespace pvs::service
