// The MCP server's pure parts: JSON-RPC parsing and replies, the transport's header rules,
// sessions, and the tool definitions tools/list serves.
#include <gtest/gtest.h>

#include <set>

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Parser.h>

#include "api/mcp/jsonrpc.h"
#include "api/mcp/protocol.h"
#include "api/mcp/session.h"
#include "api/mcp/tools.h"
#include "api/sandboxes/output_cap.h"
#include "service/support/json_object.h"

namespace pvs::service::mcp {
namespace {

const Message& message(const Parsed& p, std::size_t i = 0) {
  return std::get<Message>(p.items.at(i));
}
const Invalid& invalid(const Parsed& p, std::size_t i = 0) {
  return std::get<Invalid>(p.items.at(i));
}

TEST(McpJsonRpc, RequestsNotificationsAndResponses) {
  auto r =
      parse_messages(R"({"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"x"}})");
  ASSERT_FALSE(r.fatal);
  EXPECT_FALSE(r.batch);
  EXPECT_EQ(message(r).kind, Message::Kind::kRequest);
  EXPECT_EQ(message(r).id, "7");
  EXPECT_EQ(message(r).method, "tools/list");
  EXPECT_EQ(message(r).params->getValue<std::string>("cursor"), "x");
  auto s = parse_messages(R"({"jsonrpc":"2.0","id":"a\"b","method":"ping"})");
  EXPECT_EQ(message(s).id, R"("a\"b")");
  EXPECT_EQ(message(s).params->size(), 0u);  // absent params: {}
  auto n = parse_messages(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  EXPECT_EQ(message(n).kind, Message::Kind::kNotification);
  auto resp = parse_messages(R"({"jsonrpc":"2.0","id":1,"result":{}})");
  EXPECT_EQ(message(resp).kind, Message::Kind::kResponse);
}

TEST(McpJsonRpc, ProtocolFaultsGetTheirCodes) {
  auto bad = parse_messages("{not json");
  ASSERT_TRUE(bad.fatal);
  EXPECT_EQ(bad.fatal->code, kParseError);
  EXPECT_EQ(parse_messages("").fatal->code, kParseError);
  EXPECT_EQ(parse_messages("[]").fatal->code, kInvalidRequest);
  EXPECT_EQ(parse_messages("42").fatal->code, kInvalidRequest);
  EXPECT_EQ(parse_messages(" \"x\"").fatal->code, kInvalidRequest);
  EXPECT_EQ(invalid(parse_messages(R"({"id":1,"method":"ping"})")).code, kInvalidRequest);
  EXPECT_EQ(invalid(parse_messages(R"({"jsonrpc":"1.0","id":1,"method":"ping"})")).id, "1");
  EXPECT_EQ(invalid(parse_messages(R"({"jsonrpc":"2.0","id":null,"method":"ping"})")).code,
            kInvalidRequest);
  EXPECT_EQ(invalid(parse_messages(R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})")).code,
            kInvalidRequest);
  EXPECT_EQ(invalid(parse_messages(R"({"jsonrpc":"2.0","id":1,"method":3})")).code,
            kInvalidRequest);
  EXPECT_EQ(invalid(parse_messages(R"({"jsonrpc":"2.0","id":1})")).code, kInvalidRequest);
  auto params = invalid(parse_messages(R"({"jsonrpc":"2.0","id":"q","method":"x","params":[1]})"));
  EXPECT_EQ(params.code, kInvalidParams);
  EXPECT_EQ(params.id, "\"q\"");
}

TEST(McpJsonRpc, BatchesKeepTheirOrderAndAreBounded) {
  auto b = parse_messages(
      R"([{"jsonrpc":"2.0","id":1,"method":"ping"},7,{"jsonrpc":"2.0","method":"n"}])");
  ASSERT_FALSE(b.fatal);
  EXPECT_TRUE(b.batch);
  ASSERT_EQ(b.items.size(), 3u);
  EXPECT_EQ(message(b, 0).method, "ping");
  EXPECT_EQ(invalid(b, 1).code, kInvalidRequest);
  EXPECT_EQ(message(b, 2).kind, Message::Kind::kNotification);
  std::string many = "[";
  for (std::size_t i = 0; i <= kMaxBatch; ++i)
    many += std::string(i ? "," : "") + R"({"jsonrpc":"2.0","method":"n"})";
  EXPECT_TRUE(parse_messages(many + "]").fatal);
}

