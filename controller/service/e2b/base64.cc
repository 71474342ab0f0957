#include "e2b/base64.h"

#include <cstdint>

namespace pvs::service::e2b {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int value_of(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  auto at = [&](std::size_t k) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[k]));
  };
  for (; i + 3 <= bytes.size(); i += 3) {
    std::uint32_t n = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(n >> s) & 63]);
  }
  std::size_t rest = bytes.size() - i;
  if (rest == 0) return out;
  std::uint32_t n = at(i) << 16;
  if (rest == 2) n |= at(i + 1) << 8;
  out.push_back(kAlphabet[(n >> 18) & 63]);
  out.push_back(kAlphabet[(n >> 12) & 63]);
  out.push_back(rest == 2 ? kAlphabet[(n >> 6) & 63] : '=');
  out.push_back('=');
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  std::size_t end = text.size();
  if (end % 4 == 0 && end > 0 && text[end - 1] == '=') {
    --end;
    if (text[end - 1] == '=') --end;
  }
  if (end % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(end / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  for (std::size_t i = 0; i < end; ++i) {
    int v = value_of(text[i]);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

}  // namespace pvs::service::e2b
