// Command-line handling every benchmark shares. The constructor reads the whole command line:
// `--help` (or -h) prints the usage and exits 0; an unknown option, an option without its value
// or more plain arguments than the bench takes prints the usage and exits 2. A count that is not
// a whole number in range is refused the same way (instead of atoi's 0 or std::stoi's exception).
//
//   pvs::bench::Args args(argc, argv, "lifecycle_bench [iterations=100]\n  ...", 1);
//   int n = args.count(1, 100);             // 1st plain argument, default 100
//
//   pvs::bench::Args args(argc, argv, "ssh_bench [--runs N]", 0, {"--runs"});
//   int runs = args.count("--runs", 200);   // --runs N or --runs=N, default 200
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pvs::bench {

class Args {
 public:
  // `positionals`: how many plain arguments the bench takes at most; `options`: the options that
  // take a value, spelled with their dashes.
  Args(int argc, char** argv, std::string_view usage, int positionals,
       std::initializer_list<std::string_view> options = {})
      : usage_(usage) {
    for (int i = 1; i < argc; ++i) {
      std::string_view a = argv[i];
      if (a == "--help" || a == "-h") {
        std::printf("usage: %.*s\n", static_cast<int>(usage_.size()), usage_.data());
        std::exit(0);
      }
    }
#ifndef __OPTIMIZE__
    // The clang 19 pass builds the benchmarks at -O0 to keep them warning-free; figures from
    // there are not the product's (and what they start, built alike, is slower too).
    std::printf(
        "NOTE: built without optimisation: these figures are not the product's; measure with "
        "an optimised build (docs/development.md, \"Benchmarks\")\n");
#endif
    for (int i = 1; i < argc; ++i) {
      std::string_view a = argv[i];
      if (a.size() > 1 && a[0] == '-') {
        std::string_view name = a.substr(0, a.find('='));
        if (std::find(options.begin(), options.end(), name) == options.end()) {
          fail("unknown option \"" + std::string(a) + "\"");
        }
        if (name.size() < a.size()) {
          options_[std::string(name)] = std::string(a.substr(name.size() + 1));
        } else if (i + 1 < argc) {
          options_[std::string(name)] = argv[++i];
        } else {
          fail(std::string(name) + " needs a value");
        }
      } else if (static_cast<int>(positionals_.size()) < positionals) {
        positionals_.emplace_back(a);
      } else {
        fail("unexpected argument \"" + std::string(a) + "\"");
      }
    }
  }

  // The index-th plain argument (from 1) as a whole number in [min, max], or `fallback`.
  int count(int index, int fallback, int min = 1, int max = 10'000'000) const {
    auto i = static_cast<std::size_t>(index - 1);
    if (i >= positionals_.size()) return fallback;
    return number(positionals_[i], "argument " + std::to_string(index), min, max);
  }
  // The value of `option` as a whole number in [min, max], or `fallback`.
  int count(std::string_view option, int fallback, int min = 1, int max = 10'000'000) const {
    auto it = options_.find(std::string(option));
    if (it == options_.end()) return fallback;
    return number(it->second, std::string(option), min, max);
  }

  // The index-th plain argument (from 1), or `fallback`.
  std::string word(int index, std::string fallback = "") const {
    auto i = static_cast<std::size_t>(index - 1);
    return i < positionals_.size() ? positionals_[i] : fallback;
  }

  // The value of `option`, one of `allowed`, or `fallback`.
  std::string choice(std::string_view option, std::string fallback,
                     std::initializer_list<std::string_view> allowed) const {
    auto it = options_.find(std::string(option));
    if (it == options_.end()) return fallback;
    if (std::find(allowed.begin(), allowed.end(), it->second) == allowed.end()) {
      fail(std::string(option) + ": not one of the choices");
    }
    return it->second;
  }

  // Prints `why` and the usage, exits 2.
  [[noreturn]] void fail(const std::string& why) const {
    std::fprintf(stderr, "%s\nusage: %.*s\n", why.c_str(), static_cast<int>(usage_.size()),
                 usage_.data());
    std::exit(2);
  }

 private:
  int number(std::string_view text, const std::string& what, int min, int max) const {
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min ||
        value > max) {
      fail(what + ": expected a whole number " + std::to_string(min) + "-" + std::to_string(max) +
           ", got \"" + std::string(text) + "\"");
    }
    return value;
  }

  std::string_view usage_;
  std::vector<std::string> positionals_;
  std::map<std::string, std::string> options_;
};

}  // namespace pvs::bench
