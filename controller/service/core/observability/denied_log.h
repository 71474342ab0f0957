// Refused authentications, aggregated: one audit line per source per interval with a count, so a
// flood of requests without a valid token cannot fill the disk or grow the controller's memory.
//
//   DeniedLog denied({.interval = std::chrono::seconds(60), .max_sources = 1024});
//   if (auto line = denied.record(remote, now)) audit(*line);   // the first refusal: at once
//   for (auto& line : denied.flush(now)) audit(line);            // the rest, counted, later
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace pvs::service {

class DeniedLog {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::chrono::seconds interval{60};  // one line per source per interval
    std::size_t max_sources = 1024;     // sources tracked at once; further ones pool as "other"
  };

  // What to write: `count` refusals from `remote` (the literal "other" once max_sources are
  // tracked) since the last line written for it; `first` for the line of an interval's first.
  struct Line {
    std::string remote;
    std::uint64_t count = 0;
    bool first = false;
  };

  explicit DeniedLog(Options options) : options_(options) {}

  // Counts one refusal. Returns the line to write now when it is the first refusal of its
  // source in an interval (so one refusal is always on record at once), else nullopt.
  std::optional<Line> record(const std::string& remote, Clock::time_point now);

  // Lines for the sources whose interval has ended with refusals not yet written (their
  // counts); those sources are forgotten. Call it from a timer, or before record().
  std::vector<Line> flush(Clock::time_point now);

  // Sources tracked now (bounded by max_sources + 1).
  std::size_t tracked() const;

 private:
  struct Window {
    Clock::time_point start;
    std::uint64_t unwritten = 0;
  };
  Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Window> windows_;
};

}  // namespace pvs::service
