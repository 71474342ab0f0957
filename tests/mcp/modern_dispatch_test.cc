// A 2026-07-28 request from its checks to its response (the tool run is the test's): discover,
// tools/list, tools/call, notifications, unknown methods, and the approval round trip with a
// sealed requestState.
#include <gtest/gtest.h>

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include "api/mcp/modern_dispatch.h"
#include "api/mcp/modern_result.h"
#include "api/mcp/request_state.h"
#include "service/support/json_object.h"

namespace pvs::service::mcp {
namespace {

const std::string kDispatchMeta =
    R"("_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
    R"("io.modelcontextprotocol/clientCapabilities":{}})";

Message first_message(const std::string& body) {
  return std::get<Message>(parse_messages(body).items.at(0));
}

ModernServer server() {
  ModernServer s;
  s.server_info_json = server_info_json({"pve-sandbox", "9.9.9", ""});
  s.capabilities_json = R"({"tools":{"listChanged":false}})";
  s.instructions = "Sandboxes.";
  s.state_key = new_state_key();
  s.state_ttl_seconds = 100;
  return s;
}

ModernStep step(const ModernServer& s, const std::string& method, const std::string& params,
                std::optional<std::string> name = std::nullopt, const std::string& token = "ci",
                std::int64_t now = 1000) {
  auto m = first_message(R"({"jsonrpc":"2.0","id":5,"method":")" + method + R"(","params":{)" +
                         params + (params.empty() ? "" : ",") + kDispatchMeta + "}}");
  return prepare_modern(s, m, {"2026-07-28", method, std::move(name)}, token, now);
}

Poco::JSON::Object::Ptr reply(const ModernStep& st, int status = 200) {
  const auto* r = std::get_if<ModernReply>(&st);
  EXPECT_TRUE(r);
  if (!r) return nullptr;
  EXPECT_EQ(r->http_status, status) << r->body;
  return json(r->body);
}

TEST(McpModernDispatch, DiscoverAndToolsList) {
  auto s = server();
  auto d = reply(step(s, "server/discover", ""))->getObject("result");
  EXPECT_EQ(d->getValue<std::string>("resultType"), "complete");
  EXPECT_EQ(d->getArray("supportedVersions")->getElement<std::string>(0), "2026-07-28");
  EXPECT_TRUE(d->getObject("capabilities")->has("tools"));
  EXPECT_EQ(d->getValue<std::string>("instructions"), "Sandboxes.");
  auto l = reply(step(s, "tools/list", ""))->getObject("result");
  EXPECT_EQ(l->getValue<std::string>("resultType"), "complete");
  EXPECT_GE(l->getArray("tools")->size(), 13u);
  EXPECT_EQ(l->getValue<std::int64_t>("ttlMs"), 300000);
  EXPECT_EQ(l->getValue<std::string>("cacheScope"), "private");
  EXPECT_EQ(l->getObject("_meta")
                ->getObject("io.modelcontextprotocol/serverInfo")
                ->getValue<std::string>("version"),
            "9.9.9");
}

TEST(McpModernDispatch, RemovedAndUnknownMethodsAre404) {
  auto s = server();
  for (const char* method : {"ping", "initialize", "logging/setLevel", "resources/list"}) {
    auto e = reply(step(s, method, ""), 404)->getObject("error");
    EXPECT_EQ(e->getValue<int>("code"), kMethodNotFound) << method;
  }
}

TEST(McpModernDispatch, NotificationsAre202) {
  auto m = first_message(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{}})");
  auto st = prepare_modern(server(), m, {}, "ci", 0);
  EXPECT_EQ(std::get<ModernReply>(st).http_status, 202);
  EXPECT_TRUE(std::get<ModernReply>(st).body.empty());
}

TEST(McpModernDispatch, ChecksComeFirst) {
  auto s = server();
  auto m = first_message(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}})");
  auto st = prepare_modern(s, m, {"2026-07-28", "tools/list", std::nullopt}, "ci", 0);
  EXPECT_EQ(reply(st, 400)->getObject("error")->getValue<int>("code"), kInvalidParams);
  auto wrong = step(s, "tools/call", R"("name":"exec")", "sandbox_list");
  EXPECT_EQ(reply(wrong, 400)->getObject("error")->getValue<int>("code"), kHeaderMismatch);
}

