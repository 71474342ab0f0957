#include "pvesandbox/common/text.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <iterator>

namespace pvs {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

struct Range {
  char32_t first, last;
};

// Unicode general category Cf (generated from Unicode 14.0's UnicodeData.txt), with the line
// and paragraph separators (Zl, Zp: U+2028, U+2029) merged in; sorted, disjoint.
constexpr std::array<Range, 21> kFormat{
    {{0xAD, 0xAD},       {0x600, 0x605},     {0x61C, 0x61C},     {0x6DD, 0x6DD},
     {0x70F, 0x70F},     {0x890, 0x891},     {0x8E2, 0x8E2},     {0x180E, 0x180E},
     {0x200B, 0x200F},   {0x2028, 0x202E},   {0x2060, 0x2064},   {0x2066, 0x206F},
     {0xFEFF, 0xFEFF},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD},
     {0x13430, 0x13438}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0001, 0xE0001},
     {0xE0020, 0xE007F}}};

bool is_format(char32_t c) {
  auto it = std::upper_bound(kFormat.begin(), kFormat.end(), c,
                             [](char32_t v, const Range& r) { return v < r.first; });
  return it != kFormat.begin() && c <= std::prev(it)->last;
}

// Whether a terminal would act on `c` (or hide or reorder text around it).
bool is_hazard(char32_t c) {
  return c < 0x20 || (c >= 0x7f && c < 0xa0) || is_format(c);
}

// The code point at the start of `s` and its length in bytes; length 0 when `s` does not start
// with well-formed UTF-8 (overlong forms, surrogates and values past U+10FFFF are not).
std::pair<char32_t, std::size_t> decode(std::string_view s) {
  auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char lead = b(0);
  if (lead < 0x80) return {lead, 1};
  std::size_t n = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 ? 2 : 0;
  if (n == 0 || lead > 0xf4 || s.size() < n) return {0, 0};
  char32_t c = lead & (0x7f >> n);
  for (std::size_t i = 1; i < n; ++i) {
    if ((b(i) & 0xc0) != 0x80) return {0, 0};
    c = (c << 6) | (b(i) & 0x3f);
  }
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return {0, 0};
  return {c, n};
}

void append_u(std::string& out, char32_t unit) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHexDigits[(unit >> shift) & 0xf];
}

void append_x(std::string& out, unsigned char byte) {
  out += "\\x";
  out += kHexDigits[byte >> 4];
  out += kHexDigits[byte & 0xf];
}

void append_escape(std::string& out, char32_t c, TerminalText how) {
  if (how == TerminalText::kJson) {
    if (c < 0x10000) return append_u(out, c);
    char32_t v = c - 0x10000;  // a surrogate pair, as JSON spells it
    append_u(out, 0xd800 + (v >> 10));
    return append_u(out, 0xdc00 + (v & 0x3ff));
  }
  if (c == '\n') return void(out += "\\n");
  if (c == '\r') return void(out += "\\r");
  if (c == '\t') return void(out += "\\t");
  if (c < 0x80) return append_x(out, static_cast<unsigned char>(c));
  if (c < 0x10000) return append_u(out, c);
  out += "\\U";
  for (int shift = 28; shift >= 0; shift -= 4) out += kHexDigits[(c >> shift) & 0xf];
}

}  // namespace

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string quoted(std::string_view text, std::size_t max) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      append_x(out, c);
    }
  }
  if (text.size() > max) out += "...";
  out += '"';
  return out;
}

std::string terminal_safe(std::string_view text, TerminalText how) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    auto [c, n] = decode(text);
    if (n == 0) {  // not UTF-8: JSON cannot carry the byte, so U+FFFD there
      if (how == TerminalText::kJson) {
        append_u(out, 0xfffd);
      } else {
        append_x(out, static_cast<unsigned char>(text[0]));
      }
      text.remove_prefix(1);
      continue;
    }
    bool kept = how != TerminalText::kLine && (c == '\n' || c == '\t');
    if (is_hazard(c) && !kept) {
      append_escape(out, c, how);
    } else {
      out.append(text.substr(0, n));
    }
    text.remove_prefix(n);
  }
  return out;
}

}  // namespace pvs
