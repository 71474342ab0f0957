// Revision 2026-07-28 before any method runs: the era of each request (from that request
// alone), the per-request _meta, the HTTP headers against the body, the revision, and the
// error shapes the revision defines.
#include <gtest/gtest.h>

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include "api/mcp/jsonrpc.h"
#include "api/mcp/modern.h"
#include "service/support/json_object.h"

namespace pvs::service::mcp {
namespace {

Message parse(const std::string& body) {
  auto p = parse_messages(body);
  EXPECT_FALSE(p.fatal);
  return std::get<Message>(p.items.at(0));
}

constexpr const char* kMeta =
    R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
    R"("io.modelcontextprotocol/clientInfo":{"name":"inspector-cli","version":"2.12.0"},)"
    R"("io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},)"
    R"("io.modelcontextprotocol/logLevel":"debug"})";

Message call(const std::string& name = "exec") {
  return parse(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":")" + name +
               R"(","arguments":{},)" + kMeta + "}}");
}

RequestHeaders headers(std::string method, std::optional<std::string> name = std::nullopt) {
  return {"2026-07-28", std::move(method), std::move(name)};
}

TEST(McpModernEra, DecidedByTheRequestAlone) {
  // _meta's protocol version makes a request modern, whatever headers came with it.
  EXPECT_EQ(request_era(call(), ""), Era::kModern);
  EXPECT_EQ(request_era(call(), "2025-11-25"), Era::kModern);
  // A modern MCP-Protocol-Version header without _meta: modern (and then malformed).
  auto list = parse(R"({"jsonrpc":"2.0","id":1,"method":"tools/list"})");
  EXPECT_EQ(request_era(list, "2026-07-28"), Era::kModern);
  // Legacy: initialize, and anything of a session (a legacy or no header).
  EXPECT_EQ(request_era(list, "2025-11-25"), Era::kLegacy);
  EXPECT_EQ(request_era(list, ""), Era::kLegacy);
  auto init = parse(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}})");
  EXPECT_EQ(request_era(init, ""), Era::kLegacy);
  EXPECT_EQ(request_era(init, "2026-07-28"), Era::kLegacy);
  // The same message twice gets the same answer: nothing is remembered between requests.
  EXPECT_EQ(request_era(list, ""), Era::kLegacy);
}

