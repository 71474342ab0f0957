// The Connect protocol (connectrpc.com/docs/protocol) as the E2B SDK's envd client speaks it:
// the JSON codec over HTTP/1.1, unary calls and server streams. Pure functions, no I/O.
//
//   unary          request  POST /<service>/<Method>, Content-Type application/json, the message
//                  reply    200 application/json with the message, or an error status with
//                           {"code":"not_found","message":"..."}
//   server stream  request  Content-Type application/connect+json, one enveloped message
//                  reply    200 application/connect+json, enveloped messages, then one frame
//                           with flag 0x02 (end of stream) carrying {} or {"error":{...}}
//
// An envelope is [flags u8][length u32 big-endian][length bytes]; flag 0x01 is a compressed
// message (never sent or accepted here: no compression is offered), 0x02 the end of stream.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "http/api_error.h"

namespace pvs::service::e2b {

// Connect's error codes (the gRPC codes without OK).
enum class ConnectCode {
  kCanceled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

struct ConnectError {
  ConnectCode code = ConnectCode::kUnknown;
  std::string message;
};

// "not_found", "invalid_argument", ... (snake case of the code's name).
std::string_view code_name(ConnectCode code);
std::optional<ConnectCode> code_from_name(std::string_view name);
// The HTTP status of a unary error reply (Connect's table: not_found 404, unavailable 503...).
int http_status(ConnectCode code);
// Our API error as a Connect error: its `code` decides ("not_found" -> kNotFound, ...;
// "approval_pending" -> kFailedPrecondition, unknown codes by status), the message is kept.
ConnectError from_api_error(const ApiError& error);

// What a request's Content-Type says.
enum class ContentKind { kUnaryJson, kStreamJson, kUnaryProto, kStreamProto, kOther };
ContentKind classify_content_type(std::string_view content_type);

inline constexpr std::uint8_t kFlagCompressed = 0x01;
inline constexpr std::uint8_t kFlagEndStream = 0x02;
inline constexpr std::size_t kEnvelopeHeader = 5;

// One envelope around `payload`.
std::string frame(std::uint8_t flags, std::string_view payload);
// The end-of-stream frame: {} or {"error":{"code":"...","message":"..."}}.
std::string end_stream(const std::optional<ConnectError>& error);
// A unary error reply's body: {"code":"...","message":"..."}.
std::string unary_error_body(const ConnectError& error);

// The one message of a server-stream request body: exactly one uncompressed, non-end-stream
// envelope of at most max_message bytes and nothing after it. An InvalidArgument error
// otherwise (a truncated header or message, trailing bytes, a compressed or end flag).
struct EnvelopeResult {
  std::optional<std::string> message;
  std::optional<ConnectError> error;
};
EnvelopeResult single_message(std::string_view body, std::size_t max_message);

// Reads envelopes from bytes arriving in pieces (a client of a stream, tests). feed() then
// next() until it returns nullopt; error() is set once the input cannot be framed.
class EnvelopeReader {
 public:
  explicit EnvelopeReader(std::size_t max_message) : max_(max_message) {}
  struct Frame {
    std::uint8_t flags = 0;
    std::string payload;
  };
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  std::optional<Frame> next();
  const std::optional<std::string>& error() const { return error_; }
  // Bytes received and not yet a whole frame.
  std::size_t pending() const { return buffer_.size(); }

 private:
  std::size_t max_;
  std::string buffer_;
  std::optional<std::string> error_;
};

// Connect-Timeout-Ms: 1 to 10 ASCII digits; nullopt when malformed.
std::optional<std::uint64_t> parse_timeout_ms(std::string_view value);

// How often a quiet stream sends a keepalive: the Keepalive-Ping-Interval header's seconds (the
// SDK sends 50), kDefaultKeepalive when absent, zero or malformed, at most kMaxKeepalive. A
// keepalive write is how a reader that went away is found, so the header cannot make a stream
// hold its HTTP worker for an hour after its reader left (#46 finding 2).
inline constexpr std::chrono::seconds kDefaultKeepalive{50};
inline constexpr std::chrono::seconds kMaxKeepalive{60};
std::chrono::seconds keepalive_interval(std::string_view header);

}  // namespace pvs::service::e2b
