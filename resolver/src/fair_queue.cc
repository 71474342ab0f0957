#include "fair_queue.h"

namespace pvs::resolver {

FairQueue::Admit FairQueue::submit(std::uint32_t source, std::uint64_t job) {
  Source& s = sources_[source];
  if (s.queue.empty() && s.inflight < per_source_ && total_ < max_inflight_) {
    ++s.inflight;
    ++total_;
    return Admit::kStart;
  }
  if (s.queue.size() >= queued_ || queued_total_ >= kMaxQueuedTotal) {
    if (s.inflight == 0 && s.queue.empty()) sources_.erase(source);
    return Admit::kDropped;
  }
  s.queue.push_back(job);
  ++queued_total_;
  if (!s.in_ring) {
    s.in_ring = true;
    ring_.push_back(source);
  }
  return Admit::kQueued;
}

std::optional<FairQueue::Next> FairQueue::finish(std::uint32_t source) {
  auto it = sources_.find(source);
  if (it != sources_.end() && it->second.inflight > 0) {
    --it->second.inflight;
    --total_;
    if (it->second.inflight == 0 && it->second.queue.empty()) sources_.erase(it);
  }
  if (total_ >= max_inflight_) return std::nullopt;
  // One slot is free: the first waiting source that is under its own cap takes it.
  for (std::size_t tries = ring_.size(); tries > 0; --tries) {
    std::uint32_t next = ring_.front();
    ring_.pop_front();
    Source& s = sources_[next];
    if (s.inflight >= per_source_) {
      ring_.push_back(next);
      continue;
    }
    std::uint64_t job = s.queue.front();
    s.queue.pop_front();
    --queued_total_;
    ++s.inflight;
    ++total_;
    if (s.queue.empty()) {
      s.in_ring = false;
    } else {
      ring_.push_back(next);
    }
    return Next{next, job};
  }
  return std::nullopt;
}

std::size_t FairQueue::inflight(std::uint32_t source) const {
  auto it = sources_.find(source);
  return it == sources_.end() ? 0 : it->second.inflight;
}

std::size_t FairQueue::queued(std::uint32_t source) const {
  auto it = sources_.find(source);
  return it == sources_.end() ? 0 : it->second.queue.size();
}

}  // namespace pvs::resolver
