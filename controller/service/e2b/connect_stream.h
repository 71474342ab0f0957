// A Connect server stream on a Poco HTTP response: the reply's head, each event as an envelope
// (flushed at once), keepalives while the process is quiet, the end-of-stream frame.
#pragma once

#include <chrono>
#include <optional>

#include <Poco/Net/HTTPServerResponse.h>

#include "e2b/processes.h"

namespace pvs::service::e2b {

// Sends 200 application/connect+json (chunked) and streams `events` until they end, the
// deadline passes (then a deadline_exceeded end) or the client goes away (false). A keepalive
// event goes out after `keepalive` without one.
bool stream_events(Poco::Net::HTTPServerResponse& response, EventQueue& events,
                   std::chrono::steady_clock::time_point deadline,
                   std::chrono::milliseconds keepalive);

// A whole unary reply: 200 application/json with `json`, or the error with its status.
void send_unary(Poco::Net::HTTPServerResponse& response, const std::string& json);
void send_unary_error(Poco::Net::HTTPServerResponse& response, const ConnectError& error);
// A stream that fails before its first message: 200 with only the end-of-stream frame (as
// Connect servers answer errors of a stream).
void send_stream_error(Poco::Net::HTTPServerResponse& response, const ConnectError& error);

}  // namespace pvs::service::e2b
