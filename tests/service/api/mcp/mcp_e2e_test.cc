// MCP end to end with a client nobody here wrote: the official TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in tests/service/api/mcp/package-lock.json, run by the
// machine's node) drives pve-sandbox-controller's /mcp on the whole stack (pvesim's netns
// backend, the real agent and nftables). tests/service/api/mcp/client.mjs does the MCP side and
// prints PASS/FAIL per check; this test installs the SDK (npm ci, once per lock file), runs
// the client in the stack's namespace and checks what only the host can see: the agent's
// internet set, the containers, the audit log. Without node or npm it fails, never skips.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <Poco/JSON/Parser.h>

#include "http/auth.h"
#include "service/support/controller_fixture.h"
#include "service/support/http_client.h"
#include "service/support/node_e2e_support.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

#ifndef PVS_CONTROLLER_BIN
#error "PVS_CONTROLLER_BIN, PVS_MCP_CLIENT_DIR and PVS_MCP_NODE_DIR must be defined"
#endif

namespace pvs::service {
namespace {

namespace fs = std::filesystem;

using test::slurp;

using Proc = test::ProcessResult;

Proc run(const std::vector<std::string>& argv, const std::string& dir,
         const std::vector<std::string>& env = {}) {
  return test::run_captured(argv, dir, "", env);
}

// The PASS/FAIL lines of a client run, for the failure message.
std::string report(const Proc& p) {
  return "exit " + std::to_string(p.exit_code) + "\nstdout:\n" + p.out + "stderr:\n" + p.err;
}

class McpE2eTest : public test::ControllerOnStackTest {
 protected:
  // npm ci into the build tree, before any namespace exists (the registry is outside it).
  // Both tests of this suite may start at once (ctest -j): the install holds a file lock, and
  // its failure fails each test (SetUp) instead of skipping it.
  static void SetUpTestSuite() {
    install_error_ = test::npm_install_once(PVS_MCP_CLIENT_DIR, PVS_MCP_NODE_DIR, "client.mjs",
                                            "@modelcontextprotocol/sdk");
  }
  static inline std::string install_error_;

  void SetUp() override {
    ASSERT_TRUE(install_error_.empty()) << install_error_;
    ASSERT_TRUE(
        fs::exists(std::string(PVS_MCP_NODE_DIR) + "/node_modules/@modelcontextprotocol/sdk"))
        << "the MCP SDK is not installed";
    start(PVS_CONTROLLER_BIN, std::string() +
                                  "auth:\n  tokens:\n    - name: agent\n      sha256: " +
                                  sha256_hex("tok-agent") + "\n      max_sandboxes: 8\n" +
                                  "    - name: other\n      sha256: " + sha256_hex("tok-other") +
                                  "\n"
                                  // A kept-alive connection holds an HTTP thread (Poco): one per
                                  // concurrent client, as docs/mcp.md says to size it. Node's
                                  // fetch (undici) reuses an idle connection for up to 4 s; with
                                  // the server's 5 s a starved CPU (the sanitizer pass, tests in
                                  // parallel) made it reuse one the server had just closed
                                  // ("other side closed"), so idle connections stay longer here.
                                  + "http:\n  threads: 64\n  keepalive_timeout_seconds: 60\n");
  }

  Proc client(std::vector<std::string> args) {
    std::vector<std::string> argv = {"node", std::string(PVS_MCP_NODE_DIR) + "/client.mjs"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, dir_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }
};

TEST_F(McpE2eTest, OfficialSdkClientUsesEveryTool) {
  auto created = client({"create", url(), "tok-agent"});
  ASSERT_EQ(created.exit_code, 0) << report(created);
  auto sb = Poco::JSON::Parser().parse(created.out).extract<Poco::JSON::Object::Ptr>();
  std::string id = sb->getValue<std::string>("id");
  std::string address = sb->getValue<std::string>("address");
  // The internet tool reached the agent's set.
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{address});

