// An in-memory SetBackend: the kernel's sets as a map, for unit tests of the agent's logic
// without root or a network namespace. Commits are atomic (all ops or none), every commit moves
// the generation, and a test can play the other writers (flush_externally) or a failing kernel.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "set_backend.h"

namespace pvs::test {

class MemorySets final : public agent::SetBackend {
 public:
  struct Set {
    bool has_timeout = true;
    std::uint32_t key_len = 4;
    std::uint64_t timeout_ms = 0;
    std::vector<agent::ListedElement> elements;
  };

  // Declares a set (as the ruleset file would).
  void declare(const agent::SetRef& ref, Set set) { sets_[ref.to_string()] = std::move(set); }
  // Another writer empties a set (nft flush set ...).
  void flush_externally(const agent::SetRef& ref) {
    sets_.at(ref.to_string()).elements.clear();
    ++generation_;
  }
  // The next commit fails with this error, changing nothing.
  void fail_next_commit(ErrorCode code, std::string message) {
    next_failure_ = std::make_pair(code, std::move(message));
  }
  // The kernel's own writes (a rule's `add @set`): elements with counters.
  void put_externally(const agent::SetRef& ref, agent::ListedElement element) {
    auto& elements = sets_.at(ref.to_string()).elements;
    std::erase_if(elements, [&](auto& x) { return x.key == element.key; });
    elements.push_back(std::move(element));
  }
  std::size_t commits() const { return commits_; }
  const Set* find(const agent::SetRef& ref) const {
    auto it = sets_.find(ref.to_string());
    return it == sets_.end() ? nullptr : &it->second;
  }

  Status commit(const agent::Batch& batch) override {
    if (next_failure_) {
      auto [code, message] = *next_failure_;
      next_failure_.reset();
      ++stats_.failed_batches;
      return fail(code, message);
    }
    auto next = sets_;
    for (const auto& op : batch.ops()) {
      auto it = next.find(op.set.to_string());
      if (it == next.end()) return fail(ErrorCode::kNotFound, op.set.to_string() + ": missing");
      auto& elements = it->second.elements;
      for (const auto& e : op.elements)
        std::erase_if(elements, [&](auto& x) { return x.key == e.key; });
      if (op.kind == agent::Batch::Kind::kFlush) elements.clear();
      if (op.kind == agent::Batch::Kind::kAdd) {
        for (const auto& e : op.elements) elements.push_back({e.key, e.timeout_ms, std::nullopt});
      }
    }
    sets_ = std::move(next);
    ++generation_;
    ++commits_;
    ++stats_.batches;
    return {};
  }
  Result<std::vector<agent::ListedElement>> list(const agent::SetRef& ref) override {
    const Set* set = find(ref);
    if (set == nullptr) return fail(ErrorCode::kNotFound, ref.to_string() + ": missing");
    return set->elements;
  }
  Result<agent::SetInfo> info(const agent::SetRef& ref) override {
    const Set* set = find(ref);
    if (set == nullptr) return agent::SetInfo{};
    return agent::SetInfo{true, true, set->has_timeout, set->key_len, set->timeout_ms};
  }
  Result<std::uint32_t> generation() override { return generation_; }
  bool destroy_supported() const override { return true; }
  const agent::BackendStats& stats() const override { return stats_; }

 private:
  std::map<std::string, Set> sets_;
  std::uint32_t generation_ = 1;
  std::size_t commits_ = 0;
  std::optional<std::pair<ErrorCode, std::string>> next_failure_;
  agent::BackendStats stats_;
};

}  // namespace pvs::test
