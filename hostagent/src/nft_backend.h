// The agent's netlink backend: set elements of nftables sets, over one persistent
// NETLINK_NETFILTER socket (libmnl for the socket, libnftnl for the messages).
//
// Every change is one batch (BATCH_BEGIN ... BATCH_END) sent with a single sendmsg(); every
// message in it carries NLM_F_ACK, and a change succeeds only if every message was acknowledged
// with 0 (the kernel acknowledges good messages of a batch that another message aborted).
//
// Deleting a missing element aborts a whole batch. Kernels >= 6.3 have NFT_MSG_DESTROYSETELEM,
// which does not; the backend probes for it at open() and otherwise emulates it with an add
// followed by a delete of the same element in the same batch.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/protocol.h"

struct mnl_socket;

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

 private:
  std::array<std::uint8_t, kMaxSize> bytes_{};
  std::uint8_t size_ = 0;
};

// An element to add or remove, with an optional timeout.
struct RawElement {
  ElementKey key;
  std::optional<std::uint64_t> timeout_ms;
};

// An element as dumped: its key and, for elements with a timeout, the milliseconds left.
struct ListedElement {
  ElementKey key;
  std::optional<std::uint64_t> expires_in_ms;
};

struct SetInfo {
  bool table_present = false;
  bool set_present = false;
  bool has_timeout = false;  // declared with `flags timeout`
  std::uint32_t key_len = 0;
};

// Key encodings of the contract's sets.
ElementKey ipv4_key(Ipv4Address address);
// `ifname . ether_addr` (16 + 8 bytes) and `ifname . ipv4_addr` (16 + 4 bytes).
ElementKey port_mac_key(const std::string& port, const MacAddress& mac);
ElementKey port_ip4_key(const std::string& port, Ipv4Address address);
// Decoders for dumped keys; nullopt when the length does not match.
std::optional<Ipv4Address> decode_ipv4_key(const ElementKey& key);
std::optional<std::pair<std::string, MacAddress>> decode_port_mac_key(const ElementKey& key);
std::optional<std::pair<std::string, Ipv4Address>> decode_port_ip4_key(const ElementKey& key);

// A batch under construction. Operations are applied in order, atomically, by
// NftBackend::commit().
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

 private:
  friend class NftBackend;
  enum class Kind { kAdd, kDestroy, kFlush };
  struct Op {
    Kind kind;
    SetRef set;
    std::vector<RawElement> elements;
  };
  std::vector<Op> ops_;
};

// Outcome counters of the backend, for STATUS and tests.
struct BackendStats {
  std::uint64_t batches = 0;
  std::uint64_t messages = 0;
  std::uint64_t failed_batches = 0;
  std::uint64_t lost_acks = 0;  // ENOBUFS on the socket: state unknown, caller must resync
};

class NftBackend {
 public:
  struct Options {
    // nullopt: probe the kernel; false forces the add+delete emulation (for tests on new kernels).
    std::optional<bool> use_destroy;
    // SO_SNDBUF/SO_RCVBUF (FORCE variants when permitted), so big batches fit one sendmsg().
    int socket_buffer_bytes = 16 * 1024 * 1024;
    // How long to wait for the kernel's acknowledgements.
    int ack_timeout_ms = 5000;
  };

  // Opens the socket in the calling thread's network namespace.
  static Result<std::unique_ptr<NftBackend>> open(const Options& options);
  static Result<std::unique_ptr<NftBackend>> open() { return open(Options{}); }
  ~NftBackend();
  NftBackend(const NftBackend&) = delete;
  NftBackend& operator=(const NftBackend&) = delete;

  bool destroy_supported() const { return destroy_supported_; }

  // Sends the batch and waits for every acknowledgement. ENOENT from the kernel (table or set
  // missing) comes back as ErrorCode::kNotFound.
  Status commit(const Batch& batch);

  // Every element of the set (restarted if a concurrent commit interrupts the dump).
  Result<std::vector<ListedElement>> list(const SetRef& set);
  // Presence and flags of the table and set.
  Result<SetInfo> info(const SetRef& set);
  // The ruleset generation id (NFT_MSG_GETGEN); it changes with every commit by anyone.
  Result<std::uint32_t> generation();

  const BackendStats& stats() const { return stats_; }

 private:
  NftBackend() = default;
  Status probe_destroy();
  // Sends `len` bytes of messages and collects the acknowledgements of `expected` seqs
  // (plus errors on `batch_seq`, the BATCH_BEGIN).
  Status send_and_ack(const char* buf, std::size_t len, std::uint32_t first_seq,
                      std::uint32_t last_seq, std::uint32_t batch_seq);
  // Sends one request message and calls `on_msg` for each reply until DONE or the ack.
  template <typename F>
  Status request(const char* buf, std::size_t len, std::uint32_t seq, F&& on_msg);

  std::uint32_t next_seq() { return seq_++; }
  void drain();

  mnl_socket* nl_ = nullptr;
  std::uint32_t portid_ = 0;
  std::uint32_t seq_ = 1;
  bool destroy_supported_ = false;
  bool need_drain_ = false;
  int ack_timeout_ms_ = 5000;
  std::vector<char> rx_;
  std::vector<char> tx_;
  BackendStats stats_;
};

}  // namespace pvs::agent
