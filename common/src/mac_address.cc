#include "pvesandbox/common/mac_address.h"

#include "pvesandbox/common/text.h"

namespace pvs {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

Result<MacAddress> MacAddress::parse(std::string_view text) {
  // "aa:bb:cc:dd:ee:ff" is exactly 17 characters.
  if (text.size() != 17) {
    return fail(ErrorCode::kInvalidArgument, "invalid MAC address " + pvs::quoted(text) +
                                                 ": expected six hex pairs like 02:00:00:00:00:01");
  }
  Bytes bytes{};
  for (std::size_t i = 0; i < 6; ++i) {
    int hi = hex_value(text[i * 3]);
    int lo = hex_value(text[i * 3 + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && text[i * 3 + 2] != ':')) {
      return fail(ErrorCode::kInvalidArgument,
                  "invalid MAC address " + pvs::quoted(text) +
                      ": expected six hex pairs like 02:00:00:00:00:01");
    }
    bytes[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return MacAddress(bytes);
}

bool MacAddress::is_zero() const {
  for (auto b : bytes_) {
    if (b != 0) return false;
  }
  return true;
}

std::string MacAddress::to_string() const {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(17);
  for (std::size_t i = 0; i < bytes_.size(); ++i) {
    if (i > 0) out += ':';
    out += kHex[bytes_[i] >> 4];
    out += kHex[bytes_[i] & 0xf];
  }
  return out;
}

}  // namespace pvs
