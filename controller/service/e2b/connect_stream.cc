#include "e2b/connect_stream.h"

namespace pvs::service::e2b {

bool pump_events(std::ostream& out, EventQueue& events,
                 std::chrono::steady_clock::time_point deadline,
                 std::chrono::milliseconds keepalive, const std::string& keepalive_message,
                 const std::function<bool()>& hung_up) {
  out.flush();
  auto quiet_since = std::chrono::steady_clock::now();
  while (out.good()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      out << end_stream(ConnectError{ConnectCode::kDeadlineExceeded, "the call's timeout passed"});
      out.flush();
      return out.good();
    }
    auto wait = std::min<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
        std::chrono::milliseconds(500));
    if (auto m = events.next(wait)) {
      // What is queued already goes out in the same write (start, output and end of a short
      // command are often one flush).
      out << frame(0, *m);
      while (auto more = events.next(std::chrono::milliseconds(0))) out << frame(0, *more);
      if (events.finished()) {
        out << end_stream(events.error());
        out.flush();
        return out.good();
      }
      out.flush();
      quiet_since = std::chrono::steady_clock::now();
      continue;
    }
    if (events.finished()) {
      out << end_stream(events.error());
      out.flush();
      return out.good();
    }
    if (hung_up && hung_up()) return false;
    if (std::chrono::steady_clock::now() - quiet_since >= keepalive) {
      out << frame(0, keepalive_message);
      out.flush();
      quiet_since = std::chrono::steady_clock::now();
    }
  }
  return false;
}

}  // namespace pvs::service::e2b
