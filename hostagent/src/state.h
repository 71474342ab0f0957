// The agent's desired state: which addresses have internet (with the wall-clock expiry of their
// lease) and which bridge port is bound to which MAC/IPv4. It survives restarts and reboots in a
// small text file, replaced atomically (write temp, fsync, rename, fsync directory):
//
//   pve-sandbox-agent-state 1
//   epoch 7
//   grant 10.99.0.5 -
//   grant 10.99.0.6 1763900000123        <- expiry, unix milliseconds
//   bind veth100i0 bc:24:11:2a:3b:4c 10.99.0.7
//   egress 10.99.0.8 80,443 pypi.org,*.github.com
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/protocol.h"

namespace pvs::agent {

struct DesiredState {
  // address -> lease expiry in unix milliseconds; nullopt = no lease (permanent until revoked)
  std::map<Ipv4Address, std::optional<std::int64_t>> grants;
  std::map<std::string, proto::Binding> bindings;   // by port
  std::map<Ipv4Address, proto::EgressList> egress;  // allowlists by source (EGRESS)
  std::uint64_t epoch = 0;                          // of the snapshot it was read from

  // Drops leases that ended at or before `now_ms`; returns how many.
  std::size_t prune(std::int64_t now_ms);
  bool operator==(const DesiredState&) const = default;
};

// Strict parser: any unknown line, duplicate or malformed field is an error naming the line.
Result<DesiredState> parse_state(std::string_view text);
std::string format_state(const DesiredState& state);

// nullopt if the file does not exist.
Result<std::optional<DesiredState>> load_state(const std::string& path);
Status save_state(const std::string& path, const DesiredState& state, bool fsync);

// Journal records, one line each, appended to "<state_file>.journal" between snapshots:
//   epoch <n>                       first line: the snapshot epoch this journal continues
//   grant <ipv4> <expiry-ms|->
//   revoke <ipv4>
//   bind <port> <mac> <ipv4>
//   unbind <port>
//   egress <ipv4> <ports> <names>   an EGRESS list (replaces the source's list)
//   egress-off <ipv4>
//   sync <n>                        a SYNC: replaces all grants by the n grant lines that follow
// Applies the records of `text` to `state`. A last line without '\n' is a write cut short by a
// crash (its change was never acknowledged) and is ignored, and so is a `sync` group cut short
// at the end of the journal: a SYNC is replayed whole or not at all. Returns the journal's epoch.
Result<std::uint64_t> apply_journal(std::string_view text, DesiredState* state);

// Appends the journal records of a SYNC that left `grants` as the desired grants.
void append_sync_records(std::string* out,
                         const std::map<Ipv4Address, std::optional<std::int64_t>>& grants);

// The desired state on disk: a snapshot (state_file, written atomically) plus an append-only
// journal, so that a change costs one append (and an fdatasync when `fsync`) instead of a
// rewrite. The journal is folded into a new snapshot when it grows, and on every open().
class StateStore {
 public:
  StateStore(std::string path, bool fsync) : path_(std::move(path)), fsync_(fsync) {}
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Reads snapshot + journal (nullopt: neither exists), then opens a fresh journal.
  Result<std::optional<DesiredState>> open();
  // Appends records (each ending in '\n').
  Status append(std::string_view records);
  // Writes a new snapshot and starts an empty journal of the next epoch.
  Status snapshot(const DesiredState& state);
  std::size_t journal_bytes() const { return journal_bytes_; }
  const std::string& path() const { return path_; }

 private:
  Status start_journal();
  std::string path_;
  bool fsync_;
  std::uint64_t epoch_ = 0;
  int journal_fd_ = -1;
  std::size_t journal_bytes_ = 0;
};

std::int64_t unix_now_ms();

// "egress <ipv4> <ports> <names>\n" and "egress-off <ipv4>\n".
std::string egress_record(Ipv4Address source, const proto::EgressList* list);

}  // namespace pvs::agent
