#include "set_backend.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>

#include <cstring>

namespace pvs::agent {
namespace {
constexpr std::size_t kIfnameLen = 16;

const char* family_name(std::uint8_t family) {
  switch (family) {
    case NFPROTO_INET: return "inet";
    case NFPROTO_IPV4: return "ip";
    case NFPROTO_IPV6: return "ip6";
    case NFPROTO_BRIDGE: return "bridge";
    case NFPROTO_ARP: return "arp";
    case NFPROTO_NETDEV: return "netdev";
    default: return "?";
  }
}

}  // namespace

std::string SetRef::to_string() const {
  return std::string(family_name(family)) + " " + table + " " + set;
}

ElementKey ipv4_key(Ipv4Address address) {
  std::uint32_t be = htonl(address.to_uint());
  std::uint8_t key[4];
  std::memcpy(key, &be, 4);
  return ElementKey(key, sizeof(key));
}

ElementKey port_mac_key(const std::string& port, const MacAddress& mac) {
  std::uint8_t key[kIfnameLen + 8] = {};
  std::memcpy(key, port.data(), std::min(port.size(), kIfnameLen - 1));
  std::memcpy(key + kIfnameLen, mac.bytes().data(), 6);
  return ElementKey(key, sizeof(key));
}

ElementKey port_ip4_key(const std::string& port, Ipv4Address address) {
  std::uint8_t key[kIfnameLen + 4] = {};
  std::memcpy(key, port.data(), std::min(port.size(), kIfnameLen - 1));
  std::uint32_t be = htonl(address.to_uint());
  std::memcpy(key + kIfnameLen, &be, 4);
  return ElementKey(key, sizeof(key));
}

ElementKey route_key(Ipv4Address address, std::uint16_t port) {
  std::uint8_t key[8] = {};
  std::uint32_t be = htonl(address.to_uint());
  std::uint16_t port_be = htons(port);
  std::memcpy(key, &be, 4);
  std::memcpy(key + 4, &port_be, 2);
  return ElementKey(key, sizeof(key));
}

std::optional<std::pair<Ipv4Address, std::uint16_t>> decode_route_key(const ElementKey& key) {
  if (key.size() != 8) return std::nullopt;
  std::uint32_t be;
  std::uint16_t port_be;
  std::memcpy(&be, key.data(), 4);
  std::memcpy(&port_be, key.data() + 4, 2);
  return std::make_pair(Ipv4Address(ntohl(be)), ntohs(port_be));
}

ElementKey pair_key(const PairKey& pair) {
  std::uint8_t key[12] = {};
  std::uint32_t src = htonl(pair.source.to_uint());
  std::uint32_t dst = htonl(pair.destination.to_uint());
  std::uint16_t port = htons(pair.port);
  std::memcpy(key, &src, 4);
  std::memcpy(key + 4, &dst, 4);
  std::memcpy(key + 8, &port, 2);
  return ElementKey(key, sizeof(key));
}

std::optional<PairKey> decode_pair_key(const ElementKey& key) {
  if (key.size() != 12) return std::nullopt;
  std::uint32_t src, dst;
  std::uint16_t port;
  std::memcpy(&src, key.data(), 4);
  std::memcpy(&dst, key.data() + 4, 4);
  std::memcpy(&port, key.data() + 8, 2);
  return PairKey{Ipv4Address(ntohl(src)), Ipv4Address(ntohl(dst)), ntohs(port)};
}

ElementKey refused_key(const RefusedKey& refused) {
  std::uint8_t key[16] = {};
  std::uint32_t src = htonl(refused.source.to_uint());
  std::uint32_t dst = htonl(refused.destination.to_uint());
  std::uint16_t port = htons(refused.port);
  std::memcpy(key, &src, 4);
  std::memcpy(key + 4, &dst, 4);
  key[8] = refused.protocol;
  std::memcpy(key + 12, &port, 2);
  return ElementKey(key, sizeof(key));
}

std::optional<RefusedKey> decode_refused_key(const ElementKey& key) {
  if (key.size() != 16) return std::nullopt;
  std::uint32_t src, dst;
  std::uint16_t port;
  std::memcpy(&src, key.data(), 4);
  std::memcpy(&dst, key.data() + 4, 4);
  std::memcpy(&port, key.data() + 12, 2);
  return RefusedKey{Ipv4Address(ntohl(src)), Ipv4Address(ntohl(dst)), key.data()[8], ntohs(port)};
}

namespace {
std::string decode_ifname(const ElementKey& key) {
  std::string name(reinterpret_cast<const char*>(key.data()), kIfnameLen);
  auto nul = name.find('\0');
  if (nul != std::string::npos) name.resize(nul);
  return name;
}
}  // namespace

std::optional<Ipv4Address> decode_ipv4_key(const ElementKey& key) {
  if (key.size() != 4) return std::nullopt;
  std::uint32_t be;
  std::memcpy(&be, key.data(), 4);
  return Ipv4Address(ntohl(be));
}

std::optional<std::pair<std::string, MacAddress>> decode_port_mac_key(const ElementKey& key) {
  if (key.size() != kIfnameLen + 8) return std::nullopt;
  MacAddress::Bytes bytes;
  std::memcpy(bytes.data(), key.data() + kIfnameLen, 6);
  return std::make_pair(decode_ifname(key), MacAddress(bytes));
}

std::optional<std::pair<std::string, Ipv4Address>> decode_port_ip4_key(const ElementKey& key) {
  if (key.size() != kIfnameLen + 4) return std::nullopt;
  std::uint32_t be;
  std::memcpy(&be, key.data() + kIfnameLen, 4);
  return std::make_pair(decode_ifname(key), Ipv4Address(ntohl(be)));
}

// ---- Batch ----------------------------------------------------------------------------------

void Batch::add(const SetRef& set, std::vector<RawElement> elements) {
  if (elements.empty()) return;
  ops_.push_back(Op{Kind::kAdd, set, std::move(elements)});
}

void Batch::destroy(const SetRef& set, std::vector<RawElement> elements) {
  if (elements.empty()) return;
  ops_.push_back(Op{Kind::kDestroy, set, std::move(elements)});
}

void Batch::flush(const SetRef& set) {
  ops_.push_back(Op{Kind::kFlush, set, {}});
}

}  // namespace pvs::agent