TEST(McpJsonRpc, RepliesAreValidJson) {
  auto e = json(error_json("\"x\"", kMethodNotFound, "no \"such\" method\n"));
  EXPECT_EQ(e->getValue<std::string>("jsonrpc"), "2.0");
  EXPECT_EQ(e->getValue<std::string>("id"), "x");
  EXPECT_EQ(e->getObject("error")->getValue<int>("code"), -32601);
  EXPECT_EQ(e->getObject("error")->getValue<std::string>("message"), "no \"such\" method\n");
  auto r = json(result_json("3", R"({"a":1})"));
  EXPECT_EQ(r->getValue<int>("id"), 3);
  EXPECT_EQ(r->getObject("result")->getValue<int>("a"), 1);
  auto n = json(notification_json("notifications/progress", R"({"progress":1})"));
  EXPECT_EQ(n->getValue<std::string>("method"), "notifications/progress");
  EXPECT_FALSE(n->has("id"));
}

TEST(McpProtocol, VersionsAcceptAndOrigin) {
  EXPECT_EQ(protocol_versions()[0], "2025-11-25");
  EXPECT_EQ(negotiate_version("2025-06-18"), "2025-06-18");
  EXPECT_EQ(negotiate_version("2024-11-05"), "2025-11-25");
  EXPECT_EQ(negotiate_version("2099-01-01"), "2025-11-25");
  EXPECT_TRUE(batches_allowed("2025-03-26"));
  EXPECT_FALSE(batches_allowed("2025-11-25"));

  EXPECT_TRUE(accepts("application/json, text/event-stream", "text/event-stream"));
  EXPECT_TRUE(accepts("application/json, text/event-stream", "application/json"));
  EXPECT_TRUE(accepts("*/*", "application/json"));
  EXPECT_TRUE(accepts("application/*;q=0.5", "application/json"));
  EXPECT_TRUE(accepts("", "application/json"));
  EXPECT_FALSE(accepts("text/html", "application/json"));
  EXPECT_FALSE(accepts("application/json;q=0", "application/json"));
  EXPECT_FALSE(accepts("text/event-stream", "application/json"));

  const std::vector<std::string> none;
  EXPECT_TRUE(origin_allowed("", none));
  EXPECT_TRUE(origin_allowed("http://localhost:5173", none));
  EXPECT_TRUE(origin_allowed("https://127.0.0.1", none));
  EXPECT_TRUE(origin_allowed("http://[::1]:8080", none));
  EXPECT_FALSE(origin_allowed("http://evil.example", none));
  EXPECT_FALSE(origin_allowed("http://localhost.evil.example", none));
  EXPECT_FALSE(origin_allowed("http://127.0.0.1.nip.io", none));
  EXPECT_FALSE(origin_allowed("null", none));
  EXPECT_FALSE(origin_allowed("http://localhost:80x", none));
  EXPECT_TRUE(origin_allowed("https://agents.example.com", {"https://agents.example.com"}));
  EXPECT_TRUE(origin_allowed("http://anything", {"*"}));
}

