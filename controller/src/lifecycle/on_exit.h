// Runs a function when it goes out of scope: a create's counters, claims and reserved names are
// given back on every path.
#pragma once

#include <functional>
#include <utility>

namespace pvs::lifecycle {

class OnExit {
 public:
  explicit OnExit(std::function<void()> f) : f_(std::move(f)) {}
  ~OnExit() {
    if (f_) f_();
  }
  OnExit(const OnExit&) = delete;
  OnExit& operator=(const OnExit&) = delete;

 private:
  std::function<void()> f_;
};

}  // namespace pvs::lifecycle
