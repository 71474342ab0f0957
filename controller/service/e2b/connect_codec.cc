#include "e2b/connect_codec.h"

#include <algorithm>
#include <array>
#include <utility>

#include "http/json.h"
#include "pvesandbox/common/text.h"

namespace pvs::service::e2b {
namespace {

constexpr std::array<std::string_view, 17> kNames = {
    "",          "canceled",       "unknown",           "invalid_argument",   "deadline_exceeded",
    "not_found", "already_exists", "permission_denied", "resource_exhausted", "failed_precondition",
    "aborted",   "out_of_range",   "unimplemented",     "internal",           "unavailable",
    "data_loss", "unauthenticated"};

ConnectCode code_for_status(int status) {
  switch (status) {
    case 400: return ConnectCode::kInvalidArgument;
    case 401: return ConnectCode::kUnauthenticated;
    case 403: return ConnectCode::kPermissionDenied;
    case 404: return ConnectCode::kNotFound;
    case 409: return ConnectCode::kFailedPrecondition;
    case 429: return ConnectCode::kResourceExhausted;
    case 503: return ConnectCode::kUnavailable;
    case 504: return ConnectCode::kDeadlineExceeded;
    default: return status >= 500 ? ConnectCode::kInternal : ConnectCode::kUnknown;
  }
}

std::uint32_t read_u32_be(std::string_view bytes) {
  auto b = [&](std::size_t i) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i]));
  };
  return (b(0) << 24) | (b(1) << 16) | (b(2) << 8) | b(3);
}

void error_object(JsonWriter& w, const ConnectError& error) {
  w.begin_object().key("code").value(code_name(error.code));
  if (!error.message.empty()) w.key("message").value(error.message);
  w.end_object();
}

}  // namespace

std::string_view code_name(ConnectCode code) {
  auto i = static_cast<std::size_t>(code);
  return i < kNames.size() && i > 0 ? kNames[i] : "unknown";
}

