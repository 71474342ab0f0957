#include "http/token_limits.h"

namespace pvs::service {

std::optional<TokenLimits::Slot> TokenLimits::acquire(const std::string& token, Kind kind) {
  std::lock_guard lock(mu_);
  Counts& c = counts_[token];
  int& n = count_of(c, kind);
  int max = limit(kind);
  if (max > 0 && n >= max) {
    if (c.requests == 0 && c.streams == 0) counts_.erase(token);
    return std::nullopt;
  }
  ++n;
  return Slot(this, {token, kind});
}

void TokenLimits::release(const SlotKey& key) {
  std::lock_guard lock(mu_);
  auto it = counts_.find(key.token);
  if (it == counts_.end()) return;
  --count_of(it->second, key.kind);
  if (it->second.requests == 0 && it->second.streams == 0) counts_.erase(it);
}

int TokenLimits::in_use(const std::string& token, Kind kind) const {
  std::lock_guard lock(mu_);
  auto it = counts_.find(token);
  if (it == counts_.end()) return 0;
  Counts c = it->second;
  return count_of(c, kind);
}

}  // namespace pvs::service
