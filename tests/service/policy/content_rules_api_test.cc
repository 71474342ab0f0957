// Content rules through REST and MCP on the netns stack (a real sshd per sandbox): a Python
// file importing socket is held for a person, and once approved the same write goes through
// (once); a harmless write passes; a deny rule denies; an edit is judged on the file it leaves;
// exec's stdin is judged (docs/policy.md "Content rules").
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>

#include "service/support/approval_fixture.h"

namespace pvs::service {
namespace {

class ContentRulesApiTest : public ApprovalApiTest {
 protected:
  void adjust_service(ServiceConfig& c) override {
    add_approver(c);
    auto rule = [](const std::string& where, std::set<PolicyAction> actions, Verdict verdict,
                   const std::string& content, const std::string& message) {
      PolicyRuleSpec r;
      r.where = where;
      r.actions = std::move(actions);
      r.verdict = verdict;
      r.content = content;
      r.message = message;
      return r;
    };
    PolicySpec spec;
    auto py = rule("policy.default[0]", {PolicyAction::kFilesWrite, PolicyAction::kFilesEdit},
                   Verdict::kApprove, R"(^\s*(import|from)\s+(socket|ctypes)\b)",
                   "network code needs a person");
    py.path = "*.py";
    py.content_max_bytes = 4096;  // beyond it: `oversize`, by default approve
    spec.default_rules.push_back(py);
    auto keys = rule("policy.default[1]", {PolicyAction::kFilesWrite}, Verdict::kDeny,
                     "PRIVATE KEY-----", "no keys");
    keys.content_max_bytes = 8192;  // an upload is read up to 8193 bytes before the decision
    spec.default_rules.push_back(keys);
    spec.default_rules.push_back(rule("policy.default[2]", {PolicyAction::kExec}, Verdict::kDeny,
                                      R"(\bcurl\b)", "no curl on stdin"));
    auto policy = Policy::compile(spec);
    ASSERT_TRUE(policy) << policy.error().message;
    c.policy = *policy;
    c.approval_wait_seconds = 1;  // MCP: undecided after 1 s, the tool answers with the approval
  }
};

TEST_F(ContentRulesApiTest, RestWritesAndEditsAreJudgedOnTheirContent) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  std::string files = "/v1/sandboxes/" + sb + "/files?path=";
  std::string net = files + dir_ + "/net.py";
  std::string code = "import os\nimport socket\n";
  // Held for a person; no Content-Digest needed: the body was read whole, its digest binds.
  std::string id = ask("PUT", net, code);
  ASSERT_FALSE(id.empty());
  auto shown = call("GET", "/v1/approvals/" + id, "", "tok-carol");
  EXPECT_NE(shown.body.find("network code needs a person"), std::string::npos) << shown.body;
  EXPECT_EQ(call("GET", net).status, 404);  // nothing written meanwhile
  ASSERT_TRUE(approve(id));
  EXPECT_EQ(call("PUT", net, "import socket\n", "tok-alice", {{"Approval", id}}).status, 403);
  auto ok = call("PUT", net, code, "tok-alice", {{"Approval", id}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(call("GET", net).body, code);
  EXPECT_EQ(call("PUT", net, code, "tok-alice", {{"Approval", id}}).status, 403);  // once

  // Harmless: another module, another file type.
  EXPECT_EQ(call("PUT", files + dir_ + "/ok.py", "import os\n").status, 200);
  EXPECT_EQ(call("PUT", files + dir_ + "/notes.txt", code).status, 200);
  // Denied, nothing written.
  auto key = call("PUT", files + dir_ + "/k", "-----BEGIN PRIVATE KEY-----\nMII\n");
  EXPECT_EQ(key.status, 403) << key.body;
  EXPECT_NE(key.body.find("policy.default[1]: no keys"), std::string::npos) << key.body;
  EXPECT_EQ(call("GET", files + dir_ + "/k").status, 404);
  // Larger than the Python rule's bound (4096): not searched, a person looks; read whole (the
  // key rule reads up to 8192), so its digest binds the approval.
  id = ask("PUT", files + dir_ + "/big.py", std::string(5000, '#'));
  ASSERT_FALSE(id.empty());
  EXPECT_NE(call("GET", "/v1/approvals/" + id, "", "tok-carol")
                .body.find("content larger than 4096 bytes, not searched"),
            std::string::npos);
  // Larger than every bound: not read whole, so the person's approval needs Content-Digest.
  auto big = call("PUT", files + dir_ + "/big.py", std::string(10000, '#'));
  EXPECT_EQ(big.status, 400) << big.body;
  EXPECT_NE(big.body.find("Content-Digest"), std::string::npos) << big.body;

  // An edit is judged on the file it leaves: `os` -> `ctypes` makes an import of ctypes.
  std::string edit = "/v1/sandboxes/" + sb + "/files/edit";
  std::string to_ctypes =
      R"({"path":")" + dir_ + R"(/ok.py","old_string":"os","new_string":"ctypes"})";
  id = ask("POST", edit, to_ctypes);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(call("GET", files + dir_ + "/ok.py").body, "import os\n");
  ASSERT_TRUE(approve(id));
  auto edited = call("POST", edit, to_ctypes, "tok-alice", {{"Approval", id}});
  EXPECT_EQ(edited.status, 200) << edited.body;
  EXPECT_EQ(call("GET", files + dir_ + "/ok.py").body, "import ctypes\n");
  auto harmless = call(
      "POST", edit, R"({"path":")" + dir_ + R"(/notes.txt","old_string":"os","new_string":"x"})");
  EXPECT_EQ(harmless.status, 200) << harmless.body;
}

TEST_F(ContentRulesApiTest, ExecStdinIsJudged) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  std::string exec = "/v1/sandboxes/" + sb + "/exec";
  auto denied = call("POST", exec, R"({"command":"sh","stdin":"echo a\ncurl http://x\n"})");
  EXPECT_EQ(denied.status, 403) << denied.body;
  EXPECT_NE(denied.body.find("no curl on stdin"), std::string::npos) << denied.body;
  auto ran = call("POST", exec, R"({"command":"cat","stdin":"hello"})");
  EXPECT_EQ(ran.status, 200) << ran.body;
  EXPECT_NE(ran.body.find(R"("stdout":"hello")"), std::string::npos) << ran.body;
}

TEST_F(ContentRulesApiTest, McpWritesEditsAndExecAreJudged) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  std::map<std::string, std::string> headers = {{"Accept", "application/json, text/event-stream"}};
  auto init = call("POST", "/mcp",
                   R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{)"
                   R"("protocolVersion":"2025-06-18","capabilities":{},)"
                   R"("clientInfo":{"name":"content-test","version":"1"}}})",
                   "tok-alice", headers);
  ASSERT_EQ(init.status, 200) << init.body;
  headers["Mcp-Session-Id"] = init.headers["Mcp-Session-Id"];
  headers["MCP-Protocol-Version"] = "2025-06-18";
  ASSERT_EQ(call("POST", "/mcp", R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                 "tok-alice", headers)
                .status,
            202);
  auto tool = [&](const std::string& name, const std::string& arguments) {
    auto r = call("POST", "/mcp",
                  R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":")" + name +
                      R"(","arguments":{"sandbox_id":")" + sb + "\"," + arguments + "}}}",
                  "tok-alice", headers);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body;
  };
  auto is_error = [](const std::string& body) {
    return body.find("\"isError\":true") != std::string::npos;
  };
  std::string path = dir_ + "/m.py";
  std::string write = R"("path":")" + path + R"(","content":"from socket import socket\n")";
  auto held = tool("write_file", write);
  ASSERT_TRUE(is_error(held)) << held;
  EXPECT_NE(held.find("is pending: a person must approve"), std::string::npos) << held;
  auto pending = api_->gate().approvals().list(true);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + sb + "/files?path=" + path).status, 404);
  ASSERT_TRUE(approve(pending[0].id));
  auto wrote = tool("write_file", write);
  EXPECT_FALSE(is_error(wrote)) << wrote;
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + sb + "/files?path=" + path).body,
            "from socket import socket\n");
  auto fine = tool("write_file", R"("path":")" + dir_ + R"(/n.py","content":"import os\n")");
  EXPECT_FALSE(is_error(fine)) << fine;
  auto key = tool("write_file", R"("path":")" + dir_ + R"(/k","content":"PRIVATE KEY-----")");
  ASSERT_TRUE(is_error(key)) << key;
  EXPECT_NE(key.find("no keys"), std::string::npos) << key;
  auto edit =
      tool("edit_file", R"("path":")" + dir_ +
                            R"(/n.py","old_string":"import os","new_string":"import ctypes")");
  ASSERT_TRUE(is_error(edit)) << edit;
  EXPECT_NE(edit.find("is pending"), std::string::npos) << edit;
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + sb + "/files?path=" + dir_ + "/n.py").body,
            "import os\n");
  auto curl = tool("exec", R"("command":"sh","stdin":"curl http://x")");
  ASSERT_TRUE(is_error(curl)) << curl;
  EXPECT_NE(curl.find("no curl on stdin"), std::string::npos) << curl;
  auto cat = tool("exec", R"("command":"cat","stdin":"meow")");
  EXPECT_FALSE(is_error(cat)) << cat;
  EXPECT_NE(cat.find("meow"), std::string::npos) << cat;
}

}  // namespace
}  // namespace pvs::service
