// Per-token concurrency: how many requests, and how many streaming execs, one token may have in
// flight at once, so one tenant cannot hold every HTTP thread. Beyond a limit the caller answers
// 429; a slot is held by an RAII guard for the life of the request or stream.
//
//   TokenLimits limits({.requests = 16, .streams = 4});
//   auto slot = limits.acquire(principal.name, TokenLimits::Kind::kRequest);
//   if (!slot) return too_many_requests("at most 16 concurrent requests per token");
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "http/held_slot.h"

namespace pvs::service {

class TokenLimits {
 public:
  enum class Kind { kRequest, kStream };

  struct Options {
    int requests = 16;  // concurrent requests per token (0: no limit)
    int streams = 4;    // concurrent streaming execs per token (0: no limit)
  };

  // Held while the request or stream runs; gives the slot back when destroyed.
  struct SlotKey {
    std::string token;
    Kind kind;
  };
  using Slot = HeldSlot<TokenLimits, SlotKey>;

  explicit TokenLimits(Options options) : options_(options) {}

  // A slot, or nullopt when `token` already holds its limit of `kind`.
  std::optional<Slot> acquire(const std::string& token, Kind kind);

  // Slots of `kind` that `token` holds now.
  int in_use(const std::string& token, Kind kind) const;
  // The configured limit of `kind` (0: none).
  int limit(Kind kind) const {
    return kind == Kind::kRequest ? options_.requests : options_.streams;
  }

 private:
  struct Counts {
    int requests = 0;
    int streams = 0;
  };
  friend Slot;
  void release(const SlotKey& key);
  static int& count_of(Counts& c, Kind kind) {
    return kind == Kind::kRequest ? c.requests : c.streams;
  }

  Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Counts> counts_;  // only tokens holding a slot: bounded by the token list
};

}  // namespace pvs::service
