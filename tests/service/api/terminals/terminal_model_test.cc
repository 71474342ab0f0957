// What bash runs is what terminal.input judged (#32): byte sequences that once made the line
// model lose a line (an OSC start swallowing Enter, an unbound CSI readline ends early, C-o)
// typed into a real bash through REST, the WebSocket and the MCP terminal_input tool, under a
// rule that denies `touch`. Each refused input leaves no file behind; the allowed lines run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/Net/WebSocket.h>

#include "http/auth.h"
#include "http/json.h"
#include "service/support/http_client.h"
#include "service/support/in_process_service.h"
#include "service/support/json_object.h"
#include "support/eventually.h"
#include "support/stack_fixture.h"

namespace pvs::service {
namespace {

using Poco::Net::WebSocket;
using test::http;

std::string quoted(const std::string& s) {
  JsonWriter w;
  return w.value(s).take();
}

class TerminalModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = std::make_unique<test::Stack>();
    config_.listen_port = 0;
    config_.tokens = {{"alice", sha256_hex("tok-alice"), 4, false}};
    config_.audit_file = stack_->dir() + "/audit.log";
    PolicyRuleSpec deny;
    deny.where = "policy.default[0]";
    deny.actions = {PolicyAction::kTerminalInput};
    deny.command = "touch";
    deny.verdict = Verdict::kDeny;
    deny.message = "no touch";
    PolicySpec spec;
    PolicyRuleSpec exec = deny;  // what exec refuses, a terminal's command may not run
    exec.where = "policy.default[1]";
    exec.actions = {PolicyAction::kExec};
    exec.message = "no touch via exec";
    PolicyRuleSpec open = deny;
    open.where = "policy.default[2]";
    open.actions = {PolicyAction::kTerminalOpen};
    open.command = "^sleep";
    open.message = "no sleeping terminals";
    PolicyRuleSpec attach = open;
    attach.where = "policy.default[3]";
    attach.actions = {PolicyAction::kTerminalAttach};
    attach.command = "^watch$";
    attach.message = "no watchers";
    spec.default_rules = {deny, exec, open, attach};
    auto policy = Policy::compile(spec);
    ASSERT_TRUE(policy) << policy.error().message;
    config_.policy = *policy;
    auto m = Manager::open(stack_->manager_config());
    ASSERT_TRUE(m) << m.error().message;
    auto svc = test::InProcessService::start(config_, std::shared_ptr<Manager>(std::move(*m)));
    ASSERT_TRUE(svc) << svc.error().message;
    svc_ = std::move(*svc);
    auto r = call("POST", "/v1/sandboxes", "{}");
    ASSERT_EQ(r.status, 201) << r.body;
    sb_ = json(r.body)->getValue<std::string>("id");
    dir_ = stack_->home();  // the sandbox user's, removed with the stack
    // bash with its default bindings, history on, no rc files: the shell the model stands for.
    r = call("POST", "/v1/sandboxes/" + sb_ + "/terminals",
             R"({"command":"env INPUTRC=/etc/inputrc PS1='$ ' bash --norc --noprofile -i"})");
    ASSERT_EQ(r.status, 201) << r.body;
    tid_ = json(r.body)->getValue<std::string>("id");
    term_ = "/v1/sandboxes/" + sb_ + "/terminals/" + tid_;
    settle();
  }
  void TearDown() override {
    if (auto m = svc_ ? svc_->manager() : nullptr) {
      for (const auto& info : m->list()) EXPECT_TRUE(m->destroy_by_id(info.id));
    }
    svc_.reset();
    stack_.reset();
  }
  test::HttpReply call(const std::string& method, const std::string& uri,
                       const std::string& body = "",
                       std::map<std::string, std::string> headers = {}) {
    return http(svc_->port(), method, uri, body, "tok-alice", std::move(headers));
  }
  // Until the screen has been quiet for a while: bash has taken what it was sent.
  void settle() {
    auto r = call("POST", term_ + "/wait", R"({"quiet_ms":300,"timeout_ms":5000})");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  // Raw bytes through REST: the status.
  int rest(const std::string& bytes) {
    auto r = call("POST", term_ + "/input", "{\"input\":[{\"text\":" + quoted(bytes) + "}]}");
    settle();
    return r.status;
  }
  // Through MCP's terminal_input: whether the tool call was an error.
  bool mcp(const std::string& bytes) {
    std::map<std::string, std::string> h{{"Accept", "application/json, text/event-stream"}};
    if (session_.empty()) {
      auto init = call("POST", "/mcp",
                       R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{)"
                       R"("protocolVersion":"2025-06-18","capabilities":{},)"
                       R"("clientInfo":{"name":"t","version":"1"}}})",
                       h);
      EXPECT_EQ(init.status, 200) << init.body;
      session_ = init.headers["Mcp-Session-Id"];
      h["Mcp-Session-Id"] = session_;
      call("POST", "/mcp", R"({"jsonrpc":"2.0","method":"notifications/initialized"})", h);
    }
    h["Mcp-Session-Id"] = session_;
    auto r = call("POST", "/mcp",
                  R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{)"
                  R"("name":"terminal_input","arguments":{"sandbox_id":")" +
                      sb_ + R"(","terminal_id":")" + tid_ + R"(","input":[{"text":)" +
                      quoted(bytes) + "}]}}}",
                  h);
    EXPECT_EQ(r.status, 200) << r.body;
    settle();
    return r.body.find("\"isError\":true") != std::string::npos;
  }
  // Through the WebSocket: the error messages the server sent back, if any.
  std::string ws(const std::string& bytes) {
    Poco::Net::HTTPClientSession cs("127.0.0.1", svc_->port());
    Poco::Net::HTTPRequest req("GET", term_ + "/ws", "HTTP/1.1");
    req.set("Authorization", "Bearer tok-alice");
    Poco::Net::HTTPResponse resp;
    WebSocket sock(cs, req, resp);
    sock.setReceiveTimeout(Poco::Timespan(1, 0));
    sock.sendFrame(bytes.data(), static_cast<int>(bytes.size()), WebSocket::FRAME_BINARY);
    std::string texts;
    char buf[65536];
    try {
      for (;;) {  // until a second without frames
        int flags = 0;
        int n = sock.receiveFrame(buf, sizeof buf, flags);
        if (n <= 0 || (flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_CLOSE) break;
        if ((flags & WebSocket::FRAME_OP_BITMASK) == WebSocket::FRAME_OP_TEXT)
          texts.append(buf, static_cast<std::size_t>(n));
      }
    } catch (const Poco::TimeoutException&) {
    }
    sock.shutdown();
    settle();
    return texts;
  }
  bool exists(const std::string& name) { return std::filesystem::exists(dir_ + "/" + name); }
  std::string ran() {
    std::ifstream in(dir_ + "/ran");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // ran() once it has `line` (20 s at most): bash runs what it reads in order, so once a line
  // is in the log every line typed before it was run or refused, however slow the machine (a
  // quiet screen alone did not say so under the sanitizer's load: run53).
  std::string ran_through(const std::string& line) {
    test::eventually([&] { return ran().find(line) != std::string::npos; },
                     std::chrono::seconds(20));
    return ran();
  }

  std::unique_ptr<test::Stack> stack_;
  ServiceConfig config_;
  std::unique_ptr<test::InProcessService> svc_;
  std::string sb_, tid_, term_, dir_, session_;
};

// Sequences bash would run as `touch <file>` and a model could miss (each fails on the model
// before #32's fix: the file appeared).
std::vector<std::pair<std::string, std::string>> attacks(const std::string& dir,
                                                         const std::string& via) {
  std::string f = dir + "/" + via;
  return {
      {"osc", "\x1b] touch " + f + "-osc\r"},    // ESC ] dropped by readline, Enter runs
      {"csi", "\x1b[12touch " + f + "-csi\r"},   // readline ends ESC [ 1 2 at "2"
      {"ctrl-o", "touch " + f + "-ctrl-o\x0f"},  // operate-and-get-next runs the line
      {"alt",
       "\x1b"
       "btouch " +
           f + "-alt\r"},  // Alt-b moves the cursor
  };
}

TEST_F(TerminalModelTest, WhatBashRunsIsWhatThePolicyJudged) {
  const std::string log = " >> " + dir_ + "/ran";
  // Allowed lines with inert keys run as judged.
  EXPECT_EQ(rest("echo rest-ok\x1bOP" + log + "\r"), 200);
  EXPECT_FALSE(mcp("echo mcp-ok\x07" + log + "\r"));
  EXPECT_EQ(ws("echo ws-ok\x0c" + log + "\r"), "");
  for (const auto& [name, bytes] : attacks(dir_, "rest")) {
    int status = rest(bytes);
    EXPECT_TRUE(status == 422 || status == 403) << name << ": " << status;
    EXPECT_FALSE(exists("rest-" + name)) << name << ": bash ran a line the policy never judged";
  }
  for (const auto& [name, bytes] : attacks(dir_, "mcp")) {
    EXPECT_TRUE(mcp(bytes)) << name;
    EXPECT_FALSE(exists("mcp-" + name)) << name << ": bash ran a line the policy never judged";
  }
  for (const auto& [name, bytes] : attacks(dir_, "ws")) {
    EXPECT_NE(ws(bytes).find("\"type\":\"error\""), std::string::npos) << name;
    EXPECT_FALSE(exists("ws-" + name)) << name << ": bash ran a line the policy never judged";
  }
  // Split across calls: the unfinished sequence is refused in the first.
  EXPECT_EQ(rest("\x1b]"), 422);
  EXPECT_EQ(rest(" touch " + dir_ + "/split\r"), 403);  // judged whole: denied
  EXPECT_FALSE(exists("split"));
  EXPECT_EQ(rest("echo after" + log + "\r"), 200);
  // Once "after" is in the log, nothing the policy never judged may have run.
  EXPECT_EQ(ran_through("after\n"), "rest-ok\nmcp-ok\nws-ok\nafter\n");
  for (const char* via : {"rest", "mcp", "ws"})
    for (const auto& [name, bytes] : attacks(dir_, via))
      EXPECT_FALSE(exists(std::string(via) + "-" + name)) << via << " " << name;
  EXPECT_FALSE(exists("split"));
}

// Opening a terminal runs its command as exec would: the exec rules judge it (#32), and
// terminal.open / terminal.attach let an operator refuse terminals themselves.
TEST_F(TerminalModelTest, OpeningATerminalIsJudgedAsExecAndTerminalOpen) {
  const std::string base = "/v1/sandboxes/" + sb_ + "/terminals";
  auto r = call("POST", base, "{\"command\":" + quoted("touch " + dir_ + "/opened") + "}");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("policy.default[1]"), std::string::npos) << r.body;
  std::map<std::string, std::string> h{{"Accept", "application/json, text/event-stream"}};
  mcp("");  // a session
  h["Mcp-Session-Id"] = session_;
  auto m = call("POST", "/mcp",
                R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{)"
                R"("name":"terminal_open","arguments":{"sandbox_id":")" +
                    sb_ + R"(","command":)" + quoted("touch " + dir_ + "/mcp-opened") + "}}}",
                h);
  EXPECT_NE(m.body.find("\"isError\":true"), std::string::npos) << m.body;
  for (int i = 0; i < 20 && r.status == 201; ++i)  // before the fix: touch ran; give it time
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(exists("opened"));
  EXPECT_FALSE(exists("mcp-opened"));
  auto slept = call("POST", base, R"({"command":"sleep 60"})");
  EXPECT_EQ(slept.status, 403) << slept.body;
  EXPECT_NE(slept.body.find("no sleeping terminals"), std::string::npos) << slept.body;
  // terminal.attach: a watcher is refused before the upgrade, an interactive client is not.
  Poco::Net::HTTPClientSession cs("127.0.0.1", svc_->port());
  Poco::Net::HTTPRequest req("GET", term_ + "/ws?mode=watch", "HTTP/1.1");
  req.set("Authorization", "Bearer tok-alice");
  Poco::Net::HTTPResponse resp;
  EXPECT_ANY_THROW(WebSocket(cs, req, resp));
  EXPECT_EQ(resp.getStatus(), 403);
  EXPECT_EQ(ws("echo attach" + std::string(" >> ") + dir_ + "/ran\r"), "");
  EXPECT_EQ(ran_through("attach\n"), "attach\n");
}

