#include "e2b/connect_codec.h"

#include <gtest/gtest.h>

namespace pvs::service::e2b {
namespace {

TEST(ConnectCodec, CodeNamesRoundTrip) {
  for (int i = 1; i <= 16; ++i) {
    auto code = static_cast<ConnectCode>(i);
    auto back = code_from_name(code_name(code));
    ASSERT_TRUE(back.has_value()) << i;
    EXPECT_EQ(*back, code);
  }
  EXPECT_EQ(code_name(ConnectCode::kNotFound), "not_found");
  EXPECT_EQ(code_name(ConnectCode::kDeadlineExceeded), "deadline_exceeded");
  EXPECT_FALSE(code_from_name("ok").has_value());
  EXPECT_FALSE(code_from_name("").has_value());
}

TEST(ConnectCodec, HttpStatusFollowsTheSpec) {
  EXPECT_EQ(http_status(ConnectCode::kNotFound), 404);
  EXPECT_EQ(http_status(ConnectCode::kInvalidArgument), 400);
  EXPECT_EQ(http_status(ConnectCode::kUnauthenticated), 401);
  EXPECT_EQ(http_status(ConnectCode::kPermissionDenied), 403);
  EXPECT_EQ(http_status(ConnectCode::kAlreadyExists), 409);
  EXPECT_EQ(http_status(ConnectCode::kResourceExhausted), 429);
  EXPECT_EQ(http_status(ConnectCode::kUnimplemented), 501);
  EXPECT_EQ(http_status(ConnectCode::kUnavailable), 503);
  EXPECT_EQ(http_status(ConnectCode::kDeadlineExceeded), 504);
  EXPECT_EQ(http_status(ConnectCode::kCanceled), 499);
}

TEST(ConnectCodec, ApiErrorsMapByCode) {
  EXPECT_EQ(from_api_error(not_found("no sandbox")).code, ConnectCode::kNotFound);
  EXPECT_EQ(from_api_error(not_found("no sandbox")).message, "no sandbox");
  EXPECT_EQ(from_api_error(bad_request("x")).code, ConnectCode::kInvalidArgument);
  EXPECT_EQ(from_api_error(unauthenticated()).code, ConnectCode::kUnauthenticated);
  EXPECT_EQ(from_api_error(limit_exceeded("x")).code, ConnectCode::kResourceExhausted);
  EXPECT_EQ(from_api_error(unavailable("x")).code, ConnectCode::kUnavailable);
  EXPECT_EQ(from_api_error(ApiError{409, "approval_pending", "ap-1"}).code,
            ConnectCode::kFailedPrecondition);
  EXPECT_EQ(from_api_error(ApiError{403, "permission_denied", "x"}).code,
            ConnectCode::kPermissionDenied);
  EXPECT_EQ(from_api_error(ApiError{507, "insufficient_storage", "x"}).code,
            ConnectCode::kInternal);
  EXPECT_EQ(from_api_error(ApiError{418, "teapot", "x"}).code, ConnectCode::kUnknown);
}

TEST(ConnectCodec, ContentTypes) {
  EXPECT_EQ(classify_content_type("application/json"), ContentKind::kUnaryJson);
  EXPECT_EQ(classify_content_type("application/json; charset=utf-8"), ContentKind::kUnaryJson);
  EXPECT_EQ(classify_content_type("Application/JSON;charset=utf8"), ContentKind::kUnaryJson);
  EXPECT_EQ(classify_content_type("application/connect+json"), ContentKind::kStreamJson);
  EXPECT_EQ(classify_content_type("application/proto"), ContentKind::kUnaryProto);
  EXPECT_EQ(classify_content_type("application/connect+proto"), ContentKind::kStreamProto);
  EXPECT_EQ(classify_content_type("application/jsonx"), ContentKind::kOther);
  EXPECT_EQ(classify_content_type("text/plain"), ContentKind::kOther);
  EXPECT_EQ(classify_content_type(""), ContentKind::kOther);
}

TEST(ConnectCodec, FrameLayout) {
  std::string f = frame(0, "{}");
  ASSERT_EQ(f.size(), 7u);
  EXPECT_EQ(f[0], 0);
  EXPECT_EQ(std::string(f.data() + 1, 4), std::string("\0\0\0\2", 4));
  EXPECT_EQ(f.substr(5), "{}");
  std::string big(70000, 'x');
  std::string g = frame(kFlagEndStream, big);
  EXPECT_EQ(static_cast<unsigned char>(g[0]), 2u);
  EXPECT_EQ(static_cast<unsigned char>(g[2]), 0x01u);  // 70000 = 0x00011170
  EXPECT_EQ(static_cast<unsigned char>(g[3]), 0x11u);
  EXPECT_EQ(static_cast<unsigned char>(g[4]), 0x70u);
}

TEST(ConnectCodec, EndStreamAndUnaryErrors) {
  EXPECT_EQ(end_stream(std::nullopt), frame(kFlagEndStream, "{}"));
  EXPECT_EQ(end_stream(ConnectError{ConnectCode::kNotFound, "no \"x\""}),
            frame(kFlagEndStream, R"({"error":{"code":"not_found","message":"no \"x\""}})"));
  EXPECT_EQ(unary_error_body({ConnectCode::kPermissionDenied, "denied"}),
            R"({"code":"permission_denied","message":"denied"})");
  EXPECT_EQ(unary_error_body({ConnectCode::kInternal, ""}), R"({"code":"internal"})");
}

TEST(ConnectCodec, SingleMessage) {
  auto ok = single_message(frame(0, R"({"a":1})"), 100);
  ASSERT_TRUE(ok.message) << ok.error->message;
  EXPECT_EQ(*ok.message, R"({"a":1})");
  EXPECT_TRUE(single_message(frame(0, ""), 100).message);
  auto check_bad = [](std::string body, std::string_view what) {
    auto r = single_message(body, 100);
    ASSERT_FALSE(r.message) << what;
    EXPECT_EQ(r.error->code, ConnectCode::kInvalidArgument);
    EXPECT_NE(r.error->message.find(what), std::string::npos) << r.error->message;
  };
  check_bad("", "incomplete envelope header");
  check_bad(std::string("\0\0\0", 3), "incomplete envelope header");
  check_bad(frame(0, "{}").substr(0, 6), "incomplete envelope");
  check_bad(frame(0, "{}") + "x", "exactly one message");
  check_bad(frame(0, "{}") + frame(0, "{}"), "exactly one message");
  check_bad(frame(kFlagCompressed, "{}"), "compressed");
  check_bad(frame(kFlagEndStream, "{}"), "unexpected envelope flags");
  check_bad(frame(0, std::string(101, 'x')), "over the limit");
  // A length claiming 4 GiB is refused without waiting for it.
  check_bad(std::string("\0\xff\xff\xff\xff", 5), "over the limit");
}

TEST(ConnectCodec, ReaderReassemblesPieces) {
  std::string stream = frame(0, "one") + frame(0, "") + end_stream(std::nullopt);
  EnvelopeReader r(1024);
  std::vector<EnvelopeReader::Frame> frames;
  for (char c : stream) {
    r.feed(std::string_view(&c, 1));
    while (auto f = r.next()) frames.push_back(*f);
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].payload, "one");
  EXPECT_EQ(frames[1].payload, "");
  EXPECT_EQ(frames[2].flags, kFlagEndStream);
  EXPECT_EQ(frames[2].payload, "{}");
  EXPECT_EQ(r.pending(), 0u);
  EnvelopeReader small(2);
  small.feed(frame(0, "abc"));
  EXPECT_FALSE(small.next());
  EXPECT_TRUE(small.error());
}

