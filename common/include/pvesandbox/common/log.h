// A minimal, thread-safe logger: one line per message on stderr (journald adds its own
// metadata under systemd).
//
//   pvs::log::info("granted 10.99.0.7 uid=0");
//
// Lines look like "2026-11-22T15:04:05.123Z INFO granted ...". Secrets never go into a message;
// untrusted text is passed through pvs::quoted() first.
#pragma once

#include <string_view>

namespace pvs::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_level(Level level);
Level level();
// Parses "debug", "info", "warn", "error"; false if unknown.
bool parse_level(std::string_view text, Level* out);

// Writes the line with a single write(2), so concurrent lines never interleave.
void write(Level level, std::string_view message);

inline void debug(std::string_view message) {
  write(Level::kDebug, message);
}
inline void info(std::string_view message) {
  write(Level::kInfo, message);
}
inline void warn(std::string_view message) {
  write(Level::kWarn, message);
}
inline void error(std::string_view message) {
  write(Level::kError, message);
}

}  // namespace pvs::log
