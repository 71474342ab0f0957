// What the agent edits: elements of nftables sets, the batches that change them, and the
// SetBackend interface in front of the kernel (NftBackend, over netlink).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/protocol.h"

namespace pvs::agent {

// One nftables set: family (NFPROTO_INET, NFPROTO_BRIDGE, ...), table and set name.
struct SetRef {
  std::uint8_t family = 0;
  std::string table;
  std::string set;
  // "inet sandbox internet_allowed", as nft prints it.
  std::string to_string() const;
};

// An element key in the kernel's layout (concatenations padded to 4 bytes per component),
// stored inline: a 10,000-element SYNC must not cost 10,000 heap allocations. The contract's
// keys are 4 (ipv4_addr), 20 (ifname . ipv4_addr) and 24 (ifname . ether_addr) bytes; a longer
// key (a foreign set's) keeps its true size but not its bytes, so it decodes as nothing and the
// backend refuses to send it.
class ElementKey {
 public:
  static constexpr std::size_t kMaxSize = 32;
  ElementKey() = default;
  ElementKey(const std::uint8_t* bytes, std::size_t size)
      : size_(static_cast<std::uint8_t>(std::min<std::size_t>(size, 255))) {
    std::copy(bytes, bytes + std::min(size, kMaxSize), bytes_.begin());
  }
  const std::uint8_t* data() const { return bytes_.data(); }
  std::size_t size() const { return size_; }
  bool complete() const { return size_ <= kMaxSize; }
  bool operator==(const ElementKey& other) const {
    return size_ == other.size_ &&
           std::equal(data(), data() + std::min<std::size_t>(size_, kMaxSize), other.data());
  }
  bool operator<(const ElementKey& other) const {
    if (size_ != other.size_) return size_ < other.size_;
    return std::lexicographical_compare(data(), data() + std::min<std::size_t>(size_, kMaxSize),
                                        other.data(),
                                        other.data() + std::min<std::size_t>(size_, kMaxSize));
  }

 private:
  std::array<std::uint8_t, kMaxSize> bytes_{};
  std::uint8_t size_ = 0;
};

// An element to add or remove, with an optional timeout.
struct RawElement {
  ElementKey key;
  std::optional<std::uint64_t> timeout_ms;
};

// An element as dumped: its key, for elements with a timeout the milliseconds left, and for
// elements with a counter (a set declared with `counter`) its packets.
struct ListedElement {
  ElementKey key;
  std::optional<std::uint64_t> expires_in_ms;
  std::optional<std::uint64_t> packets;
};

struct SetInfo {
  bool table_present = false;
  bool set_present = false;
  bool has_timeout = false;  // declared with `flags timeout`
  std::uint32_t key_len = 0;
  std::uint64_t timeout_ms = 0;  // the set's default timeout (`timeout 1h`); 0: none
};

// Key encodings of the contract's sets.
ElementKey ipv4_key(Ipv4Address address);
// `ifname . ether_addr` (16 + 8 bytes) and `ifname . ipv4_addr` (16 + 4 bytes).
ElementKey port_mac_key(const std::string& port, const MacAddress& mac);
ElementKey port_ip4_key(const std::string& port, Ipv4Address address);
// `ipv4_addr . inet_service` (4 + 2 padded to 4 bytes): a port proxy's route (ROUTE).
ElementKey route_key(Ipv4Address address, std::uint16_t port);
std::optional<std::pair<Ipv4Address, std::uint16_t>> decode_route_key(const ElementKey& key);
// `ipv4_addr . ipv4_addr . inet_service` (4 + 4 + 2 padded to 4 bytes): an egress pair.
struct PairKey {
  Ipv4Address source;
  Ipv4Address destination;
  std::uint16_t port = 0;
  auto operator<=>(const PairKey&) const = default;
};
ElementKey pair_key(const PairKey& pair);
std::optional<PairKey> decode_pair_key(const ElementKey& key);
// `ipv4_addr . ipv4_addr . inet_proto . inet_service` (4 + 4 + 1 and 2 padded to 4 bytes): a
// refused connection attempt (egress_refused).
struct RefusedKey {
  Ipv4Address source;
  Ipv4Address destination;
  std::uint8_t protocol = 0;
  std::uint16_t port = 0;
  auto operator<=>(const RefusedKey&) const = default;
};
ElementKey refused_key(const RefusedKey& refused);
std::optional<RefusedKey> decode_refused_key(const ElementKey& key);
// Decoders for dumped keys; nullopt when the length does not match.
std::optional<Ipv4Address> decode_ipv4_key(const ElementKey& key);
std::optional<std::pair<std::string, MacAddress>> decode_port_mac_key(const ElementKey& key);
std::optional<std::pair<std::string, Ipv4Address>> decode_port_ip4_key(const ElementKey& key);

// A batch under construction. Operations are applied in order, atomically, by
// SetBackend::commit().
class Batch {
 public:
  // NEWSETELEM with NLM_F_CREATE: adding a present element is not an error (its timeout is
  // refreshed only on kernels >= 6.12; destroy() it first to refresh everywhere).
  void add(const SetRef& set, std::vector<RawElement> elements);
  // Removes the elements whether or not they are present.
  void destroy(const SetRef& set, std::vector<RawElement> elements);
  // Removes every element of the set.
  void flush(const SetRef& set);
  bool empty() const { return ops_.empty(); }

  enum class Kind { kAdd, kDestroy, kFlush };
  struct Op {
    Kind kind;
    SetRef set;
    std::vector<RawElement> elements;
  };
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

// Outcome counters of the backend, for STATUS and tests.
struct BackendStats {
  std::uint64_t batches = 0;
  std::uint64_t messages = 0;
  std::uint64_t failed_batches = 0;
  std::uint64_t lost_acks = 0;  // ENOBUFS on the socket: state unknown, caller must resync
};

// The kernel's sets as the agent sees them. NftBackend is the real one (netlink); unit tests of
// the agent's logic use an in-memory one.
class SetBackend {
 public:
  virtual ~SetBackend() = default;

  // Applies the batch atomically: all of it or none. A missing table or set is kNotFound.
  virtual Status commit(const Batch& batch) = 0;
  // Every element of the set.
  virtual Result<std::vector<ListedElement>> list(const SetRef& set) = 0;
  // Presence and flags of the table and set.
  virtual Result<SetInfo> info(const SetRef& set) = 0;
  // A number that changes with every commit by anyone (the ruleset generation).
  virtual Result<std::uint32_t> generation() = 0;
  // Whether removals are the kernel's own destroy message (else emulated), for STATUS.
  virtual bool destroy_supported() const = 0;
  virtual const BackendStats& stats() const = 0;
};

}  // namespace pvs::agent
