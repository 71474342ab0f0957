// Admission of the resolver's queries (#32): at most `max_inflight` queries between admission and
// answer, at most `per_source` of them from one source. A source's further queries wait in its
// own queue (at most `queued_per_source`, beyond it they are dropped); a freed slot goes to the
// next source in a round robin over the sources that wait, so a source flooding names that the
// upstream answers slowly holds its own slots and never those of the others. All queues together
// hold at most kMaxQueuedTotal jobs (a bound on memory with many sources).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>

namespace pvs::resolver {

class FairQueue {
 public:
  static constexpr std::size_t kMaxQueuedTotal = 8192;

  FairQueue(std::size_t max_inflight, std::size_t per_source, std::size_t queued_per_source)
      : max_inflight_(max_inflight), per_source_(per_source), queued_(queued_per_source) {}

  enum class Admit { kStart, kQueued, kDropped };
  // A new job of `source`: start it now, keep it queued, or drop it.
  Admit submit(std::uint32_t source, std::uint64_t job);

  struct Next {
    std::uint32_t source;
    std::uint64_t job;
  };
  // A job of `source` ended: the queued job that takes its slot, if any (counted as started).
  std::optional<Next> finish(std::uint32_t source);

  std::size_t inflight() const { return total_; }
  std::size_t inflight(std::uint32_t source) const;
  std::size_t queued(std::uint32_t source) const;

 private:
  struct Source {
    std::size_t inflight = 0;
    std::deque<std::uint64_t> queue;
    bool in_ring = false;
  };
  std::size_t max_inflight_;
  std::size_t per_source_;
  std::size_t queued_;
  std::size_t total_ = 0;
  std::size_t queued_total_ = 0;
  std::unordered_map<std::uint32_t, Source> sources_;
  std::deque<std::uint32_t> ring_;  // sources with queued jobs, in serving order
};

}  // namespace pvs::resolver