TEST(ConnectCodec, TimeoutHeader) {
  EXPECT_EQ(parse_timeout_ms("60000"), 60000u);
  EXPECT_EQ(parse_timeout_ms("0"), 0u);
  EXPECT_FALSE(parse_timeout_ms(""));
  EXPECT_FALSE(parse_timeout_ms("12345678901"));
  EXPECT_FALSE(parse_timeout_ms("-1"));
  EXPECT_FALSE(parse_timeout_ms("1.5"));
}

// Keepalive-Ping-Interval (seconds): a long one cannot keep a stream whose reader went away on
// its HTTP worker for an hour (#46 finding 2); main took up to 3599 s.
TEST(ConnectCodec, KeepaliveIntervalIsBounded) {
  using std::chrono::seconds;
  EXPECT_EQ(keepalive_interval("50"), seconds(50));  // what the SDK sends
  EXPECT_EQ(keepalive_interval("1"), seconds(1));
  EXPECT_EQ(keepalive_interval("60"), seconds(60));
  EXPECT_EQ(keepalive_interval("61"), seconds(60));
  EXPECT_EQ(keepalive_interval("3599"), seconds(60));
  EXPECT_EQ(keepalive_interval("9999999999"), seconds(60));
  EXPECT_EQ(keepalive_interval(""), kDefaultKeepalive);
  EXPECT_EQ(keepalive_interval("0"), kDefaultKeepalive);
  EXPECT_EQ(keepalive_interval("-5"), kDefaultKeepalive);
  EXPECT_EQ(keepalive_interval("12345678901"), kDefaultKeepalive);
}

}  // namespace
}  // namespace pvs::service::e2b
