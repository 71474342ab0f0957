#include "pvesandbox/common/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <string>

namespace pvs::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};

constexpr std::string_view kNames[] = {"DEBUG", "INFO", "WARN", "ERROR"};

}  // namespace

void set_level(Level level) {
  g_level.store(level, std::memory_order_relaxed);
}
Level level() {
  return g_level.load(std::memory_order_relaxed);
}

bool parse_level(std::string_view text, Level* out) {
  static constexpr std::string_view kLower[] = {"debug", "info", "warn", "error"};
  for (int i = 0; i < 4; ++i) {
    if (text == kLower[i]) {
      *out = static_cast<Level>(i);
      return true;
    }
  }
  return false;
}

void write(Level lvl, std::string_view message) {
  if (lvl < level()) return;
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[40];
  std::size_t n = std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string line(stamp, n);
  line += '.';
  line += static_cast<char>('0' + millis / 100);
  line += static_cast<char>('0' + millis / 10 % 10);
  line += static_cast<char>('0' + millis % 10);
  line += "Z ";
  line += kNames[static_cast<int>(lvl)];
  line += ' ';
  line += message;
  line += '\n';
  // Best effort: a logger has nowhere to report its own failure.
  std::size_t off = 0;
  while (off < line.size()) {
    ssize_t w = ::write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (w <= 0) break;
    off += static_cast<std::size_t>(w);
  }
}

}  // namespace pvs::log
