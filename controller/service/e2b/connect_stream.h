// A Connect server stream on a Poco HTTP response: the reply's head, each event as an envelope
// (flushed at once), keepalives while the process is quiet, the end-of-stream frame.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

#include <ostream>

#include "e2b/processes.h"

namespace pvs::service::e2b {

// Streams `events` on a reply already begun (200 application/connect+json, chunked) until they
// end, the deadline passes (then a deadline_exceeded end) or the client goes away (false): a
// write fails, or `hung_up` says so while the stream is quiet (checked at least every 0.5 s). A
// keepalive event goes out after `keepalive` without one.
bool pump_events(std::ostream& out, EventQueue& events,
                 std::chrono::steady_clock::time_point deadline,
                 std::chrono::milliseconds keepalive, const std::string& keepalive_message,
                 const std::function<bool()>& hung_up);

}  // namespace pvs::service::e2b
