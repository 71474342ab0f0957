// Key names -> bytes, as xterm sends them in its default (normal cursor keys) mode.
#include "keys.h"

#include <array>
#include <optional>
#include <utility>

#include "pvesandbox/terminal.h"

namespace pvs::terminal {
namespace {

using Entry = std::pair<std::string_view, std::string_view>;

constexpr std::array kKeys{
    Entry{"Enter", "\r"},         Entry{"Tab", "\t"},         Entry{"Escape", "\x1b"},
    Entry{"Backspace", "\x7f"},   Entry{"Space", " "},        Entry{"Up", "\x1b[A"},
    Entry{"Down", "\x1b[B"},      Entry{"Right", "\x1b[C"},   Entry{"Left", "\x1b[D"},
    Entry{"Home", "\x1b[H"},      Entry{"End", "\x1b[F"},     Entry{"PageUp", "\x1b[5~"},
    Entry{"PageDown", "\x1b[6~"}, Entry{"Insert", "\x1b[2~"}, Entry{"Delete", "\x1b[3~"},
    Entry{"F1", "\x1bOP"},        Entry{"F2", "\x1bOQ"},      Entry{"F3", "\x1bOR"},
    Entry{"F4", "\x1bOS"},        Entry{"F5", "\x1b[15~"},    Entry{"F6", "\x1b[17~"},
    Entry{"F7", "\x1b[18~"},      Entry{"F8", "\x1b[19~"},    Entry{"F9", "\x1b[20~"},
    Entry{"F10", "\x1b[21~"},     Entry{"F11", "\x1b[23~"},   Entry{"F12", "\x1b[24~"},
};

std::optional<std::string> control_char(std::string_view rest) {
  if (rest.size() != 1) return std::nullopt;
  char c = rest[0];
  if (c >= 'a' && c <= 'z') return std::string(1, static_cast<char>(c - 'a' + 1));
  if (c >= 'A' && c <= 'Z') return std::string(1, static_cast<char>(c - 'A' + 1));
  switch (c) {
    case '@': return std::string(1, '\0');
    case '[': return std::string(1, '\x1b');
    case '\\': return std::string(1, '\x1c');
    case ']': return std::string(1, '\x1d');
    case '^': return std::string(1, '\x1e');
    case '_': return std::string(1, '\x1f');
    default: return std::nullopt;
  }
}

Result<std::string> lookup(std::string_view name, bool allow_meta) {
  for (const auto& [n, bytes] : kKeys) {
    if (n == name) return std::string(bytes);
  }
  if (name.starts_with("C-")) {
    if (auto c = control_char(name.substr(2))) return *c;
  } else if (allow_meta && name.starts_with("M-") && name.size() > 2) {
    std::string_view rest = name.substr(2);
    // M-<one character> (possibly multi-byte UTF-8) or M-<key name> (M-Enter, M-C-x).
    auto inner = lookup(rest, false);
    if (inner) return "\x1b" + *inner;
    bool one_char = rest.size() == 1 || (static_cast<unsigned char>(rest[0]) >= 0xC0 &&
                                         rest.size() <= 4 && rest.size() > 1);
    if (one_char) return "\x1b" + std::string(rest);
  }
  return fail(ErrorCode::kInvalidArgument, "unknown key name \"" + std::string(name) + "\"");
}

}  // namespace

Result<std::string> key_bytes(std::string_view name) {
  return lookup(name, true);
}

std::vector<std::string_view> fixed_key_names() {
  std::vector<std::string_view> out;
  for (const auto& e : kKeys) out.push_back(e.first);
  return out;
}

}  // namespace pvs::terminal

namespace pvs {

Result<std::string> terminal_key_bytes(std::string_view name) {
  return terminal::key_bytes(name);
}

Result<std::string> encode_terminal_input(const std::vector<TerminalInput>& items) {
  std::string out;
  for (const auto& item : items) {
    if (item.key_.empty()) {
      out += item.text_;
      continue;
    }
    auto bytes = terminal::key_bytes(item.key_);
    if (!bytes) return fail(bytes.error());
    out += *bytes;
  }
  return out;
}

}  // namespace pvs
