// Ethernet MAC addresses, as Proxmox writes them into net0 ("BC:24:11:2A:3B:4C").
//
// parse() takes exactly six two-digit hex groups separated by ':' (either case); to_string()
// prints lower case, as nft does.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "pvesandbox/common/error.h"

namespace pvs {

class MacAddress {
 public:
  using Bytes = std::array<std::uint8_t, 6>;

  constexpr MacAddress() = default;
  constexpr explicit MacAddress(const Bytes& bytes) : bytes_(bytes) {}

  static Result<MacAddress> parse(std::string_view text);

  const Bytes& bytes() const { return bytes_; }
  // The I/G bit: set for multicast and broadcast.
  bool is_multicast() const { return (bytes_[0] & 0x01) != 0; }
  bool is_zero() const;
  // A MAC a container's NIC may legitimately have: not multicast/broadcast, not all zero.
  bool is_unicast() const { return !is_multicast() && !is_zero(); }

  std::string to_string() const;
  auto operator<=>(const MacAddress&) const = default;

 private:
  Bytes bytes_{};
};

}  // namespace pvs