std::optional<ConnectCode> code_from_name(std::string_view name) {
  for (std::size_t i = 1; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<ConnectCode>(i);
  return std::nullopt;
}

int http_status(ConnectCode code) {
  switch (code) {
    case ConnectCode::kCanceled: return 499;
    case ConnectCode::kInvalidArgument:
    case ConnectCode::kFailedPrecondition:
    case ConnectCode::kOutOfRange: return 400;
    case ConnectCode::kDeadlineExceeded: return 504;
    case ConnectCode::kNotFound: return 404;
    case ConnectCode::kAlreadyExists:
    case ConnectCode::kAborted: return 409;
    case ConnectCode::kPermissionDenied: return 403;
    case ConnectCode::kResourceExhausted: return 429;
    case ConnectCode::kUnimplemented: return 501;
    case ConnectCode::kUnavailable: return 503;
    case ConnectCode::kUnauthenticated: return 401;
    case ConnectCode::kUnknown:
    case ConnectCode::kInternal:
    case ConnectCode::kDataLoss: return 500;
  }
  return 500;
}

ConnectError from_api_error(const ApiError& error) {
  static const std::pair<std::string_view, ConnectCode> kByCode[] = {
      {"invalid_argument", ConnectCode::kInvalidArgument},
      {"unauthenticated", ConnectCode::kUnauthenticated},
      {"permission_denied", ConnectCode::kPermissionDenied},
      {"not_found", ConnectCode::kNotFound},
      {"method_not_allowed", ConnectCode::kUnimplemented},
      {"already_exists", ConnectCode::kAlreadyExists},
      {"conflict", ConnectCode::kFailedPrecondition},
      {"approval_pending", ConnectCode::kFailedPrecondition},
      {"too_large", ConnectCode::kInvalidArgument},
      {"unsupported_media_type", ConnectCode::kInvalidArgument},
      {"limit_exceeded", ConnectCode::kResourceExhausted},
      {"unavailable", ConnectCode::kUnavailable},
      {"timeout", ConnectCode::kDeadlineExceeded},
      {"internal", ConnectCode::kInternal},
  };
  for (const auto& [name, code] : kByCode)
    if (error.code == name) return {code, error.message};
  return {code_for_status(error.status), error.message};
}

ContentKind classify_content_type(std::string_view content_type) {
  std::string t = ascii_lower(content_type);
  std::string_view rest = t;
  bool stream = false;
  constexpr std::string_view kApp = "application/";
  if (rest.substr(0, kApp.size()) != kApp) return ContentKind::kOther;
  rest.remove_prefix(kApp.size());
  if (rest.substr(0, 8) == "connect+") {
    stream = true;
    rest.remove_prefix(8);
  }
  if (rest == "proto") return stream ? ContentKind::kStreamProto : ContentKind::kUnaryProto;
  if (rest.substr(0, 4) != "json") return ContentKind::kOther;
  rest.remove_prefix(4);
  // Connect allows "; charset=utf-8" (also "utf8", with or without the space).
  if (!rest.empty() && rest != ";charset=utf-8" && rest != "; charset=utf-8" &&
      rest != ";charset=utf8" && rest != "; charset=utf8")
    return ContentKind::kOther;
  return stream ? ContentKind::kStreamJson : ContentKind::kUnaryJson;
}

std::string frame(std::uint8_t flags, std::string_view payload) {
  std::string out;
  out.reserve(kEnvelopeHeader + payload.size());
  auto n = static_cast<std::uint32_t>(payload.size());
  out.push_back(static_cast<char>(flags));
  for (int shift = 24; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((n >> shift) & 0xff));
  out.append(payload);
  return out;
}

std::string end_stream(const std::optional<ConnectError>& error) {
  if (!error) return frame(kFlagEndStream, "{}");
  JsonWriter w;
  w.begin_object().key("error");
  error_object(w, *error);
  w.end_object();
  return frame(kFlagEndStream, w.str());
}

std::string unary_error_body(const ConnectError& error) {
  JsonWriter w;
  error_object(w, error);
  return w.take();
}

EnvelopeResult single_message(std::string_view body, std::size_t max_message) {
  auto bad = [](std::string m) {
    return EnvelopeResult{std::nullopt, ConnectError{ConnectCode::kInvalidArgument, std::move(m)}};
  };
  if (body.size() < kEnvelopeHeader) return bad("protocol error: incomplete envelope header");
  auto flags = static_cast<std::uint8_t>(body[0]);
  std::uint32_t length = read_u32_be(body.substr(1, 4));
  if (flags & kFlagCompressed) return bad("protocol error: compressed messages are not accepted");
  if (flags != 0) return bad("protocol error: unexpected envelope flags");
  if (length > max_message)
    return bad("message of " + std::to_string(length) + " bytes is over the limit of " +
               std::to_string(max_message));
  if (body.size() - kEnvelopeHeader < length) return bad("protocol error: incomplete envelope");
  if (body.size() - kEnvelopeHeader > length)
    return bad("protocol error: a server-streaming request carries exactly one message");
  return EnvelopeResult{std::string(body.substr(kEnvelopeHeader, length)), std::nullopt};
}

std::optional<EnvelopeReader::Frame> EnvelopeReader::next() {
  if (error_ || buffer_.size() < kEnvelopeHeader) return std::nullopt;
  std::uint32_t length = read_u32_be(std::string_view(buffer_).substr(1, 4));
  if (length > max_) {
    error_ = "envelope of " + std::to_string(length) + " bytes is over the limit";
    return std::nullopt;
  }
  if (buffer_.size() - kEnvelopeHeader < length) return std::nullopt;
  Frame f{static_cast<std::uint8_t>(buffer_[0]), buffer_.substr(kEnvelopeHeader, length)};
  buffer_.erase(0, kEnvelopeHeader + length);
  return f;
}

std::optional<std::uint64_t> parse_timeout_ms(std::string_view value) {
  if (value.empty() || value.size() > 10) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

std::chrono::seconds keepalive_interval(std::string_view header) {
  auto s = parse_timeout_ms(header);
  if (!s || *s == 0) return kDefaultKeepalive;
  return std::min(kMaxKeepalive, std::chrono::seconds(*s));
}

}  // namespace pvs::service::e2b
