// Terminals through the REST API and the WebSocket, in-process (Api + HttpServer) on the real
// Manager against the netns stack: every sandbox is a namespace with a real sshd.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <thread>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/Net/WebSocket.h>

#include "app/api.h"
#include "core/observability/audit.h"
#include "http/auth.h"
#include "service/support/http_client.h"
#include "service/support/in_process_service.h"
#include "service/support/json_object.h"
#include "service/support/webhook_receiver.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

#ifndef PVS_SANDBOXCTL_BIN
#error "PVS_SANDBOXCTL_BIN must name the sandboxctl binary"
#endif

namespace pvs::service {
namespace {

using Poco::Net::WebSocket;
using test::http;
using test::HttpReply;

// A line that is only the prompt ("$ " trimmed), JSON-escaped; ^ and $ are per line.
const std::string kPrompt = R"(^\\$ ?$)";

TEST(TerminalRoutes, EveryRouteIsInTheOpenApiDocument) {
  std::ifstream in(PVS_SOURCE_DIR "/docs/openapi.json");
  std::stringstream s;
  s << in.rdbuf();
  auto paths = json(s.str())->getObject("paths");
  for (const Route& r : Api::routes()) {
    std::string path(r.pattern), method(r.method);
    for (char& c : method) c = static_cast<char>(std::tolower(c));
    ASSERT_TRUE(paths->has(path)) << path;
    EXPECT_TRUE(paths->getObject(path)->has(method)) << method << " " << path;
  }
}

class TerminalApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = std::make_unique<test::Stack>();
    config_.listen_port = 0;
    config_.tokens = {{"alice", sha256_hex("tok-alice"), 4, false},
                      {"bob", sha256_hex("tok-bob"), 4, false}};
    config_.audit_file = stack_->dir() + "/audit.log";
    config_.terminal_max_per_sandbox = 3;
    config_.terminal_max_input_bytes = 4096;
    tune(config_);
    auto m = Manager::open(stack_->manager_config());
    ASSERT_TRUE(m) << m.error().message;
    auto svc = test::InProcessService::start(config_, std::shared_ptr<Manager>(std::move(*m)));
    ASSERT_TRUE(svc) << svc.error().message;
    svc_ = std::move(*svc);
    port_ = svc_->port();
    auto r = call("POST", "/v1/sandboxes", "{}");
    ASSERT_EQ(r.status, 201) << r.body;
    sb_ = json(r.body)->getValue<std::string>("id");
    base_ = "/v1/sandboxes/" + sb_ + "/terminals";
  }
  virtual void tune(ServiceConfig&) {}
  void TearDown() override {
    if (auto m = svc_ ? svc_->manager() : nullptr) {
      for (const auto& info : m->list()) EXPECT_TRUE(m->destroy_by_id(info.id));
    }
    svc_.reset();
    stack_.reset();
  }
  HttpReply call(const std::string& method, const std::string& uri, const std::string& body = "",
                 const std::string& token = "tok-alice") {
    return http(port_, method, uri, body, token);
  }
  std::string open(const std::string& body) {
    auto r = call("POST", base_, body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? base_ + "/" + json(r.body)->getValue<std::string>("id") : "";
  }
  // POST .../wait; returns the reply object.
  Poco::JSON::Object::Ptr wait(const std::string& term, const std::string& body) {
    auto r = call("POST", term + "/wait", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return json(r.body);
  }
  void expect_match(const std::string& term, const std::string& pattern) {
    auto w = wait(term, "{\"pattern\":\"" + pattern + "\",\"timeout_ms\":15000}");
    EXPECT_EQ(w->getValue<std::string>("outcome"), "matched")
        << pattern << ": " << call("GET", term + "/screen").body;
  }
  void input(const std::string& term, const std::string& items) {
    auto r = call("POST", term + "/input", "{\"input\":" + items + "}");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  std::unique_ptr<WebSocket> attach(const std::string& term, const std::string& query,
                                    bool subprotocol_auth = false,
                                    const std::string& token = "tok-alice") {
    Poco::Net::HTTPClientSession cs("127.0.0.1", port_);
    Poco::Net::HTTPRequest req("GET", term + "/ws" + query, "HTTP/1.1");
    if (subprotocol_auth) {
      req.set("Sec-WebSocket-Protocol", "pvs-terminal, bearer." + token);
    } else {
      req.set("Authorization", "Bearer " + token);
    }
    Poco::Net::HTTPResponse resp;
    auto ws = std::make_unique<WebSocket>(cs, req, resp);
    ws->setReceiveTimeout(Poco::Timespan(15, 0));
    return ws;
  }
  // Reads frames until `needle` was seen in binary data; returns what text frames said.
  static std::string read_until(WebSocket& ws, const std::string& needle, std::string* texts,
                                int* close_flags = nullptr) {
    std::string seen;
    char buf[65536];
    std::size_t from = 0;  // search only what is new (plus an overlap): floods are megabytes
    while (seen.find(needle, from) == std::string::npos) {
      from = seen.size() > needle.size() ? seen.size() - needle.size() : 0;
      int flags = 0;
      int n = ws.receiveFrame(buf, sizeof buf, flags);
      int op = flags & WebSocket::FRAME_OP_BITMASK;
      if (op == WebSocket::FRAME_OP_CLOSE || (n == 0 && flags == 0)) {
        if (close_flags) *close_flags = 1;
        if (texts && n > 2) *texts += std::string(buf + 2, static_cast<std::size_t>(n - 2));
        break;
      }
      if (op == WebSocket::FRAME_OP_TEXT) {
        if (texts) *texts += std::string(buf, static_cast<std::size_t>(n)) + "\n";
        if (std::string(buf, static_cast<std::size_t>(n)).find(needle) != std::string::npos) break;
      } else {
        seen.append(buf, static_cast<std::size_t>(n));
      }
    }
    return seen;
  }

  std::unique_ptr<test::Stack> stack_;
  ServiceConfig config_;
  std::unique_ptr<test::InProcessService> svc_;
  std::uint16_t port_ = 0;
  std::string sb_, base_;
};

TEST_F(TerminalApiTest, AnAgentEditsAFileWithViAndBadInputIsRefused) {
  const std::string file = stack_->home() + "/edited.txt";
  auto term = open("{\"command\":\"vi " + file + "\",\"cols\":100,\"rows\":30}");
  ASSERT_FALSE(term.empty());
  expect_match(term, "edited.txt");
  input(term,
        R"([{"text":"ihello from rest"},{"key":"Enter"},{"text":"line two"},{"key":"Escape"}])");
  expect_match(term, "line two");
  auto screen = json(call("GET", term + "/screen?scrollback=5").body);
  EXPECT_EQ(screen->getValue<int>("cols"), 100);
  EXPECT_EQ(screen->getArray("lines")->size(), 30u);
  EXPECT_EQ(screen->getArray("lines")->getElement<std::string>(0), "hello from rest");
  EXPECT_TRUE(screen->getValue<bool>("alternate_screen"));
  // Errors: unknown key (named), bad regex, oversize input, unknown terminal, not JSON items.
  auto bad_key = call("POST", term + "/input", R"({"input":[{"text":"x"},{"key":"Hyper-Q"}]})");
  EXPECT_EQ(bad_key.status, 400);
  EXPECT_NE(bad_key.body.find("Hyper-Q"), std::string::npos) << bad_key.body;
  auto bad_item = call("POST", term + "/input", R"({"input":[{"text":"x","key":"Enter"}]})");
  EXPECT_EQ(bad_item.status, 400) << bad_item.body;
  auto big =
      call("POST", term + "/input", "{\"input\":[{\"text\":\"" + std::string(5000, 'a') + "\"}]}");
  EXPECT_EQ(big.status, 413) << big.body;
  auto bad_regex = call("POST", term + "/wait", R"({"pattern":"(unclosed"})");
  EXPECT_EQ(bad_regex.status, 400);
  EXPECT_NE(bad_regex.body.find("pattern"), std::string::npos) << bad_regex.body;
  EXPECT_EQ(call("GET", base_ + "/t-000000000000").status, 404);
  EXPECT_EQ(call("GET", term, "", "tok-bob").status, 404);  // bob cannot see alice's sandbox
  EXPECT_EQ(call("POST", term + "/input", R"({"input":[{"text":"x"}]})", "tok-bob").status, 404);
  input(term, R"([{"text":":wq"},{"key":"Enter"}])");
  auto done = wait(term, R"({"timeout_ms":10000})");
  EXPECT_EQ(done->getValue<std::string>("outcome"), "exited");
  auto info = json(call("GET", term).body);
  EXPECT_EQ(info->getValue<std::string>("state"), "exited");
  EXPECT_EQ(info->getValue<int>("exit_code"), 0);
  auto cat = call("POST", "/v1/sandboxes/" + sb_ + "/exec", "{\"command\":\"cat " + file + "\"}");
  EXPECT_EQ(json(cat.body)->getValue<std::string>("stdout"), "hello from rest\nline two\n");
  EXPECT_EQ(call("POST", term + "/input", R"({"input":[{"text":"x"}]})").status, 409);
  // Audited: open and input, without what was typed.
  std::ifstream in(config_.audit_file);
  std::string audit((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(audit.find("\"terminal.open\""), std::string::npos);
  EXPECT_NE(audit.find("\"terminal.input\""), std::string::npos);
  EXPECT_EQ(audit.find("hello from rest"), std::string::npos);
  EXPECT_EQ(call("DELETE", term).status, 204);
  EXPECT_EQ(call("GET", term).status, 404);
}

TEST_F(TerminalApiTest, ShellCtrlCResizeTopLimitsAndDestroy) {
  auto shell = open("{}");
  ASSERT_FALSE(shell.empty());
  expect_match(shell, kPrompt);
  // The command says when it runs (the typed line does not show "ready42"): C-c comes after.
  input(shell, R"([{"text":"sh -c 'echo ready$((6*7)); exec sleep 100'"},{"key":"Enter"}])");
  expect_match(shell, "ready42");
  input(shell, R"([{"key":"C-c"},{"text":"echo rc=$?"},{"key":"Enter"}])");
  expect_match(shell, "rc=130");
  EXPECT_EQ(call("POST", shell + "/resize", R"({"cols":120,"rows":33})").status, 200);
  input(shell, R"([{"text":"stty size; tput cols"},{"key":"Enter"}])");
  expect_match(shell, "33 120\\n120");
  auto top = open(R"({"command":"top -d 1"})");
  // top writes its summary before the task table: wait for the table's header, not the summary.
  expect_match(top, "load average");
  expect_match(top, "PID +USER");
  auto lines = json(call("GET", top + "/screen").body)->getArray("lines");
  std::string text;
  for (std::size_t i = 0; i < lines->size(); ++i) text += lines->getElement<std::string>(i) + "\n";
  EXPECT_NE(text.find("PID"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  auto third = open(R"({"command":"sleep 300"})");
  auto fourth = call("POST", base_, "{}");
  EXPECT_EQ(fourth.status, 429) << fourth.body;
  EXPECT_NE(fourth.body.find("terminals.max_per_sandbox"), std::string::npos) << fourth.body;
  EXPECT_EQ(json(call("GET", base_).body)->getArray("terminals")->size(), 3u);
  // Destroying the sandbox closes every terminal: the processes are gone.
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + sb_).status, 204);
  EXPECT_EQ(call("GET", top).status, 404);
  std::string left = "?";
  for (int i = 0; i < 200 && !left.empty(); ++i) {
    left.clear();
    test::run_command({"pgrep", "-u", stack_->user(), "-f", "top -d [1]|sleep 30[0]"}, &left);
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(left, "");
}

TEST_F(TerminalApiTest, WebSocketWatchersSlowReadersReattachAndExit) {
  auto term = open(R"({"command":"sh"})");
  ASSERT_FALSE(term.empty());
  auto watcher = attach(term, "?mode=watch", /*subprotocol_auth=*/true);
  // A watcher that never reads, with a tiny receive buffer (set before connecting).
  Poco::Net::StreamSocket slow(Poco::Net::SocketAddress::IPv4);
  slow.setReceiveBufferSize(4096);
  slow.connect(Poco::Net::SocketAddress("127.0.0.1", port_));
  std::string upgrade = "GET " + term + "/ws?mode=watch HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                        "Upgrade: websocket\r\nConnection: Upgrade\r\n" +
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
                        "Sec-WebSocket-Version: 13\r\nAuthorization: Bearer tok-alice\r\n\r\n";
  slow.sendBytes(upgrade.data(), static_cast<int>(upgrade.size()));
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && slow.receiveBytes(&c, 1) == 1) head += c;
  ASSERT_NE(head.find(" 101 "), std::string::npos) << head;
  {
    auto typist = attach(term, "");
    std::string msg = "echo ws-$((6*7))\r";
    typist->sendFrame(msg.data(), static_cast<int>(msg.size()), WebSocket::FRAME_BINARY);
    EXPECT_NE(read_until(*typist, "ws-42", nullptr).find("ws-42"), std::string::npos);
    EXPECT_NE(read_until(*watcher, "ws-42", nullptr).find("ws-42"), std::string::npos);
    // A watcher may not type.
    std::string no = "touch /tmp/never\r", texts;
    watcher->sendFrame(no.data(), static_cast<int>(no.size()), WebSocket::FRAME_BINARY);
    read_until(*watcher, "read-only", &texts);
    EXPECT_NE(texts.find("read-only watcher"), std::string::npos) << texts;
    std::string resize = R"({"type":"resize","cols":91,"rows":21})";
    typist->sendFrame(resize.data(), static_cast<int>(resize.size()), WebSocket::FRAME_TEXT);
    // Lots of output: the slow watcher is dropped, the others (reading) keep up.
    std::string watched;
    std::thread watch_reader([&] { watched = read_until(*watcher, "flood-2", nullptr); });
    // 8 MB in 2 s (long lines: the emulator pays per scrolled line; this is about watchers).
    std::string flood =
        "for i in $(seq 40); do head -c 200000 /dev/zero | tr '\\0' x; sleep 0.05; done; "
        "echo; echo flood-$((1+1))\r";
    typist->sendFrame(flood.data(), static_cast<int>(flood.size()), WebSocket::FRAME_BINARY);
    EXPECT_NE(read_until(*typist, "flood-2", nullptr).find("flood-2"), std::string::npos);
    watch_reader.join();
    EXPECT_NE(watched.find("flood-2"), std::string::npos);
    typist->shutdown();  // the client goes away; the terminal stays
  }
  // The typist's and the slow watcher's connections end on the server's own time: poll.
  auto info = json(call("GET", term).body);
  for (int i = 0; i < 400 && info->getValue<int>("watchers") != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    info = json(call("GET", term).body);
  }
  EXPECT_EQ(info->getValue<std::string>("state"), "running");
  EXPECT_EQ(info->getValue<int>("cols"), 91);
  EXPECT_EQ(info->getValue<int>("watchers"), 1) << "the slow watcher is dropped";
  // The slow watcher gets what was in flight, then a close frame (1008) saying why.
  slow.setReceiveTimeout(Poco::Timespan(15, 0));
  std::string rest;
  char buf[65536];
  for (int n; (n = slow.receiveBytes(buf, sizeof buf)) > 0;)
    rest.append(buf, static_cast<std::size_t>(n));
  EXPECT_NE(rest.find("too slow"), std::string::npos) << rest.size() << " bytes";
  // A client nobody here wrote: Debian's python3-websockets, authenticated like a browser.
  std::string py;
  int py_rc = test::run_command(
      {"/usr/bin/python3", PVS_SOURCE_DIR "/tests/service/api/terminals/ws_terminal_client.py",
       "ws://127.0.0.1:" + std::to_string(port_) + term + "/ws", "tok-alice"},
      &py);
  EXPECT_EQ(py_rc, 0) << py;
  EXPECT_NE(py.find("ok pvs-terminal"), std::string::npos) << py;
  EXPECT_EQ(json(call("GET", term).body)->getValue<int>("cols"), 77);
  // Re-attach and end the program: the exit code arrives as a text frame.
  auto again = attach(term, "");
  std::string bye = "exit 7\r", texts;
  again->sendFrame(bye.data(), static_cast<int>(bye.size()), WebSocket::FRAME_BINARY);
  read_until(*again, "\"type\":\"exit\"", &texts);
  EXPECT_NE(texts.find(R"({"type":"exit","code":7})"), std::string::npos) << texts;
  EXPECT_EQ(json(call("GET", term).body)->getValue<int>("exit_code"), 7);
}

// WebSockets run off the HTTP worker pool (http/ws_sessions.h), within caps per token
// and in all (#32, finding 6).
class TerminalWsCapTest : public TerminalApiTest {
 protected:
  void tune(ServiceConfig& c) override {
    c.http_threads = 4;
    c.terminal_max_websockets_per_token = 6;
    c.terminal_max_websockets = 8;
  }
  // The status of an upgrade: 101, or what refused it (the client's handshake throws then).
  int upgrade_status(const std::string& term, const std::string& token) {
    Poco::Net::HTTPClientSession cs("127.0.0.1", port_);
    Poco::Net::HTTPRequest req("GET", term + "/ws", "HTTP/1.1");
    req.set("Authorization", "Bearer " + token);
    Poco::Net::HTTPResponse resp;
    try {
      WebSocket ws(cs, req, resp);
      return 101;
    } catch (const Poco::Exception&) {
      return static_cast<int>(resp.getStatus());
    }
  }
};

TEST_F(TerminalWsCapTest, WebSocketsHoldNoWorkerAndStayWithinTheirCaps) {
  auto term = open(R"({"command":"sh"})");
  ASSERT_FALSE(term.empty());
  // Six open WebSockets on four HTTP workers: on the pool the fifth upgrade would wait forever.
  std::vector<std::unique_ptr<WebSocket>> mine;
  for (int i = 0; i < 6; ++i) mine.push_back(attach(term, "?mode=watch"));
  auto info = call("GET", term);  // and the API still answers
  ASSERT_EQ(info.status, 200) << info.body;
  EXPECT_EQ(upgrade_status(term, "tok-alice"), 429) << "the per-token cap";
  // Bob, on a sandbox of his own, fills the controller's cap of 8.
  auto made = call("POST", "/v1/sandboxes", "{}", "tok-bob");
  ASSERT_EQ(made.status, 201) << made.body;
  std::string bobs = "/v1/sandboxes/" + json(made.body)->getValue<std::string>("id") + "/terminals";
  auto t = call("POST", bobs, R"({"command":"sh"})", "tok-bob");
  ASSERT_EQ(t.status, 201) << t.body;
  std::string bob_term = bobs + "/" + json(t.body)->getValue<std::string>("id");
  auto b1 = attach(bob_term, "?mode=watch", false, "tok-bob");
  auto b2 = attach(bob_term, "?mode=watch", false, "tok-bob");
  EXPECT_EQ(upgrade_status(bob_term, "tok-bob"), 429) << "the controller's cap";
  // A place comes back when a WebSocket ends (on the server's own time: poll).
  mine.back()->shutdown();
  mine.pop_back();
  int status = 0;
  for (int i = 0; i < 400 && (status = upgrade_status(term, "tok-alice")) != 101; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(status, 101);
  // TearDown stops the service with these still open: stop() hangs them up and joins them.
}

class TerminalIdleTest : public TerminalApiTest {
 protected:
  void tune(ServiceConfig& c) override {
    c.terminal_idle_timeout_seconds = 1;
    c.terminal_max_per_token = 1;
  }
};

TEST_F(TerminalIdleTest, IdleTerminalsAreClosedAndTheTokenLimitHolds) {
  auto term = open(R"({"command":"sleep 600"})");
  ASSERT_FALSE(term.empty());
  auto second = call("POST", base_, "{}");
  EXPECT_EQ(second.status, 429) << second.body;
  EXPECT_NE(second.body.find("terminals.max_per_token"), std::string::npos) << second.body;
  int status = 200;
  for (int i = 0; i < 200 && status == 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    status = call("GET", term).status;
  }
  EXPECT_EQ(status, 404) << "closed and forgotten after 1 s without activity";
  EXPECT_EQ(call("POST", base_, "{}").status, 201);  // its slot is free again
}

TEST_F(TerminalApiTest, SandboxctlShellReturnsTheRemoteExitCode) {
  const std::string url = "http://127.0.0.1:" + std::to_string(port_);
  const std::string ctl =
      std::string(PVS_SANDBOXCTL_BIN) + " --url " + url + " --token tok-alice shell " + sb_;
  // On a terminal (script gives sandboxctl a pty): raw mode, exit code of the command.
  std::string out;
  int rc = test::run_command(
      {"script", "-qec", ctl + " -- sh -c 'echo on-a-tty; exit 3'", "/dev/null"}, &out);
  EXPECT_EQ(rc, 3) << out;
  EXPECT_NE(out.find("on-a-tty"), std::string::npos) << out;
  // Without a terminal: input from a pipe, then EOF.
  rc = test::run_command({"sh", "-c", "printf 'echo piped-$((2+3))\\nexit 4\\n' | " + ctl}, &out);
  EXPECT_EQ(rc, 4) << out;
  EXPECT_NE(out.find("piped-5"), std::string::npos) << out;
}

}  // namespace
}  // namespace pvs::service

namespace pvs::service {
namespace {

// terminal.input under a policy: lines judged whole across calls, a denied line forgotten by the
// shell too, an approved one run once a person said yes; the WebSocket asks the same policy.
class TerminalPolicyTest : public TerminalApiTest {
 protected:
  void tune(ServiceConfig& c) override {
    c.tokens.push_back({"carol", sha256_hex("tok-carol"), 0, false, true});  // an approver
    PolicySpec spec;
    PolicyRuleSpec deny;
    deny.where = "policy.default[0]";
    deny.actions = {PolicyAction::kTerminalInput};
    deny.command = R"((^|\s)rm\s+-rf\s+/(\s|$))";
    deny.verdict = Verdict::kDeny;
    deny.message = "no rm -rf /";
    PolicyRuleSpec ask = deny;
    ask.where = "policy.default[1]";
    ask.command = "^touch ";
    ask.verdict = Verdict::kApprove;
    ask.message = "a person approves touch";
    spec.default_rules = {deny, ask};
    auto policy = Policy::compile(spec);
    ASSERT_TRUE(policy) << policy.error().message;
    c.policy = *policy;
    c.approval_wait_seconds = 10;
    c.approval_timeout_seconds = 10;
    // Made here, in the namespace the stack put this thread in, where the API's threads run.
    receiver_ = std::make_unique<test::Receiver>(std::deque<int>{503});
    c.webhook.url = receiver_->url();  // the first delivery fails: retried
    c.webhook.secret = "hook-secret";
    c.webhook.first_backoff = std::chrono::milliseconds(20);
  }
  std::unique_ptr<test::Receiver> receiver_;
};

TEST_F(TerminalPolicyTest, LinesAreJudgedWholeRefusedOnesForgottenApprovedOnesRun) {
  auto term = open(R"({"command":"sh"})");
  ASSERT_FALSE(term.empty());
  expect_match(term, kPrompt);
  input(term, R"([{"text":"echo rm -r"}])");  // no complete line yet: nothing to judge
  auto rm = call("POST", term + "/input", R"({"input":[{"text":"f /"},{"key":"Enter"}]})");
  EXPECT_EQ(rm.status, 403) << rm.body;
  EXPECT_NE(rm.body.find("denied by policy rule policy.default[0]: no rm -rf /"), std::string::npos)
      << rm.body;
  input(term, R"([{"text":"echo o''k"},{"key":"Enter"}])");  // the shell forgot "echo rm -r" too
  expect_match(term, "^ok$");

  // Approve: 202 and an approval id; carol approves; the repeated call runs it, once.
  const std::string file = stack_->home() + "/approved";
  const std::string touch = R"({"input":[{"text":"touch )" + file + R"("},{"key":"Enter"}]})";
  auto pending =
      http(port_, "POST", term + "/input", touch, "tok-alice", {{"Prefer", "respond-async"}});
  ASSERT_EQ(pending.status, 202) << pending.body;
  std::string id = json(pending.body)->getObject("approval")->getValue<std::string>("id");
  ASSERT_EQ(call("POST", "/v1/approvals/" + id + "/approve", "", "tok-carol").status, 200);
  auto ran = http(port_, "POST", term + "/input", touch, "tok-alice", {{"Approval", id}});
  EXPECT_EQ(ran.status, 200) << ran.body;
  input(term, R"([{"text":"ls )" + file + R"( && echo th''ere"},{"key":"Enter"}])");
  expect_match(term, "^there$");
  EXPECT_EQ(http(port_, "POST", term + "/input", touch, "tok-alice", {{"Approval", id}}).status,
            403);  // used once

  // The WebSocket: the same rule refuses the line, says why, and the shell forgets it.
  auto ws = attach(term, "");
  std::string line = "echo rm -rf /\r";
  ws->sendFrame(line.data(), static_cast<int>(line.size()), WebSocket::FRAME_BINARY);
  std::string texts;
  read_until(*ws, "no rm -rf /", &texts);
  EXPECT_NE(texts.find("denied by policy rule policy.default[0]"), std::string::npos) << texts;
  std::string next = "echo w''s-ok\r";
  ws->sendFrame(next.data(), static_cast<int>(next.size()), WebSocket::FRAME_BINARY);
  read_until(*ws, "ws-ok\r\n", nullptr);
  ws->close();
  std::ifstream in(config_.audit_file);
  std::string audit((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(audit.find("\"via\":\"websocket\""), std::string::npos);
  EXPECT_NE(audit.find("\"decided_by\":\"carol\""), std::string::npos);
  // The webhook: the pending approval (after one 503) and carol's decision, signed.
  auto got = receiver_->wait_for(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].id, got[1].id);
  EXPECT_EQ(got[1].event, "approval.pending");
  EXPECT_NE(got[1].body.find("\"id\":\"" + id + "\""), std::string::npos) << got[1].body;
  EXPECT_EQ(got[2].event, "approval.decided");
  EXPECT_NE(got[2].body.find("\"decided_by\":\"carol\""), std::string::npos) << got[2].body;
  for (const auto& d : got)
    EXPECT_EQ(d.signature, test::receiver_signature("hook-secret", d.timestamp, d.body));
  EXPECT_NE(call("GET", "/metrics", "", "")
                .body.find("pvs_webhook_deliveries_total{outcome=\"retried\"} 1"),
            std::string::npos);
}

// A person decides with sandboxctl: watch sees the pending input, deny and approve decide it.
TEST_F(TerminalPolicyTest, SandboxctlApprovalsWatchDenyAndApprove) {
  auto term = open(R"({"command":"sh"})");
  ASSERT_FALSE(term.empty());
  const std::string url = "http://127.0.0.1:" + std::to_string(port_);
  auto ctl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{PVS_SANDBOXCTL_BIN, "--url",     url,
                                  "--token",          "tok-carol", "approvals"};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_captured(argv, stack_->dir());
  };
  const std::string watched = stack_->dir() + "/watch.out";
  test::SpawnOptions to_file;
  to_file.stdout_file = watched;
  pid_t watch = test::spawn_process({PVS_SANDBOXCTL_BIN, "--url", url, "--token", "tok-carol",
                                     "approvals", "watch", "--interval-ms", "100", "--count", "1"},
                                    to_file);
  ASSERT_GT(watch, 0);
  const std::string touch = R"({"input":[{"text":"touch /nonexistent/x"},{"key":"Enter"}]})";
  std::map<std::string, std::string> async{{"Prefer", "respond-async"}};
  auto pending = http(port_, "POST", term + "/input", touch, "tok-alice", async);
  ASSERT_EQ(pending.status, 202) << pending.body;
  std::string id = json(pending.body)->getObject("approval")->getValue<std::string>("id");
  int status = 0;
  ASSERT_EQ(waitpid(watch, &status, 0), watch);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::ifstream in(watched);
  std::string seen((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(seen.find(id + " pending: alice terminal.input in " + sb_ + ": touch /nonexistent/x"),
            std::string::npos)
      << seen;

  auto listed = ctl({});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(id), std::string::npos) << listed.out;
  auto denied = ctl({"deny", id, "--reason", "not now"});
  EXPECT_EQ(denied.exit_code, 0) << denied.err;
  EXPECT_NE(denied.out.find(id + " denied"), std::string::npos) << denied.out;
  auto again = http(port_, "POST", term + "/input", touch, "tok-alice", {{"Approval", id}});
  EXPECT_EQ(again.status, 403) << again.body;
  EXPECT_NE(again.body.find("not now"), std::string::npos) << again.body;

  pending = http(port_, "POST", term + "/input", touch, "tok-alice", async);
  ASSERT_EQ(pending.status, 202) << pending.body;
  id = json(pending.body)->getObject("approval")->getValue<std::string>("id");
  EXPECT_EQ(ctl({"approve", id}).exit_code, 0);
  EXPECT_EQ(http(port_, "POST", term + "/input", touch, "tok-alice", {{"Approval", id}}).status,
            200);
  auto unknown = ctl({"approve", "ap-00000000-000000000099"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("ap-00000000-000000000099"), std::string::npos) << unknown.err;
  auto alice = test::run_captured(
      {PVS_SANDBOXCTL_BIN, "--url", url, "--token", "tok-alice", "approvals", "approve", id},
      stack_->dir());
  EXPECT_EQ(alice.exit_code, 1);  // not an approver
  EXPECT_NE(alice.err.find("approver"), std::string::npos) << alice.err;
}

}  // namespace
}  // namespace pvs::service
