// IPv4 addresses and CIDR blocks.
//
// Parsing is strict: exactly four decimal octets 0-255 separated by dots, no leading zeros
// ("010.0.0.1" could mean octal to other parsers), no sign, no spaces, no hex, nothing after.
// These types guard the agent's policy, so ambiguity is an error, not a guess.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>

#include "pvesandbox/common/error.h"

namespace pvs {

class Ipv4Address {
 public:
  constexpr Ipv4Address() = default;
  // From a host-order integer: 0x0a630001 is 10.99.0.1.
  constexpr explicit Ipv4Address(std::uint32_t host_order) : value_(host_order) {}

  static Result<Ipv4Address> parse(std::string_view text);

  constexpr std::uint32_t to_uint() const { return value_; }
  std::string to_string() const;

  constexpr auto operator<=>(const Ipv4Address&) const = default;

 private:
  std::uint32_t value_ = 0;
};

// A network "a.b.c.d/p". The address must be the network address (no host bits set):
// "10.99.0.5/16" is rejected rather than silently truncated.
class Cidr {
 public:
  constexpr Cidr() = default;

  static Result<Cidr> parse(std::string_view text);
  // Same check as parse(): host bits of `network` must be zero, prefix <= 32.
  static Result<Cidr> make(Ipv4Address network, int prefix);

  int prefix() const { return prefix_; }
  Ipv4Address network() const { return network_; }
  Ipv4Address netmask() const;
  Ipv4Address broadcast() const;
  // Number of addresses in the block, network and broadcast included (2^(32-prefix)).
  std::uint64_t size() const { return std::uint64_t{1} << (32 - prefix_); }
  bool contains(Ipv4Address address) const;
  bool contains(const Cidr& other) const;
  // True for an address a host may use: inside, and not the network or broadcast address
  // (for /31 and /32 every address is usable, RFC 3021).
  bool is_host(Ipv4Address address) const;
  // The i-th address of the block, i < size().
  Ipv4Address at(std::uint64_t index) const;

  std::string to_string() const;
  auto operator<=>(const Cidr&) const = default;

  // Iterates every address of the block in ascending order.
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Ipv4Address;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Ipv4Address;

    Iterator() = default;
    Ipv4Address operator*() const { return Ipv4Address(static_cast<std::uint32_t>(next_)); }
    Iterator& operator++() {
      ++next_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++next_;
      return old;
    }
    bool operator==(const Iterator&) const = default;

   private:
    friend class Cidr;
    explicit Iterator(std::uint64_t next) : next_(next) {}
    std::uint64_t next_ = 0;  // 64 bits so that the end of 255.255.255.255/32 is representable
  };
  Iterator begin() const { return Iterator(network_.to_uint()); }
  Iterator end() const { return Iterator(network_.to_uint() + size()); }

 private:
  Cidr(Ipv4Address network, int prefix) : network_(network), prefix_(prefix) {}
  Ipv4Address network_;
  int prefix_ = 32;
};

}  // namespace pvs

template <>
struct std::hash<pvs::Ipv4Address> {
  std::size_t operator()(pvs::Ipv4Address a) const noexcept {
    return std::hash<std::uint32_t>{}(a.to_uint());
  }
};
template <>
struct std::hash<pvs::Cidr> {
  std::size_t operator()(const pvs::Cidr& c) const noexcept {
    return std::hash<std::uint64_t>{}((std::uint64_t{c.network().to_uint()} << 8) |
                                      static_cast<std::uint64_t>(c.prefix()));
  }
};
