// TerminalScreen: libvterm's screen layer fed with program output, read back as text lines;
// lines that scroll off the top are kept in a bounded ring (sb_pushline).
#include <vterm.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <optional>
#include <string>
#include <type_traits>

#include "pvesandbox/common/text.h"
#include "pvesandbox/terminal.h"

namespace pvs {

namespace {

void append_utf8(std::string& out, std::uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x110000) {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// The text of a row of cells: blanks as spaces, the right half of a wide character skipped,
// trailing spaces trimmed.
template <typename CellAt>
std::string row_text(int cols, CellAt cell_at) {
  std::string line;
  for (int col = 0; col < cols; ++col) {
    const VTermScreenCell& cell = cell_at(col);
    if (cell.chars[0] == 0) {
      line += ' ';
    } else if (cell.chars[0] != static_cast<std::uint32_t>(-1)) {
      for (int i = 0; i < VTERM_MAX_CHARS_PER_CELL && cell.chars[i] != 0; ++i) {
        append_utf8(line, cell.chars[i]);
      }
      if (cell.width > 1) col += cell.width - 1;
    }
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

// A string property (the title) into `out`. libvterm 0.1 (Debian 12) passes it whole as a
// char*; 0.3 (Debian 13) in fragments (VTermStringFragment: the first has `initial`). The type
// of VTermValue::string picks the branch: the one place that tells the two versions apart.
template <typename Str>
void take_string(std::string& out, const Str& value) {
  if constexpr (std::is_pointer_v<Str>) {
    out = value != nullptr ? value : "";
  } else {
    if (value.initial) out.clear();
    if (value.str != nullptr) out.append(value.str, value.len);
  }
}

}  // namespace

struct TerminalScreen::State {
  VTerm* vt = nullptr;
  VTermScreen* screen = nullptr;
  std::deque<std::string> scrollback;
  std::size_t scrollback_cap = 0;
  std::string title;
  bool cursor_visible = true;
  bool altscreen = false;
  std::string output;  // bytes the emulator produced (key presses, query answers)
  std::uint64_t fed = 0;

  static int settermprop(VTermProp prop, VTermValue* val, void* user) {
    auto* s = static_cast<State*>(user);
    switch (prop) {
      case VTERM_PROP_TITLE: take_string(s->title, val->string); break;
      case VTERM_PROP_CURSORVISIBLE: s->cursor_visible = val->boolean != 0; break;
      case VTERM_PROP_ALTSCREEN: s->altscreen = val->boolean != 0; break;
      default: break;
    }
    return 1;
  }
  static int sb_pushline(int cols, const VTermScreenCell* cells, void* user) {
    auto* s = static_cast<State*>(user);
    if (s->scrollback_cap == 0) return 1;
    s->scrollback.push_back(
        row_text(cols, [cells](int c) -> const VTermScreenCell& { return cells[c]; }));
    while (s->scrollback.size() > s->scrollback_cap) s->scrollback.pop_front();
    return 1;
  }
  static void output_cb(const char* bytes, std::size_t len, void* user) {
    static_cast<State*>(user)->output.append(bytes, len);
  }
};

TerminalScreen::TerminalScreen(int cols, int rows, std::size_t scrollback_lines)
    : state_(std::make_unique<State>()),
      cols_(std::clamp(cols, 1, 1000)),
      rows_(std::clamp(rows, 1, 1000)) {
  // Every other callback null, including those libvterm 0.3 adds (sb_clear).
  static const VTermScreenCallbacks kCallbacks = [] {
    VTermScreenCallbacks c{};
    c.settermprop = &State::settermprop;
    c.sb_pushline = &State::sb_pushline;
    return c;
  }();
  State& s = *state_;
  s.scrollback_cap = scrollback_lines;
  s.vt = vterm_new(rows_, cols_);
  vterm_set_utf8(s.vt, 1);
  vterm_output_set_callback(s.vt, &State::output_cb, &s);
  s.screen = vterm_obtain_screen(s.vt);
  vterm_screen_set_callbacks(s.screen, &kCallbacks, &s);
  vterm_screen_enable_altscreen(s.screen, 1);
  vterm_screen_reset(s.screen, 1);
}

TerminalScreen::~TerminalScreen() {
  vterm_free(state_->vt);
}

void TerminalScreen::feed(std::string_view bytes) {
  state_->fed += bytes.size();
  vterm_input_write(state_->vt, bytes.data(), bytes.size());
}

void TerminalScreen::resize(int cols, int rows) {
  cols_ = std::clamp(cols, 1, 1000);
  rows_ = std::clamp(rows, 1, 1000);
  vterm_set_size(state_->vt, rows_, cols_);
}

ScreenSnapshot TerminalScreen::snapshot(std::size_t scrollback) const {
  const State& s = *state_;
  ScreenSnapshot snap;
  snap.cols = cols_;
  snap.rows = rows_;
  snap.lines.reserve(static_cast<std::size_t>(rows_));
  VTermScreenCell cell{};
  for (int row = 0; row < rows_; ++row) {
    snap.lines.push_back(row_text(cols_, [&](int col) -> const VTermScreenCell& {
      if (vterm_screen_get_cell(s.screen, VTermPos{row, col}, &cell) == 0) cell = {};
      return cell;
    }));
  }
  VTermPos pos{};
  vterm_state_get_cursorpos(vterm_obtain_state(s.vt), &pos);
  snap.cursor_row = pos.row;
  snap.cursor_col = pos.col;
  snap.cursor_visible = s.cursor_visible;
  snap.alternate_screen = s.altscreen;
  snap.title = s.title;
  std::size_t n = std::min(scrollback, s.scrollback.size());
  snap.scrollback.assign(s.scrollback.end() - static_cast<std::ptrdiff_t>(n), s.scrollback.end());
  snap.output_bytes = s.fed;
  return snap;
}

std::uint64_t TerminalScreen::output_bytes() const {
  return state_->fed;
}

std::string TerminalScreen::take_replies() {
  std::string out;
  out.swap(state_->output);
  return out;
}

std::string ScreenSnapshot::text() const {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    out += lines[i];
  }
  return out;
}

// ---- keys ---------------------------------------------------------------------------------

namespace {

struct NamedKey {
  std::string_view name;
  VTermKey key;
};

constexpr NamedKey kNamedKeys[] = {
    {"enter", VTERM_KEY_ENTER},   {"return", VTERM_KEY_ENTER},
    {"tab", VTERM_KEY_TAB},       {"backspace", VTERM_KEY_BACKSPACE},
    {"escape", VTERM_KEY_ESCAPE}, {"esc", VTERM_KEY_ESCAPE},
    {"up", VTERM_KEY_UP},         {"down", VTERM_KEY_DOWN},
    {"left", VTERM_KEY_LEFT},     {"right", VTERM_KEY_RIGHT},
    {"insert", VTERM_KEY_INS},    {"delete", VTERM_KEY_DEL},
    {"home", VTERM_KEY_HOME},     {"end", VTERM_KEY_END},
    {"pageup", VTERM_KEY_PAGEUP}, {"pagedown", VTERM_KEY_PAGEDOWN},
};

// One UTF-8 code point making up all of `s`, or nullopt.
std::optional<std::uint32_t> single_code_point(std::string_view s) {
  if (s.empty()) return std::nullopt;
  auto b = static_cast<unsigned char>(s[0]);
  std::size_t len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (len == 0 || s.size() != len) return std::nullopt;
  std::uint32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (std::size_t i = 1; i < len; ++i) {
    auto cont = static_cast<unsigned char>(s[i]);
    if ((cont >> 6) != 2) return std::nullopt;
    c = (c << 6) | (cont & 0x3F);
  }
  return c;
}

// Ctrl with a character: the C0 control code a terminal sends.
std::optional<char> control_code(std::uint32_t c) {
  if (c >= 'a' && c <= 'z') return static_cast<char>(c - 'a' + 1);
  if (c >= 'A' && c <= 'Z') return static_cast<char>(c - 'A' + 1);
  switch (c) {
    case '@':
    case ' ': return '\0';
    case '[': return '\x1b';
    case '\\': return '\x1c';
    case ']': return '\x1d';
    case '^': return '\x1e';
    case '_': return '\x1f';
    case '?': return '\x7f';
    default: return std::nullopt;
  }
}

}  // namespace

Result<std::string> TerminalScreen::key(std::string_view name) {
  auto unknown = [&] {
    return fail(ErrorCode::kInvalidArgument,
                "unknown key name \"" + std::string(name.substr(0, 64)) + "\"");
  };
  int mods = VTERM_MOD_NONE;
  std::string_view base = name;
  while (base.size() > 2 && base[1] == '-') {
    char m = static_cast<char>(std::toupper(static_cast<unsigned char>(base[0])));
    if (m == 'C') {
      mods |= VTERM_MOD_CTRL;
    } else if (m == 'M' || m == 'A') {
      mods |= VTERM_MOD_ALT;
    } else if (m == 'S') {
      mods |= VTERM_MOD_SHIFT;
    } else {
      break;
    }
    base.remove_prefix(2);
  }
  std::string lname = ascii_lower(base);
  const auto vmods = static_cast<VTermModifier>(mods);
  const std::size_t before = state_->output.size();
  auto take = [&] {
    std::string out = state_->output.substr(before);
    state_->output.resize(before);
    return out;
  };
  for (const auto& k : kNamedKeys) {
    if (lname == k.name) {
      vterm_keyboard_key(state_->vt, k.key, vmods);
      return take();
    }
  }
  if (lname.size() >= 2 && lname.size() <= 3 && lname[0] == 'f') {
    int n = 0;
    for (char c : lname.substr(1))
      n = std::isdigit(static_cast<unsigned char>(c)) ? n * 10 + (c - '0') : -100;
    if (n >= 1 && n <= 12) {
      vterm_keyboard_key(state_->vt, static_cast<VTermKey>(VTERM_KEY_FUNCTION(n)), vmods);
      return take();
    }
  }
  std::optional<std::uint32_t> c =
      lname == "space" ? std::optional<std::uint32_t>(' ') : single_code_point(base);
  if (!c) return unknown();
  std::string out;
  if (mods & VTERM_MOD_ALT) out += '\x1b';
  if (mods & VTERM_MOD_CTRL) {
    auto code = control_code(*c);
    if (!code) return unknown();
    out += *code;
    return out;
  }
  if ((mods & VTERM_MOD_SHIFT) && *c >= 'a' && *c <= 'z') *c -= 'a' - 'A';
  append_utf8(out, *c);
  return out;
}

Result<std::string> encode_key(std::string_view name) {
  TerminalScreen screen(80, 24, 0);
  return screen.key(name);
}

}  // namespace pvs
