#include "pvesandbox/common/ipv4.h"

#include <charconv>

#include "pvesandbox/common/text.h"

namespace pvs {

Result<Ipv4Address> Ipv4Address::parse(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return fail(ErrorCode::kInvalidArgument,
                "invalid IPv4 address " + pvs::quoted(text) + ": " + std::string(why));
  };
  if (text.empty()) return bad("empty");
  std::uint32_t value = 0;
  std::size_t pos = 0;
  for (int octet = 0; octet < 4; ++octet) {
    if (octet > 0) {
      if (pos >= text.size() || text[pos] != '.') return bad("expected four dot-separated octets");
      ++pos;
    }
    std::size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9' && pos - start < 4) ++pos;
    std::size_t digits = pos - start;
    if (digits == 0) return bad("expected a decimal octet");
    if (digits > 3) return bad("octet has more than three digits");
    if (digits > 1 && text[start] == '0') return bad("octet has a leading zero");
    unsigned octet_value = 0;
    std::from_chars(text.data() + start, text.data() + pos, octet_value);
    if (octet_value > 255) return bad("octet greater than 255");
    value = (value << 8) | octet_value;
  }
  if (pos != text.size()) return bad("unexpected characters after the address");
  return Ipv4Address(value);
}

std::string Ipv4Address::to_string() const {
  std::string out;
  out.reserve(15);
  for (int shift = 24; shift >= 0; shift -= 8) {
    out += std::to_string((value_ >> shift) & 0xff);
    if (shift > 0) out += '.';
  }
  return out;
}

Result<Cidr> Cidr::parse(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos) {
    return fail(ErrorCode::kInvalidArgument,
                "invalid CIDR " + pvs::quoted(text) + ": expected <address>/<prefix>");
  }
  auto address = Ipv4Address::parse(text.substr(0, slash));
  if (!address) {
    return fail(ErrorCode::kInvalidArgument,
                "invalid CIDR " + pvs::quoted(text) + ": " + address.error().message);
  }
  std::string_view prefix_text = text.substr(slash + 1);
  bool digits_only = !prefix_text.empty() && prefix_text.size() <= 2;
  for (char c : prefix_text) digits_only = digits_only && c >= '0' && c <= '9';
  if (!digits_only || (prefix_text.size() > 1 && prefix_text[0] == '0')) {
    return fail(ErrorCode::kInvalidArgument,
                "invalid CIDR " + pvs::quoted(text) + ": prefix must be a decimal number 0-32");
  }
  int prefix = 0;
  std::from_chars(prefix_text.data(), prefix_text.data() + prefix_text.size(), prefix);
  auto cidr = make(*address, prefix);
  if (!cidr) {
    return fail(ErrorCode::kInvalidArgument,
                "invalid CIDR " + pvs::quoted(text) + ": " + cidr.error().message);
  }
  return cidr;
}

Result<Cidr> Cidr::make(Ipv4Address network, int prefix) {
  if (prefix < 0 || prefix > 32) {
    return fail(ErrorCode::kInvalidArgument, "prefix must be 0-32");
  }
  Cidr cidr(network, prefix);
  if ((network.to_uint() & ~cidr.netmask().to_uint()) != 0) {
    return fail(ErrorCode::kInvalidArgument,
                "host bits are set (the network address is " +
                    Ipv4Address(network.to_uint() & cidr.netmask().to_uint()).to_string() + "/" +
                    std::to_string(prefix) + ")");
  }
  return cidr;
}

Ipv4Address Cidr::netmask() const {
  return Ipv4Address(prefix_ == 0 ? 0u : ~std::uint32_t{0} << (32 - prefix_));
}

Ipv4Address Cidr::broadcast() const {
  return Ipv4Address(network_.to_uint() | ~netmask().to_uint());
}

bool Cidr::contains(Ipv4Address address) const {
  return (address.to_uint() & netmask().to_uint()) == network_.to_uint();
}

bool Cidr::contains(const Cidr& other) const {
  return other.prefix_ >= prefix_ && contains(other.network_);
}

bool Cidr::is_host(Ipv4Address address) const {
  if (!contains(address)) return false;
  if (prefix_ >= 31) return true;
  return address != network_ && address != broadcast();
}

Ipv4Address Cidr::at(std::uint64_t index) const {
  return Ipv4Address(static_cast<std::uint32_t>(network_.to_uint() + index));
}

std::string Cidr::to_string() const {
  return network_.to_string() + "/" + std::to_string(prefix_);
}

}  // namespace pvs