// The WebSocket handshake's reply head, for a raw upgrade with these extra header lines.
std::string upgrade(std::uint16_t port, const std::string& uri, const std::string& headers) {
  Poco::Net::StreamSocket s(Poco::Net::SocketAddress("127.0.0.1", port));
  std::string req = "GET " + uri + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                    "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
                    headers + "\r\n";
  s.sendBytes(req.data(), static_cast<int>(req.size()));
  s.setReceiveTimeout(Poco::Timespan(10, 0));
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && s.receiveBytes(&c, 1) == 1) head += c;
  return head;
}

// #32 finding 6: the reply never names a bearer.* subprotocol; a foreign Origin is refused.
TEST_F(TerminalModelTest, WebSocketHandshakeHidesTheTokenAndChecksOrigin) {
  const std::string uri = term_ + "/ws";
  auto only = upgrade(svc_->port(), uri, "Sec-WebSocket-Protocol: bearer.tok-alice\r\n");
  EXPECT_NE(only.find(" 101 "), std::string::npos) << only;
  EXPECT_EQ(only.find("tok-alice"), std::string::npos) << only;
  EXPECT_EQ(only.find("Sec-WebSocket-Protocol"), std::string::npos) << only;
  auto two =
      upgrade(svc_->port(), uri, "Sec-WebSocket-Protocol: bearer.tok-alice, pvs-terminal\r\n");
  EXPECT_NE(two.find("Sec-WebSocket-Protocol: pvs-terminal"), std::string::npos) << two;
  EXPECT_EQ(two.find("tok-alice"), std::string::npos) << two;
  auto evil = upgrade(svc_->port(), uri,
                      "Authorization: Bearer tok-alice\r\nOrigin: https://evil.example\r\n");
  EXPECT_NE(evil.find(" 403 "), std::string::npos) << evil;
  auto own = upgrade(svc_->port(), uri,
                     "Authorization: Bearer tok-alice\r\nOrigin: http://127.0.0.1:" +
                         std::to_string(svc_->port()) + "\r\n");
  EXPECT_NE(own.find(" 101 "), std::string::npos) << own;
}

}  // namespace
}  // namespace pvs::service
