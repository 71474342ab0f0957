// A place held among an owner's counts (TokenLimits: requests and streams per token;
// WsSessions: terminal WebSockets per token and in all), given back when its holder is
// destroyed. RAII and move-only; only the owner makes one, and it is told once:
// owner->release(key).
//
//   using Slot = HeldSlot<TokenLimits, TokenLimits::SlotKey>;
//   return Slot(this, {token, kind});   // in the owner, after counting it
#pragma once

#include <utility>

namespace pvs::service {

template <class Owner, class Key>
class HeldSlot {
 public:
  HeldSlot(HeldSlot&& other) noexcept
      : owner_(std::exchange(other.owner_, nullptr)), key_(std::move(other.key_)) {}
  HeldSlot& operator=(HeldSlot&&) = delete;
  HeldSlot(const HeldSlot&) = delete;
  HeldSlot& operator=(const HeldSlot&) = delete;
  ~HeldSlot() {
    if (owner_) owner_->release(key_);
  }

 private:
  friend Owner;
  HeldSlot(Owner* owner, Key key) : owner_(owner), key_(std::move(key)) {}
  Owner* owner_;
  Key key_;
};

}  // namespace pvs::service
