// The web console end to end in a real browser: Debian's chromium, headless, driven by
// puppeteer-core (pinned in tests/service/api/console/package-lock.json, installed with npm ci into
// the build tree once per lock file) against pve-sandbox-controller on the whole stack
// (pvesim's netns backend, the real agent and nftables). api/console/console_e2e.mjs does the
// browser side (sign in, wrong token, create, filters, internet on/off and an allowlist, files,
// terminal, watch and take over, approvals, the audit tail, nodes, metrics, destroy, no console
// errors or CSP violations) and saves a screenshot of each view under the build tree; this test
// checks what only the host sees: the agent's internet set, the files, the containers, the audit
// log. Without chromium, node or npm it fails, never skips.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "http/auth.h"
#include "service/support/controller_fixture.h"
#include "service/support/http_client.h"
#include "service/support/node_e2e_support.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

#ifndef PVS_CONTROLLER_BIN
#error "PVS_CONTROLLER_BIN, PVS_CONSOLE_CLIENT_DIR, PVS_CONSOLE_NODE_DIR and PVS_CONSOLE_SHOTS_DIR"
#endif

namespace pvs::service {
namespace {

namespace fs = std::filesystem;

constexpr const char* kChromium = "/usr/bin/chromium";

using test::slurp;

using Proc = test::ProcessResult;

class ConsoleE2eTest : public test::ControllerOnStackTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(::access(kChromium, X_OK), 0)
        << kChromium << " is missing: scripts/install-deps installs Debian's chromium";
    std::string error =
        test::npm_install_once(PVS_CONSOLE_CLIENT_DIR, PVS_CONSOLE_NODE_DIR, "console_e2e.mjs",
                               "puppeteer-core", {"PUPPETEER_SKIP_DOWNLOAD=1"});
    ASSERT_TRUE(error.empty()) << error;
    start(PVS_CONTROLLER_BIN,
          std::string() +
              "auth:\n  tokens:\n    - name: operator\n      sha256: " + sha256_hex(kToken) +
              "\n      admin: true\n" + "      egress:\n        ports: [80, 443, 8443]\n" +
              "    - name: agent\n      sha256: " + sha256_hex(kUserToken) + "\n" +
              "http:\n  threads: 64\n" + "policy:\n  default:\n" +
              "    - action: exec\n      command: 'approved-by-a-person'\n" +
              "      decision: approve\n      message: a person looks first\n");
  }

  static constexpr const char* kToken = "pvs_console_e2e_operator_token";
  static constexpr const char* kUserToken = "pvs_console_e2e_agent_token";
};

TEST_F(ConsoleE2eTest, EveryViewInChromium) {
  // The sandbox user writes uploads into its home; the browser's files come from the shots dir.
  const std::string shots = PVS_CONSOLE_SHOTS_DIR;
  fs::create_directories(shots);
  auto run = test::run_captured(
      {"node", std::string(PVS_CONSOLE_NODE_DIR) + "/console_e2e.mjs", "--url",
       "http://127.0.0.1:" + std::to_string(port_), "--token", kToken, "--user-token", kUserToken,
       "--home", stack_->home(), "--shots", shots, "--chromium", kChromium},
      dir_);
  std::string report = "exit " + std::to_string(run.exit_code) + "\nstdout:\n" + run.out +
                       "stderr:\n" + run.err.substr(0, 8000) + "controller's warnings:\n";
  std::istringstream log(slurp(dir_ + "/controller.log"));
  for (std::string line; std::getline(log, line);) {
    if (line.find(" INFO ") == std::string::npos) report += line + "\n";
  }
  EXPECT_EQ(run.exit_code, 0) << report;
  for (const char* check : {"console served with CSP",
                            "wrong token shows a clear message",
                            "sign in",
                            "create a sandbox",
                            "sandboxes list and filters",
                            "create with an allowlist",
                            "internet on and off",
                            "internet allowlist",
                            "audit tail",
                            "snapshots: take and delete",
                            "upload and download a file",
                            "ports: a preview link opens in a tab",
                            "terminal: echo hi",
                            "terminal: watch is read-only, take over",
                            "approve a pending command",
                            "deny a pending command",
                            "a late view never covers the next one",
                            "a non-admin token sees only its own",
                            "nodes and pools",
                            "metrics charts",
                            "templates",
                            "destroy",
                            "no console errors or CSP violations"}) {
    EXPECT_NE(run.out.find(std::string("PASS ") + check + "\n"), std::string::npos) << check << "\n"
                                                                                    << report;
  }
  for (const char* shot :
       {"signin", "signin-wrong-token", "sandbox", "sandbox-allowlist", "sandboxes", "files",
        "ports", "terminal", "terminal-watch", "approvals", "audit", "nodes", "metrics"}) {
    EXPECT_GT(
        fs::exists(shots + "/" + shot + ".png") ? fs::file_size(shots + "/" + shot + ".png") : 0,
        1000u)
        << shot;
  }
  // What only the host sees: nothing left in Proxmox or in the agent's internet set.
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_TRUE(stack_->internet_set().empty());
  // The console is a client of the public API: its calls are on record under the token's
  // name, never with the token itself.
  std::string audit = slurp(dir_ + "/audit.log");
  for (const char* action :
       {"sandbox.create", "sandbox.internet", "sandbox.put_file", "terminal.open",
        "terminal.attach", "approval.approve", "approval.deny", "sandbox.snapshot",
        "sandbox.delete_snapshot", "sandbox.exec", "sandbox.destroy", "auth.denied",
        "sandbox.preview", "sandbox.port"}) {
    EXPECT_NE(audit.find(std::string("\"action\":\"") + action + "\""), std::string::npos)
        << action;
  }
  EXPECT_EQ(audit.find(kToken), std::string::npos);
}

}  // namespace
}  // namespace pvs::service
