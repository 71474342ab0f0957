#include "id_pool.h"

#include <cassert>
#include <string>

namespace pvs {

IdPool::IdPool(std::uint32_t first, std::uint32_t last)
    : first_(first), last_(last), states_(std::size_t{last} - first + 1, State::kFree) {
  assert(first <= last && std::size_t{last} - first < (std::size_t{1} << 24));
}

Result<std::uint32_t> IdPool::acquire() {
  std::lock_guard lock(mu_);
  for (std::size_t i = hint_; i < states_.size(); ++i) {
    if (states_[i] == State::kFree) {
      states_[i] = State::kUsed;
      ++used_;
      hint_ = i + 1;
      return first_ + static_cast<std::uint32_t>(i);
    }
  }
  hint_ = states_.size();
  return fail(ErrorCode::kUnavailable, "no free number left in " + std::to_string(first_) + "-" +
                                           std::to_string(last_) + " (" + std::to_string(used_) +
                                           " used, " + std::to_string(quarantined_) +
                                           " quarantined)");
}

void IdPool::mark_used(std::uint32_t id) {
  if (!in_range(id)) return;
  std::lock_guard lock(mu_);
  State& s = states_[id - first_];
  if (s == State::kQuarantined) --quarantined_;
  if (s != State::kUsed) ++used_;
  s = State::kUsed;
}

void IdPool::release(std::uint32_t id) {
  if (!in_range(id)) return;
  std::lock_guard lock(mu_);
  std::size_t i = id - first_;
  if (states_[i] != State::kUsed) return;
  states_[i] = State::kFree;
  --used_;
  if (i < hint_) hint_ = i;
}

void IdPool::quarantine(std::uint32_t id) {
  if (!in_range(id)) return;
  std::lock_guard lock(mu_);
  State& s = states_[id - first_];
  if (s == State::kUsed) --used_;
  if (s != State::kQuarantined) ++quarantined_;
  s = State::kQuarantined;
}

void IdPool::release_quarantined(std::uint32_t id) {
  if (!in_range(id)) return;
  std::lock_guard lock(mu_);
  std::size_t i = id - first_;
  if (states_[i] != State::kQuarantined) return;
  states_[i] = State::kFree;
  --quarantined_;
  if (i < hint_) hint_ = i;
}

IdPool::State IdPool::state(std::uint32_t id) const {
  if (!in_range(id)) return State::kUsed;  // not ours: never available
  std::lock_guard lock(mu_);
  return states_[id - first_];
}

std::size_t IdPool::used() const {
  std::lock_guard lock(mu_);
  return used_;
}

std::size_t IdPool::quarantined() const {
  std::lock_guard lock(mu_);
  return quarantined_;
}

Result<std::unique_ptr<AddressPool>> AddressPool::create(const Cidr& cidr, Ipv4Address gateway,
                                                         const std::vector<Cidr>& reserved) {
  if (cidr.prefix() < 8 || cidr.prefix() > 30) {
    return fail(ErrorCode::kInvalidArgument,
                "sandbox network " + cidr.to_string() + " must be between /8 and /30");
  }
  if (!cidr.is_host(gateway)) {
    return fail(ErrorCode::kInvalidArgument,
                "gateway " + gateway.to_string() + " is not a host address of " + cidr.to_string());
  }
  std::unique_ptr<AddressPool> pool(new AddressPool(cidr, gateway));
  pool->ids_.mark_used(cidr.network().to_uint());
  pool->ids_.mark_used(cidr.broadcast().to_uint());
  pool->ids_.mark_used(gateway.to_uint());
  for (const Cidr& r : reserved) {
    for (Ipv4Address a : r) pool->ids_.mark_used(a.to_uint());
  }
  pool->unusable_ = pool->ids_.used();
  return pool;
}

AddressPool::AddressPool(const Cidr& cidr, Ipv4Address gateway)
    : cidr_(cidr), gateway_(gateway), ids_(cidr.network().to_uint(), cidr.broadcast().to_uint()) {}

Result<Ipv4Address> AddressPool::acquire() {
  auto id = ids_.acquire();
  if (!id) {
    return fail(ErrorCode::kUnavailable, "no free address left in " + cidr_.to_string());
  }
  return Ipv4Address(*id);
}

}  // namespace pvs