TEST(McpSessions, BelongToATokenExpireAndAreBounded) {
  SessionStore store({2, std::chrono::seconds(60)});
  auto t0 = SessionStore::Clock::now();
  Session a = store.open("alice", "2025-11-25", "test", t0);
  EXPECT_EQ(a.id.size(), 32u);
  EXPECT_EQ(a.id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_TRUE(store.use(a.id, "alice", t0 + std::chrono::seconds(30)));
  EXPECT_FALSE(store.use(a.id, "bob", t0));  // another token's id is no session
  // Idle 60 s after its last use: gone.
  EXPECT_TRUE(store.use(a.id, "alice", t0 + std::chrono::seconds(89)));
  EXPECT_FALSE(store.use(a.id, "alice", t0 + std::chrono::seconds(150)));
  // A third session of one token ends its least recently used one.
  Session b = store.open("alice", "v", "", t0);
  Session c = store.open("alice", "v", "", t0 + std::chrono::seconds(1));
  store.use(b.id, "alice", t0 + std::chrono::seconds(2));
  Session d = store.open("alice", "v", "", t0 + std::chrono::seconds(3));
  EXPECT_EQ(store.count("alice"), 2u);
  EXPECT_TRUE(store.use(b.id, "alice", t0 + std::chrono::seconds(4)));
  EXPECT_FALSE(store.use(c.id, "alice", t0 + std::chrono::seconds(4)));
  Session e = store.open("bob", "v", "", t0 + std::chrono::seconds(4));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_FALSE(store.close(e.id, "alice"));
  EXPECT_TRUE(store.close(e.id, "bob"));
  EXPECT_FALSE(store.close(e.id, "bob"));
  EXPECT_NE(d.id, b.id);
  std::set<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.insert(new_session_id());
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(McpTools, ListHasEveryToolWithAnObjectSchema) {
  auto list = json(tools_list_json());
  auto tools = list->getArray("tools");
  ASSERT_TRUE(tools);
  std::set<std::string> names;
  for (std::size_t i = 0; i < tools->size(); ++i) {
    auto t = tools->getObject(static_cast<unsigned>(i));
    std::string name = t->getValue<std::string>("name");
    names.insert(name);
    EXPECT_GT(t->getValue<std::string>("description").size(), 40u) << name;
    auto schema = t->getObject("inputSchema");
    ASSERT_TRUE(schema) << name;
    EXPECT_EQ(schema->getValue<std::string>("type"), "object") << name;
    EXPECT_FALSE(schema->getValue<bool>("additionalProperties")) << name;
    auto props = schema->getObject("properties");
    ASSERT_TRUE(props) << name;
    auto required = schema->getArray("required");
    for (std::size_t k = 0; required && k < required->size(); ++k)
      EXPECT_TRUE(props->has(required->getElement<std::string>(static_cast<unsigned>(k)))) << name;
    // Every tool but create and list names its sandbox.
    if (name != "sandbox_create" && name != "sandbox_list") {
      EXPECT_TRUE(props->has("sandbox_id")) << name;
      ASSERT_TRUE(required) << name;
      EXPECT_EQ(required->getElement<std::string>(0), "sandbox_id") << name;
    }
    EXPECT_TRUE(t->getObject("annotations")->has("readOnlyHint")) << name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"sandbox_create", "sandbox_list", "sandbox_destroy",
                                          "sandbox_ports", "sandbox_preview", "sandbox_pause",
                                          "sandbox_resume", "sandbox_capture", "sandbox_fork",
                                          "exec", "read_file", "write_file", "edit_file",
                                          "list_dir", "internet", "terminal_open", "terminal_input",
                                          "terminal_screen", "terminal_close"}));
  EXPECT_TRUE(find_tool("exec")->progress);
  EXPECT_NE(find_tool("terminal_open"), nullptr);
}

TEST(McpTools, ResultsCarryTextStructuredContentAndIsError) {
  auto ok = json(tool_result_json({false, "hi\n", R"({"a":1})"}));
  EXPECT_EQ(ok->getArray("content")->getObject(0)->getValue<std::string>("type"), "text");
  EXPECT_EQ(ok->getArray("content")->getObject(0)->getValue<std::string>("text"), "hi\n");
  EXPECT_EQ(ok->getObject("structuredContent")->getValue<int>("a"), 1);
  EXPECT_FALSE(ok->getValue<bool>("isError"));
  auto err = json(tool_result_json({true, "no sandbox sb-000000000000", ""}));
  EXPECT_TRUE(err->getValue<bool>("isError"));
  EXPECT_FALSE(err->has("structuredContent"));
}

TEST(McpTools, OmittedOutputIsMarkedBetweenHeadAndTail) {
  EXPECT_EQ(mark_omitted("abc", 3, 8), "abc");
  // cap 8: the first 4 and the last 4 of 20 bytes kept.
  EXPECT_EQ(mark_omitted("AAAAZZZZ", 20, 8), "AAAA\n[... 12 bytes left out ...]\nZZZZ");
}

}  // namespace
}  // namespace pvs::service::mcp
