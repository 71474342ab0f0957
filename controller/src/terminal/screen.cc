// Screen: libvterm behind a small interface. libvterm keeps the cells; this file turns them
// into text and keeps what libvterm hands out through callbacks (scrollback, title, replies).
#include "screen.h"

#include <vterm.h>

#include <algorithm>
#include <vector>

namespace pvs::terminal {
namespace {

constexpr int kMaxDim = 1000;

int clamp_dim(int v) {
  return std::clamp(v, 1, kMaxDim);
}

std::string cells_to_text(const VTermScreenCell* cells, int n) {
  std::string out;
  for (int c = 0; c < n;) {
    const VTermScreenCell& cell = cells[c];
    if (cell.chars[0] == 0 || cell.chars[0] == static_cast<std::uint32_t>(-1)) {
      out.push_back(' ');
    } else {
      for (int i = 0; i < VTERM_MAX_CHARS_PER_CELL && cell.chars[i] != 0; ++i) {
        append_utf8(out, cell.chars[i]);
      }
    }
    c += cell.width > 0 ? cell.width : 1;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

struct Screen::Callbacks {
  static int settermprop(VTermProp prop, VTermValue* val, void* user) {
    auto* s = static_cast<Screen*>(user);
    switch (prop) {
      case VTERM_PROP_TITLE: s->title_ = val->string != nullptr ? val->string : ""; break;
      case VTERM_PROP_CURSORVISIBLE: s->cursor_visible_ = val->boolean != 0; break;
      case VTERM_PROP_ALTSCREEN: s->alt_screen_ = val->boolean != 0; break;
      default: break;
    }
    return 1;
  }

  static int sb_pushline(int cols, const VTermScreenCell* cells, void* user) {
    auto* s = static_cast<Screen*>(user);
    if (s->scrollback_limit_ == 0) return 0;
    s->scrollback_.push_back(cells_to_text(cells, cols));
    while (s->scrollback_.size() > s->scrollback_limit_) s->scrollback_.pop_front();
    return 1;
  }

  static void output(const char* bytes, std::size_t len, void* user) {
    static_cast<Screen*>(user)->replies_.append(bytes, len);
  }
};

void Screen::VTermDeleter::operator()(void* vt) const {
  vterm_free(static_cast<VTerm*>(vt));
}

Screen::Screen(int rows, int cols, std::size_t scrollback_limit)
    : rows_(clamp_dim(rows)), cols_(clamp_dim(cols)), scrollback_limit_(scrollback_limit) {
  VTerm* vt = vterm_new(rows_, cols_);
  vt_.reset(vt);
  vterm_set_utf8(vt, 1);
  vterm_output_set_callback(vt, &Callbacks::output, this);
  VTermScreen* screen = vterm_obtain_screen(vt);
  screen_ = screen;
  static const VTermScreenCallbacks kCallbacks = [] {
    VTermScreenCallbacks cb{};
    cb.settermprop = &Callbacks::settermprop;
    cb.sb_pushline = &Callbacks::sb_pushline;
    return cb;
  }();
  vterm_screen_set_callbacks(screen, &kCallbacks, this);
  vterm_screen_enable_altscreen(screen, 1);
  vterm_screen_reset(screen, 1);
}

Screen::~Screen() = default;

void Screen::feed(std::string_view bytes) {
  bytes_fed_ += bytes.size();
  if (bytes.empty()) return;
  vterm_input_write(static_cast<VTerm*>(vt_.get()), bytes.data(), bytes.size());
}

void Screen::resize(int rows, int cols) {
  rows_ = clamp_dim(rows);
  cols_ = clamp_dim(cols);
  vterm_set_size(static_cast<VTerm*>(vt_.get()), rows_, cols_);
}

std::string Screen::render_row(int row) const {
  std::vector<VTermScreenCell> cells(static_cast<std::size_t>(cols_));
  auto* screen = static_cast<VTermScreen*>(screen_);
  for (int c = 0; c < cols_; ++c) {
    vterm_screen_get_cell(screen, VTermPos{row, c}, &cells[static_cast<std::size_t>(c)]);
  }
  return cells_to_text(cells.data(), cols_);
}

TerminalScreen Screen::snapshot(std::size_t scrollback_lines) const {
  TerminalScreen s;
  s.rows = rows_;
  s.cols = cols_;
  s.lines.reserve(static_cast<std::size_t>(rows_));
  for (int r = 0; r < rows_; ++r) s.lines.push_back(render_row(r));
  VTermPos pos{0, 0};
  vterm_state_get_cursorpos(vterm_obtain_state(static_cast<VTerm*>(vt_.get())), &pos);
  s.cursor_row = pos.row;
  s.cursor_col = pos.col;
  s.cursor_visible = cursor_visible_;
  s.title = title_;
  s.alt_screen = alt_screen_;
  std::size_t n = std::min(scrollback_lines, scrollback_.size());
  s.scrollback.assign(scrollback_.end() - static_cast<std::ptrdiff_t>(n), scrollback_.end());
  s.output_bytes = bytes_fed_;
  return s;
}

std::string Screen::take_replies() {
  std::string r;
  r.swap(replies_);
  return r;
}

}  // namespace pvs::terminal