TEST(McpModernDispatch, ToolCallComesBackToRunThenCompletes) {
  auto s = server();
  auto st = step(s, "tools/call", R"("name":"exec","arguments":{"command":"ls"})", "exec");
  auto* call = std::get_if<ModernCall>(&st);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->tool->name, "exec");
  EXPECT_EQ(call->arguments->getValue<std::string>("command"), "ls");
  EXPECT_EQ(call->id, "5");
  EXPECT_TRUE(call->resume_approval.empty());
  ModernOutcome out;
  out.result = {false, "hello", R"({"exit_code":0})"};
  auto r = finish_modern_call(s, *call, out, "ci", 1000);
  EXPECT_EQ(r.http_status, 200);
  auto res = json(r.body)->getObject("result");
  EXPECT_EQ(res->getValue<std::string>("resultType"), "complete");
  EXPECT_EQ(res->getObject("structuredContent")->getValue<int>("exit_code"), 0);
  EXPECT_FALSE(res->getValue<bool>("isError"));
}

TEST(McpModernDispatch, ToolCallErrors) {
  auto s = server();
  auto unknown = reply(step(s, "tools/call", R"("name":"nope")", "nope"));
  EXPECT_EQ(unknown->getObject("error")->getValue<int>("code"), kInvalidParams);
  auto args = reply(step(s, "tools/call", R"("name":"exec","arguments":[1])", "exec"), 400);
  EXPECT_EQ(args->getObject("error")->getValue<int>("code"), kInvalidParams);
  auto no_name = reply(step(s, "tools/call", R"("arguments":{})"), 400);
  EXPECT_EQ(no_name->getObject("error")->getValue<int>("code"), kInvalidParams);
}

TEST(McpModernDispatch, ApprovalRoundTripThroughRequestState) {
  auto s = server();
  const std::string params = R"("name":"exec","arguments":{"command":"pip install x"})";
  auto first = std::get<ModernCall>(step(s, "tools/call", params, "exec"));
  ModernOutcome waiting;
  waiting.pending_approval = "ap-1-7";
  auto r = json(finish_modern_call(s, first, waiting, "ci", 1000).body)->getObject("result");
  EXPECT_EQ(r->getValue<std::string>("resultType"), "input_required");
  std::string state = r->getValue<std::string>("requestState");
  // The retry: same arguments, the state echoed.
  std::string again = params + R"(,"requestState":")" + state + "\"";
  auto retry = std::get<ModernCall>(step(s, "tools/call", again, "exec", "ci", 1050));
  EXPECT_EQ(retry.resume_approval, "ap-1-7");
  // Another token, other arguments, another tool, too late, or forged: refused.
  auto other = reply(step(s, "tools/call", again, "exec", "mallory", 1050), 400);
  EXPECT_NE(other->getObject("error")->getValue<std::string>("message").find("another call"),
            std::string::npos);
  std::string changed =
      R"("name":"exec","arguments":{"command":"rm -rf /"},"requestState":")" + state + "\"";
  reply(step(s, "tools/call", changed, "exec", "ci", 1050), 400);
  std::string tool = R"("name":"write_file","arguments":{"command":"pip install x"},)"
                     R"("requestState":")" +
                     state + "\"";
  reply(step(s, "tools/call", tool, "write_file", "ci", 1050), 400);
  auto late = reply(step(s, "tools/call", again, "exec", "ci", 1101), 400);
  EXPECT_NE(late->getObject("error")->getValue<std::string>("message").find("expired"),
            std::string::npos);
  std::string forged = params + R"(,"requestState":"v1.e30.AAAA")";
  reply(step(s, "tools/call", forged, "exec", "ci", 1050), 400);
  reply(step(s, "tools/call", params + R"(,"requestState":7)", "exec"), 400);
}

}  // namespace
}  // namespace pvs::service::mcp
