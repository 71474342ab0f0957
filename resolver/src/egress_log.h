// The resolver's egress log (docs/agent.md "Egress log"): every decision it makes (source,
// queried name, the list entry that matched, the answer's addresses, allowed or refused),
// aggregated per source and window and handed to the agent as ELOG lines (protocol.h). The
// first decision of each (name, allowed) in a window is a line of its own at once (n=1), so a
// refusal is visible before its window ends; so is the first allowed decision with addresses
// when the name's first one had none (a client's AAAA query, answered empty without going
// upstream, is decided before its A query); the window's end sends the rest (n = the others,
// when there were any), which the agent adds to that line.
//
//   EgressLog log({.window_ms = 60000, .max_names_per_source = 32, .max_sources = 4096});
//   if (auto now = log.record({source, "pypi.org", true, "pypi.org", {addr}}, mono_ms()))
//     agent.call(proto::format_egress_log(*now), ...);
//   for (auto& line : log.take(mono_ms())) agent.call(proto::format_egress_log(line), ...);
//
// Bounded by construction: per source at most max_names_per_source names a window (more are
// counted under "*"), so at most three lines for each of them and two for "*" per source and
// window, and at most
// max_sources sources a window (decisions of more are counted in dropped()). Recording is a
// hash lookup on the event loop: a source flooding names costs another source nothing more
// than its own queries do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/protocol.h"

namespace pvs::resolver {

struct EgressDecision {
  Ipv4Address source;
  std::string name;
  bool allowed = false;
  std::string entry;                // the list entry that matched; empty: none
  std::vector<Ipv4Address> answer;  // the addresses handed out (allowed)
};

class EgressLog {
 public:
  struct Limits {
    std::int64_t window_ms = 60000;
    std::uint32_t max_names_per_source = 32;
    std::uint32_t max_sources = 4096;
  };
  explicit EgressLog(Limits limits) : limits_(limits) {}

  // Counts the decision; the line to send at once when it is the first of its (name, allowed)
  // in the source's window (of "*" for names beyond the bound).
  std::optional<proto::EgressLogLine> record(const EgressDecision& d, std::int64_t now_ms);
  // The rest of the aggregates of every window that ended by `now_ms` (every window with `all`):
  // the decisions after each first one, for the aggregates that had more than one; their
  // sources start a new window with their next decision.
  std::vector<proto::EgressLogLine> take(std::int64_t now_ms, bool all = false);
  // Decisions not logged: their source was beyond max_sources in a window.
  std::uint64_t dropped() const { return dropped_; }
  std::size_t sources() const { return windows_.size(); }

 private:
  struct Aggregate {
    std::uint64_t count = 0;
    std::string entry;
    std::vector<Ipv4Address> answer;  // the last one with addresses
    bool answer_sent = false;         // a line with addresses went out at once
  };
  struct Window {
    std::int64_t ends_ms = 0;  // monotonic
    std::int64_t started_unix_ms = 0;
    // (name, allowed) -> aggregate; at most max_names_per_source names.
    std::unordered_map<std::string, Aggregate> allowed, refused;
    std::uint64_t other_allowed = 0, other_refused = 0;  // names beyond the bound
  };
  void emit(const Ipv4Address& source, Window& w, std::vector<proto::EgressLogLine>& out) const;

  Limits limits_;
  std::unordered_map<std::uint32_t, Window> windows_;
  std::int64_t next_due_ms_ = INT64_MAX;  // the earliest ends_ms
  std::uint64_t dropped_ = 0;
};

}  // namespace pvs::resolver
