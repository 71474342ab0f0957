#include "egress_log.h"

#include <algorithm>
#include <chrono>

namespace pvs::resolver {

std::optional<proto::EgressLogLine> EgressLog::record(const EgressDecision& d,
                                                      std::int64_t now_ms) {
  auto it = windows_.find(d.source.to_uint());
  if (it == windows_.end()) {
    if (windows_.size() >= limits_.max_sources) {
      ++dropped_;
      return std::nullopt;
    }
    Window w;
    w.ends_ms = now_ms + limits_.window_ms;
    w.started_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    next_due_ms_ = std::min(next_due_ms_, w.ends_ms);
    it = windows_.emplace(d.source.to_uint(), std::move(w)).first;
  }
  Window& w = it->second;
  auto& names = d.allowed ? w.allowed : w.refused;
  auto agg = names.find(d.name);
  if (agg == names.end()) {
    if (w.allowed.size() + w.refused.size() >= limits_.max_names_per_source) {
      if (++(d.allowed ? w.other_allowed : w.other_refused) > 1) return std::nullopt;
      return proto::EgressLogLine{d.source, "*", d.allowed, 1, w.started_unix_ms, "", {}};
    }
    // The first decision of the name in this window goes to the agent at once.
    std::vector<Ipv4Address> to;
    if (d.allowed) to = d.answer;
    names.emplace(d.name, Aggregate{0, "", {}, !to.empty()});
    return proto::EgressLogLine{d.source, d.name, d.allowed, 1, w.started_unix_ms, d.entry, to};
  }
  Aggregate& a = agg->second;
  if (d.allowed && !d.answer.empty() && !a.answer_sent) {
    // The first answer with addresses: at once too (the name's first line had none), as one
    // more decision of that line.
    a.answer_sent = true;
    return proto::EgressLogLine{d.source, d.name, true, 1, w.started_unix_ms, d.entry, d.answer};
  }
  ++a.count;
  a.entry = d.entry;
  if (d.allowed && !d.answer.empty()) a.answer = d.answer;
  return std::nullopt;
}

void EgressLog::emit(const Ipv4Address& source, Window& w,
                     std::vector<proto::EgressLogLine>& out) const {
  for (bool allowed : {true, false}) {
    // Aggregates count the decisions after the first (sent by record()).
    for (auto& [name, a] : allowed ? w.allowed : w.refused) {
      if (a.count == 0) continue;
      out.push_back(
          {source, name, allowed, a.count, w.started_unix_ms, a.entry, std::move(a.answer)});
    }
    if (std::uint64_t other = allowed ? w.other_allowed : w.other_refused; other > 1)
      out.push_back({source, "*", allowed, other - 1, w.started_unix_ms, "", {}});
  }
}

std::vector<proto::EgressLogLine> EgressLog::take(std::int64_t now_ms, bool all) {
  std::vector<proto::EgressLogLine> out;
  if (!all && now_ms < next_due_ms_) return out;
  next_due_ms_ = INT64_MAX;
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (all || it->second.ends_ms <= now_ms) {
      emit(Ipv4Address(it->first), it->second, out);
      it = windows_.erase(it);
    } else {
      next_due_ms_ = std::min(next_due_ms_, it->second.ends_ms);
      ++it;
    }
  }
  return out;
}

}  // namespace pvs::resolver