  auto main = client({"main", url(), "tok-agent", "tok-other", id, stack_->home()});
  EXPECT_EQ(main.exit_code, 0) << report(main);
  for (const char* check : {"tools/list",
                            "sandbox_ports",
                            "sandbox_preview",
                            "sandbox_pause sandbox_resume",
                            "sandbox_capture sandbox_fork",
                            "exec",
                            "exec head+tail",
                            "exec progress",
                            "write_file read_file",
                            "edit_file",
                            "edit_file no match",
                            "edit_file several matches",
                            "edit_file CRLF",
                            "edit_file 10 MiB",
                            "read_file binary",
                            "list_dir",
                            "bad arguments are tool errors",
                            "unknown tool is a protocol error",
                            "malformed JSON-RPC",
                            "unknown method",
                            "transport headers",
                            "wrong token is 401 at connect",
                            "another token sees nothing",
                            "terminal: a REPL driven by input and screen",
                            "internet off",
                            "session end"}) {
    EXPECT_NE(main.out.find(std::string("PASS ") + check + "\n"), std::string::npos)
        << check << "\n"
        << report(main);
  }
  EXPECT_TRUE(stack_->internet_set().empty());

  // Every tool call is on record, with the token's name and never the other token's data.
  std::string audit = slurp(dir_ + "/audit.log");
  for (const char* action :
       {"mcp.session.open", "mcp.sandbox_create", "mcp.internet", "mcp.exec.start", "mcp.exec",
        "mcp.write_file", "mcp.read_file", "mcp.edit_file", "mcp.list_dir", "mcp.sandbox_list",
        "mcp.session.close"}) {
    EXPECT_NE(audit.find(std::string("\"action\":\"") + action + "\""), std::string::npos)
        << action;
  }
  bool other_refused = false;  // the other token's exec: on record, refused with not_found
  std::istringstream lines(audit);
  for (std::string l; std::getline(lines, l);) {
    other_refused |= l.find("\"token\":\"other\"") != std::string::npos &&
                     l.find("\"action\":\"mcp.exec\"") != std::string::npos &&
                     l.find("not_found") != std::string::npos;
  }
  EXPECT_TRUE(other_refused) << audit;
  EXPECT_EQ(audit.find("tok-agent"), std::string::npos);

  // The REST API sees the same sandbox, and its edit has the same semantics.
  std::string home = stack_->home();
  std::ofstream(home + "/rest.txt") << "a\nb\nb\n";
  ::chmod((home + "/rest.txt").c_str(), 0666);
  std::string edit = "/v1/sandboxes/" + id + "/files/edit";
  auto once = test::http(
      port_, "POST", edit,
      R"({"path":")" + home + R"(/rest.txt","old_string":"a\n","new_string":"A\n"})", "tok-agent");
  EXPECT_EQ(once.status, 200) << once.body;
  EXPECT_NE(once.body.find("\"replaced\":1"), std::string::npos) << once.body;
  auto twice = test::http(
      port_, "POST", edit,
      R"({"path":")" + home + R"(/rest.txt","old_string":"b","new_string":"B"})", "tok-agent");
  EXPECT_EQ(twice.status, 422) << twice.body;
  EXPECT_NE(twice.body.find("ambiguous_match"), std::string::npos) << twice.body;
  EXPECT_EQ(slurp(home + "/rest.txt"), "A\nb\nb\n");
  // sandboxctl edit is the same call.
  auto ctl =
      run({PVS_SANDBOXCTL_BIN, "--url", "http://127.0.0.1:" + std::to_string(port_), "--token",
           "tok-agent", "edit", id, home + "/rest.txt", "--old", "b", "--new", "B", "--all"},
          dir_);
  EXPECT_EQ(ctl.exit_code, 0) << ctl.err;
  EXPECT_NE(ctl.out.find("-b\n-b\n+B\n+B\n"), std::string::npos) << ctl.out;
  EXPECT_NE(ctl.err.find("replaced 2"), std::string::npos) << ctl.err;
  auto missing =
      run({PVS_SANDBOXCTL_BIN, "--url", "http://127.0.0.1:" + std::to_string(port_), "--token",
           "tok-agent", "edit", id, home + "/rest.txt", "--old", "zzz", "--new", "y"},
          dir_);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no_match"), std::string::npos) << missing.err;
  EXPECT_EQ(slurp(home + "/rest.txt"), "A\nB\nB\n");

  auto destroy = test::http(port_, "DELETE", "/v1/sandboxes/" + id, "", "tok-agent");
  EXPECT_EQ(destroy.status, 204);
  EXPECT_TRUE(stack_->containers().empty());
}

TEST_F(McpE2eTest, FiftyConcurrentSessions) {
  auto r = client({"sessions", url(), "tok-agent", "50"});
  EXPECT_EQ(r.exit_code, 0) << report(r);
  EXPECT_NE(r.out.find("PASS 50 concurrent sessions\n"), std::string::npos) << report(r);
}

}  // namespace
}  // namespace pvs::service
