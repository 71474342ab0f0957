#include "http/json.h"

#include <gtest/gtest.h>

#include "http/api_error.h"

namespace pvs::service {
namespace {

TEST(JsonWriter, StableOrderAndEscaping) {
  JsonWriter w;
  w.begin_object().key("b").value(1).key("a").value("x\"\n\x01/é");
  w.key("arr").begin_array().value(true).null().value(std::int64_t{-5}).end_array();
  w.key("m").value(std::map<std::string, std::string>{{"k", "v"}});
  w.end_object();
  EXPECT_EQ(w.str(), R"({"b":1,"a":"x\"\n\u0001/é","arr":[true,null,-5],"m":{"k":"v"}})");
}

TEST(JsonWriter, InvalidUtf8IsReplaced) {
  std::string out;
  append_json_string(out, std::string("a\xff\xc3(b\xed\xa0\x80", 8));
  EXPECT_EQ(out, "\"a\xef\xbf\xbd\xef\xbf\xbd(b\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");
}

TEST(ApiErrors, EnvelopeAndStatusMapping) {
  EXPECT_EQ(not_found("no sandbox sb-1").body(),
            "{\"error\":{\"code\":\"not_found\",\"message\":\"no sandbox sb-1\"}}\n");
  EXPECT_EQ(from_error({ErrorCode::kConflict, "locked"}).status, 409);
  EXPECT_EQ(from_error({ErrorCode::kConflict, "locked"}).code, "conflict");
  EXPECT_EQ(from_error({ErrorCode::kUnavailable, "x"}).status, 503);
  EXPECT_EQ(from_error({ErrorCode::kTooLarge, "x"}).status, 413);
  EXPECT_EQ(from_error({ErrorCode::kTimeout, "x"}).status, 504);
  EXPECT_EQ(from_error({ErrorCode::kInvalidArgument, "x"}).status, 400);
  EXPECT_EQ(from_error({ErrorCode::kNotFound, "x"}).status, 404);
  EXPECT_EQ(from_error({ErrorCode::kPermissionDenied, "x"}).status, 403);
  EXPECT_EQ(from_error({ErrorCode::kIo, "x"}).code, "internal");
  EXPECT_EQ(limit_exceeded("x").status, 429);
  EXPECT_EQ(unauthenticated().status, 401);
}

// Errors the sandbox's state causes are the caller's to fix: each maps to its 4xx (a full disk
// to 507), never to 500.
TEST(ApiErrors, SandboxCausedErrorsMapToTheirCause) {
  auto ssh = [](ErrorCode code, SshErrc kind) {
    Error e(code, "x");
    e.ssh = kind;
    return from_error(e);
  };
  EXPECT_EQ(ssh(ErrorCode::kTooLarge, SshErrc::kDiskFull).status, 507);
  EXPECT_EQ(ssh(ErrorCode::kTooLarge, SshErrc::kDiskFull).code, "insufficient_storage");
  EXPECT_EQ(ssh(ErrorCode::kTooLarge, SshErrc::kTooLarge).status, 413);
  EXPECT_EQ(ssh(ErrorCode::kPermissionDenied, SshErrc::kPermissionDenied).status, 403);
  EXPECT_EQ(ssh(ErrorCode::kNotFound, SshErrc::kNoSuchFile).status, 404);
  EXPECT_EQ(ssh(ErrorCode::kAlreadyExists, SshErrc::kAlreadyExists).status, 409);
  EXPECT_EQ(from_error({ErrorCode::kAlreadyExists, "x"}).code, "already_exists");
}

TEST(JsonBody, StrictTypes) {
  auto b =
      JsonBody::parse(R"({"n": "12", "f": 12.9, "b": 1, "s": 5, "big": 99999999999999999999})");
  ASSERT_FALSE(b.has_value());  // integer too large for 64 bits
  b = JsonBody::parse(R"({"n": "12"})");
  ASSERT_TRUE(b);
  EXPECT_FALSE(b->integer("n", 0, 100));
  EXPECT_EQ(b->finish()->message, "n: must be an integer in [0, 100]");
  b = JsonBody::parse(R"({"f": 12.9})");
  EXPECT_FALSE(b->integer("f", 0, 100));
  EXPECT_EQ(b->finish()->status, 400);
  b = JsonBody::parse(R"({"b": 1})");
  EXPECT_FALSE(b->boolean("b"));
  EXPECT_EQ(b->finish()->message, "b: must be true or false");
  b = JsonBody::parse(R"({"s": 5})");
  EXPECT_FALSE(b->string("s", 10));
  EXPECT_EQ(b->finish()->message, "s: must be a string");
  b = JsonBody::parse(R"({"n": -3})");
  EXPECT_FALSE(b->integer("n", 0, 100));
  b = JsonBody::parse(R"({"n": 7, "s": "ok", "t": true, "x": null})");
  EXPECT_EQ(b->integer("n", 0, 100), 7);
  EXPECT_EQ(b->string("s", 10), "ok");
  EXPECT_EQ(b->boolean("t"), true);
  EXPECT_FALSE(b->string("x", 10));  // null = absent
  EXPECT_FALSE(b->finish());
}

TEST(JsonBody, RejectsUnknownFieldsAndNonObjects) {
  auto b = JsonBody::parse(R"({"cpus": 1, "cpu": 2})");
  ASSERT_TRUE(b);
  b->integer("cpus", 1, 8);
  EXPECT_EQ(b->finish()->message, "cpu: unknown field");
  for (const char* text : {"[1,2]", "\"scalar\"", "42", "{", "{\"a\":1} x", "{\"a\":1,}", "nul"}) {
    auto r = JsonBody::parse(text);
    ASSERT_FALSE(r.has_value()) << text;
    EXPECT_EQ(r.error().status, 400);
    EXPECT_EQ(r.error().code, "invalid_argument");
  }
  auto nul = JsonBody::parse(std::string("{\"a\":\"x\0y\"}", 12));
  EXPECT_FALSE(nul.has_value());
  std::string deep(100, '[');
  EXPECT_FALSE(JsonBody::parse("{\"a\":" + deep + "}").has_value());
  EXPECT_TRUE(JsonBody::parse("").has_value());
  EXPECT_TRUE(JsonBody::parse("  \n").has_value());
}

TEST(JsonBody, StringMaps) {
  auto b = JsonBody::parse(R"({"env": {"A": "1", "B": 2}})");
  EXPECT_FALSE(b->string_map("env", 10, 10));
  EXPECT_EQ(b->finish()->message, "env.B: must be a string");
  b = JsonBody::parse(R"({"env": ["A"]})");
  EXPECT_FALSE(b->string_map("env", 10, 10));
  EXPECT_EQ(b->finish()->message, "env: must be an object of strings");
  b = JsonBody::parse(R"({"env": {"A": "1", "B": "2"}})");
  auto m = b->string_map("env", 10, 10);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->at("B"), "2");
}

}  // namespace
}  // namespace pvs::service
