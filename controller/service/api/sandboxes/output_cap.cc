#include "api/sandboxes/output_cap.h"

#include <algorithm>

#include "http/json.h"

namespace pvs::service {

namespace {

constexpr std::size_t kChunk = 4096;

// The length of the character starting at s[i] as append_json_string consumes it: a valid
// UTF-8 sequence whole, anything else one byte.
std::size_t char_length(std::string_view s, std::size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  std::size_t len = c < 0x80                   ? 1
                    : (c >= 0xc2 && c <= 0xdf) ? 2
                    : (c >= 0xe0 && c <= 0xef) ? 3
                    : (c >= 0xf0 && c <= 0xf4) ? 4
                                               : 1;
  if (len == 1 || i + len > s.size()) return 1;
  for (std::size_t k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 1;
  }
  return len;
}

// The encoded body (no quotes) of s.
std::string body_of(std::string_view s) {
  std::string lit;
  append_json_string(lit, s);
  return lit.substr(1, lit.size() - 2);
}

}  // namespace

std::size_t append_json_string_capped(std::string& out, std::string_view text,
                                      std::size_t max_encoded) {
  out += '"';
  std::size_t budget = max_encoded > 2 ? max_encoded - 2 : 0, used = 0, pos = 0;
  // Whole chunks while they fit (a chunk never splits a character) ...
  while (pos < text.size()) {
    std::size_t end = pos;
    while (end < text.size() && end - pos < kChunk) end += char_length(text, end);
    std::string body = body_of(text.substr(pos, end - pos));
    if (used + body.size() > budget) break;
    out += body;
    used += body.size();
    pos = end;
  }
  // ... then the characters of the chunk that did not, one by one.
  while (pos < text.size()) {
    std::size_t len = char_length(text, pos);
    std::string body = body_of(text.substr(pos, len));
    if (used + body.size() > budget) break;
    out += body;
    used += body.size();
    pos += len;
  }
  out += '"';
  return pos;
}

std::string mark_omitted(std::string_view kept, std::uint64_t total, std::size_t cap) {
  if (total <= kept.size()) return std::string(kept);
  std::size_t head = std::min(cap / 2, kept.size());
  std::string out(kept.substr(0, head));
  out += "\n[... " + std::to_string(total - kept.size()) + " bytes left out ...]\n";
  out.append(kept.substr(head));
  return out;
}

}  // namespace pvs::service
