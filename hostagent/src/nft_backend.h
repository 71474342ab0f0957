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

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "set_backend.h"

struct mnl_socket;

namespace pvs::agent {

class NftBackend final : public SetBackend {
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

  bool destroy_supported() const override { return destroy_supported_; }

  // Sends the batch and waits for every acknowledgement. ENOENT from the kernel (table or set
  // missing) comes back as ErrorCode::kNotFound.
  Status commit(const Batch& batch) override;

  // Every element of the set, once each, ordered by key. A dump is restarted if a concurrent
  // commit interrupts it; one that needs more than one message is repeated until two agree
  // (see dump()).
  Result<std::vector<ListedElement>> list(const SetRef& set) override;
  // Presence and flags of the table and set.
  Result<SetInfo> info(const SetRef& set) override;
  // The ruleset generation id (NFT_MSG_GETGEN); it changes with every commit by anyone.
  Result<std::uint32_t> generation() override;

  const BackendStats& stats() const override { return stats_; }

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

  // One NFT_MSG_GETSETELEM dump into `out`; `messages`: how many replies carried it. Each reply
  // after the first is a new walk of the set's hash table that skips what was sent already, so
  // when the table is resized in between (the kernel grows it after a large insert) a dump can
  // miss or repeat elements: measured 8,359-9,864 of 10,000 right after a 10,000-element add.
  Status dump(const SetRef& set, std::vector<ListedElement>* out, int* messages);

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
