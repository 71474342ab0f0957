#include "core/observability/denied_log.h"

namespace pvs::service {

namespace {
constexpr const char* kOther = "other";
}

std::optional<DeniedLog::Line> DeniedLog::record(const std::string& remote, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = windows_.find(remote);
  if (it == windows_.end() && windows_.size() >= options_.max_sources) {
    it = windows_.find(kOther);
  }
  if (it == windows_.end()) {
    const std::string& key = windows_.size() >= options_.max_sources ? kOther : remote;
    windows_.emplace(key, Window{now, 0});
    return Line{key, 1, true};
  }
  ++it->second.unwritten;
  return std::nullopt;
}

std::vector<DeniedLog::Line> DeniedLog::flush(Clock::time_point now) {
  std::vector<Line> out;
  std::lock_guard lock(mu_);
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (now - it->second.start < options_.interval) {
      ++it;
      continue;
    }
    if (it->second.unwritten > 0) out.push_back(Line{it->first, it->second.unwritten, false});
    it = windows_.erase(it);
  }
  return out;
}

std::size_t DeniedLog::tracked() const {
  std::lock_guard lock(mu_);
  return windows_.size();
}

}  // namespace pvs::service
