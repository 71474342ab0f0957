// Command-line handling every benchmark shares: `--help` prints the usage, a count that is not
// a whole number in range is refused with the usage (instead of std::stoi's exception).
//
//   pvs::bench::Args args(argc, argv, "lifecycle_bench [iterations=100]\n  ...");
//   int n = args.count(1, 100);   // argv[1], default 100; exits 2 on "abc" or "0"
#pragma once

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace pvs::bench {

class Args {
 public:
  Args(int argc, char** argv, std::string_view usage) : argc_(argc), argv_(argv), usage_(usage) {
    for (int i = 1; i < argc; ++i) {
      std::string_view a = argv[i];
      if (a == "--help" || a == "-h") {
        std::printf("usage: %.*s\n", static_cast<int>(usage_.size()), usage_.data());
        std::exit(0);
      }
    }
  }

  // argv[index] as a whole number in [min, max], or `fallback` when absent.
  int count(int index, int fallback, int min = 1, int max = 10'000'000) const {
    if (index >= argc_) return fallback;
    std::string_view text = argv_[index];
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min ||
        value > max) {
      std::fprintf(stderr,
                   "argument %d: expected a whole number %d-%d, got \"%.*s\"\nusage: %.*s\n", index,
                   min, max, static_cast<int>(text.size()), text.data(),
                   static_cast<int>(usage_.size()), usage_.data());
      std::exit(2);
    }
    return value;
  }

  // argv[index], or `fallback` when absent.
  std::string word(int index, std::string fallback = "") const {
    return index < argc_ ? std::string(argv_[index]) : fallback;
  }

 private:
  int argc_;
  char** argv_;
  std::string_view usage_;
};

}  // namespace pvs::bench