TEST(McpModernEra, Versions) {
  EXPECT_TRUE(is_modern_version("2026-07-28"));
  EXPECT_FALSE(is_modern_version("2025-11-25"));
  EXPECT_FALSE(is_modern_version(""));
  ASSERT_EQ(all_versions().size(), 4u);
  EXPECT_EQ(all_versions()[0], "2026-07-28");
  EXPECT_EQ(all_versions()[3], "2025-03-26");
  for (auto l : {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"})
    EXPECT_TRUE(is_log_level(l)) << l;
  EXPECT_FALSE(is_log_level("trace"));
  EXPECT_FALSE(is_log_level("INFO"));
}

TEST(McpModernMeta, ReadsEveryKey) {
  auto meta = parse_request_meta(call());
  ASSERT_TRUE(meta) << meta.error().message;
  EXPECT_EQ(meta->protocol_version, "2026-07-28");
  EXPECT_EQ(meta->client_name, "inspector-cli");
  EXPECT_EQ(meta->client_version, "2.12.0");
  EXPECT_EQ(meta->log_level, "debug");
  EXPECT_TRUE(meta->has_capability("roots"));
  EXPECT_FALSE(meta->has_capability("elicitation"));
  EXPECT_TRUE(meta->progress_token.empty());
  auto p =
      parse(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":7,)"
            R"("io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
            R"("io.modelcontextprotocol/clientCapabilities":{},"traceparent":"00-ab-cd-01"}}})");
  auto m2 = parse_request_meta(p);
  ASSERT_TRUE(m2);
  EXPECT_EQ(m2->progress_token, "7");
  EXPECT_TRUE(m2->client_name.empty());
  EXPECT_FALSE(m2->log_level);
}

void expect_invalid(const std::string& params, const std::string& names) {
  auto m = parse(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":)" + params + "}");
  auto meta = parse_request_meta(m);
  ASSERT_FALSE(meta) << params;
  EXPECT_EQ(meta.error().code, kInvalidParams);
  EXPECT_EQ(meta.error().http_status, 400);
  EXPECT_NE(meta.error().message.find(names), std::string::npos) << meta.error().message;
}

TEST(McpModernMeta, RefusesWhatIsMissingOrMalformed) {
  const std::string v = R"("io.modelcontextprotocol/protocolVersion":"2026-07-28")";
  const std::string c = R"("io.modelcontextprotocol/clientCapabilities":{})";
  expect_invalid("{}", "params._meta: required");
  expect_invalid(R"({"_meta":[]})", "must be an object");
  expect_invalid(R"({"_meta":{)" + c + "}}", "protocolVersion");
  expect_invalid(R"({"_meta":{"io.modelcontextprotocol/protocolVersion":7,)" + c + "}}",
                 "protocolVersion");
  expect_invalid(R"({"_meta":{)" + v + "}}", "clientCapabilities");
  expect_invalid(R"({"_meta":{)" + v + R"(,"io.modelcontextprotocol/clientCapabilities":null}})",
                 "clientCapabilities");
  expect_invalid(
      R"({"_meta":{)" + v + "," + c + R"(,"io.modelcontextprotocol/clientInfo":{"name":"x"}}})",
      "clientInfo");
  expect_invalid(R"({"_meta":{)" + v + "," + c + R"(,"io.modelcontextprotocol/logLevel":"loud"}})",
                 "logLevel");
  expect_invalid(R"({"_meta":{)" + v + "," + c + R"(,"progressToken":true}})", "progressToken");
}

TEST(McpModernHeaders, MatchingHeadersPass) {
  auto meta = check_modern_request(call(), headers("tools/call", "exec"));
  ASSERT_TRUE(meta) << meta.error().message;
  auto list = parse(R"({"jsonrpc":"2.0","id":"server-discover-probe-1","method":"server/discover",)"
                    R"("params":{)" +
                    std::string(kMeta) + "}}");
  EXPECT_TRUE(check_modern_request(list, headers("server/discover")));
  // Mcp-Name is only compared where the revision defines a source for it.
  EXPECT_TRUE(check_modern_request(list, headers("server/discover", "anything")));
}

void expect_mismatch(const Message& m, const RequestHeaders& h, const std::string& says) {
  auto r = check_modern_request(m, h);
  ASSERT_FALSE(r) << says;
  EXPECT_EQ(r.error().code, kHeaderMismatch);
  EXPECT_EQ(r.error().http_status, 400);
  EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
}

TEST(McpModernHeaders, MissingOrDifferentHeadersAreAMismatch) {
  expect_mismatch(call(), {"", "tools/call", "exec"}, "MCP-Protocol-Version header is required");
  expect_mismatch(call(), {"2099-01-01", "tools/call", "exec"},
                  "MCP-Protocol-Version header value '2099-01-01' does not match body value "
                  "'2026-07-28'");
  expect_mismatch(call(), {"2026-07-28", std::nullopt, "exec"}, "Mcp-Method header is required");
  expect_mismatch(call(), headers("tools/list", "exec"),
                  "Mcp-Method header value 'tools/list' does not match body value 'tools/call'");
  expect_mismatch(call(), headers("tools/call"), "Mcp-Name header is required for tools/call");
  expect_mismatch(call(), headers("tools/call", "sandbox_destroy"),
                  "Mcp-Name header value 'sandbox_destroy' does not match body value 'exec'");
  expect_mismatch(call(),
                  headers("tools/call",
                          "ex\x01"
                          "ec"),
                  "invalid characters");
  expect_mismatch(call(), headers("tools/call", "=?base64?not base64?="), "invalid characters");
  // Header values are case-sensitive.
  expect_mismatch(call(), headers("Tools/Call", "exec"), "Mcp-Method");
}

TEST(McpModernHeaders, Base64SentinelIsDecodedBeforeComparing) {
  EXPECT_TRUE(check_modern_request(call(), headers("tools/call", "=?base64?ZXhlYw==?=")));
  expect_mismatch(call(), headers("tools/call", "=?base64?ZXhlYQ==?="), "does not match");
  EXPECT_EQ(decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?="), "Hello, 世界");
  EXPECT_EQ(decode_header_value("=?base64?IHBhZGRlZCA=?="), " padded ");
  EXPECT_EQ(decode_header_value("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="), "=?base64?literal?=");
  EXPECT_EQ(decode_header_value("us-west1"), "us-west1");
  EXPECT_EQ(decode_header_value("=?BASE64?eA==?="), "=?BASE64?eA==?=");  // markers: lower-case
  EXPECT_FALSE(decode_header_value("=?base64?eA=?="));
  EXPECT_FALSE(decode_header_value("=?base64?e=A=?="));
  EXPECT_FALSE(decode_header_value("caf\xc3\xa9"));
  auto read = parse(R"({"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":)"
                    R"("file:///a b",)" +
                    std::string(kMeta) + "}}");
  EXPECT_TRUE(check_modern_request(read, headers("resources/read", "file:///a b")));
}

TEST(McpModernHeaders, SentinelAsPocoHandsItOver) {
  EXPECT_EQ(restore_sentinel("base64?ZXhlYw==?="), "=?base64?ZXhlYw==?=");
  EXPECT_EQ(restore_sentinel("exec"), "exec");
  EXPECT_EQ(restore_sentinel("base64?"), "base64?");
  EXPECT_EQ(restore_sentinel("=?base64?ZXhlYw==?="), "=?base64?ZXhlYw==?=");
  EXPECT_EQ(decode_header_value(restore_sentinel("base64?ZXhlYw==?=")), "exec");
}

TEST(McpModernHeaders, AnUnsupportedRevisionIsReportedOnceHeadersAgree) {
  auto m = parse(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{)"
                 R"("io.modelcontextprotocol/protocolVersion":"1900-01-01",)"
                 R"("io.modelcontextprotocol/clientCapabilities":{}}}})");
  auto r = check_modern_request(m, {"1900-01-01", "tools/list", std::nullopt});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, kUnsupportedProtocolVersion);
  EXPECT_EQ(r.error().http_status, 400);
  auto data = json(r.error().data);
  EXPECT_EQ(data->getValue<std::string>("requested"), "1900-01-01");
  EXPECT_EQ(data->getArray("supported")->size(), 4u);
  EXPECT_EQ(data->getArray("supported")->getElement<std::string>(0), "2026-07-28");
  // A legacy revision is not served without a session: the client learns what is.
  auto legacy = parse(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{)"
                      R"("io.modelcontextprotocol/protocolVersion":"2025-11-25",)"
                      R"("io.modelcontextprotocol/clientCapabilities":{}}}})");
  auto l = check_modern_request(legacy, {"2025-11-25", "tools/list", std::nullopt});
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, kUnsupportedProtocolVersion);
}

TEST(McpModernErrors, Shapes) {
  auto e = json(wire_error_json("3", unsupported_version("1.0")));
  EXPECT_EQ(e->getValue<std::string>("jsonrpc"), "2.0");
  EXPECT_EQ(e->getValue<int>("id"), 3);
  auto err = e->getObject("error");
  EXPECT_EQ(err->getValue<int>("code"), -32022);
  EXPECT_EQ(err->getObject("data")->getValue<std::string>("requested"), "1.0");
  auto no_id = json(wire_error_json("", header_mismatch("x")));
  EXPECT_TRUE(no_id->isNull("id"));
  EXPECT_FALSE(no_id->getObject("error")->has("data"));
  EXPECT_EQ(no_id->getObject("error")->getValue<std::string>("message"), "Header mismatch: x");
  auto cap = json(wire_error_json("\"a\"", missing_capability(R"({"elicitation":{}})")));
  EXPECT_EQ(cap->getObject("error")->getValue<int>("code"), -32021);
  EXPECT_TRUE(cap->getObject("error")
                  ->getObject("data")
                  ->getObject("requiredCapabilities")
                  ->has("elicitation"));
  auto nf = method_not_found("ping");
  EXPECT_EQ(nf.http_status, 404);
  EXPECT_EQ(nf.code, kMethodNotFound);
  EXPECT_NE(nf.message.find("session-based"), std::string::npos);
  // Quotes and control characters in a message stay valid JSON.
  EXPECT_NO_THROW(json(wire_error_json("1", method_not_found("a\"b\n\x01"))));
}

}  // namespace
}  // namespace pvs::service::mcp
