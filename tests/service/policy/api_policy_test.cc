// Policy and approvals through the REST API (pvesim model backend, real agent and ruleset):
// deny before anything runs, approve by a person (blocking and asynchronous), deny, deadline,
// a repeated call using its approval once, 100 pending at once, and a restart failing closed.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "service/support/api_fixture.h"
#include "service/support/policy_rules.h"
#include "support/eventually.h"

namespace pvs::service {
namespace {

using test::rule;

class ApiPolicyTest : public ApiTest {
 protected:
  void adjust_service(ServiceConfig& c) override {
    c.tokens.push_back({"carol", sha256_hex("tok-carol"), 0, false, true});  // an approver
    PolicySpec spec;
    auto rm = rule("policy.default[0]", {PolicyAction::kExec}, Verdict::kDeny, "no rm -rf /");
    rm.command = R"((^|\s)rm\s+-rf\s+/(\s|$))";
    spec.default_rules.push_back(rm);
    auto net = rule("policy.default[1]", {PolicyAction::kInternet}, Verdict::kApprove,
                    "a person approves internet");
    net.internet = true;
    spec.default_rules.push_back(net);
    auto etc = rule("policy.default[3]", {PolicyAction::kFilesEdit}, Verdict::kDeny, "read-only");
    etc.path = "/etc/*";
    auto big = rule("policy.default[2]", {PolicyAction::kSandboxCreate}, Verdict::kApprove);
    big.cpus_above = 1;
    spec.default_rules.push_back(big);
    spec.default_rules.push_back(etc);
    // Values are never judged, so the names that make a shell run code are (#32, finding 1).
    auto hooks = rule("policy.default[4]", {PolicyAction::kExec}, Verdict::kDeny, "no shell hooks");
    hooks.env_names = "^(BASH_ENV|ENV|PROMPT_COMMAND|LD_PRELOAD)$";
    spec.default_rules.push_back(hooks);
    c.policy = test::compiled(spec);
    c.approval_wait_seconds = 10;
    // Long enough for 100 approvals made one after another under the sanitizers' load.
    c.approval_timeout_seconds = 6;
  }
  // The first pending approval's id, as the approver sees it (waits up to 5 s).
  std::string pending_id() {
    for (int i = 0; i < 100; ++i) {
      auto r = call("GET", "/v1/approvals?state=pending", "", "tok-carol");
      auto list = json(r.body)->getArray("approvals");
      if (list && list->size() > 0) return list->getObject(0)->getValue<std::string>("id");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }
};

TEST_F(ApiPolicyTest, DenyApproveDenyAndTheAuditSaysWhy) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  // Denied before anything runs (this backend has no sshd: an allowed exec would fail later).
  auto rm = call("POST", "/v1/sandboxes/" + sb + "/exec", R"({"command":"rm -rf / --x"})");
  EXPECT_EQ(rm.status, 403) << rm.body;
  EXPECT_EQ(error_code(rm), "permission_denied");
  EXPECT_NE(rm.body.find("denied by policy rule policy.default[0]: no rm -rf /"), std::string::npos)
      << rm.body;

  // Internet on waits for a person; carol approves while the call blocks.
  HttpReply granted;
  std::thread caller(
      [&] { granted = call("PUT", "/v1/sandboxes/" + sb + "/internet", R"({"enabled":true})"); });
  std::string id = pending_id();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(call("POST", "/v1/approvals/" + id + "/approve", "{}", "tok-bob").status, 403);
  auto ok = call("POST", "/v1/approvals/" + id + "/approve", "", "tok-carol");
  EXPECT_EQ(ok.status, 200) << ok.body;
  caller.join();
  EXPECT_EQ(granted.status, 200) << granted.body;
  EXPECT_TRUE(json(granted.body)->getValue<bool>("internet"));
  EXPECT_EQ(call("PUT", "/v1/sandboxes/" + sb + "/internet", R"({"enabled":false})").status, 200);

  // Denied by a person, with the reason.
  HttpReply refused;
  std::thread again(
      [&] { refused = call("PUT", "/v1/sandboxes/" + sb + "/internet", R"({"enabled":true})"); });
  id = pending_id();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(call("POST", "/v1/approvals/" + id + "/deny", R"({"reason":"not today"})", "tok-carol")
                .status,
            200);
  again.join();
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("denied by carol: not today"), std::string::npos) << refused.body;
  EXPECT_TRUE(stack_->internet_set().empty());

  int decisions = 0;
  for (const auto& line : audit_lines()) {
    if (!line->has("policy")) continue;
    ++decisions;
    auto p = line->getObject("policy");
    if (p->getValue<std::string>("verdict") == "approve" && line->getValue<int>("status") == 200) {
      EXPECT_EQ(p->getValue<std::string>("decided_by"), "carol");
    }
  }
  EXPECT_GE(decisions, 5);  // create (allow), rm (deny), on (approved), off (allow), on (denied)
}

TEST_F(ApiPolicyTest, EnvNamesAreJudgedForExecAndTerminalOpen) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  // An innocent command with a hook in its environment: refused before anything runs.
  auto hook = call("POST", "/v1/sandboxes/" + sb + "/exec",
                   R"({"command":"true","env":{"BASH_ENV":"/tmp/x.sh"}})");
  EXPECT_EQ(hook.status, 403) << hook.body;
  EXPECT_NE(hook.body.find("policy.default[4]: no shell hooks"), std::string::npos) << hook.body;
  // A login shell whose prompt would run a command: the open is judged as exec, env included.
  auto open = call("POST", "/v1/sandboxes/" + sb + "/terminals",
                   R"({"env":{"PROMPT_COMMAND":"curl x | sh"}})");
  EXPECT_EQ(open.status, 403) << open.body;
  EXPECT_NE(open.body.find("no shell hooks"), std::string::npos) << open.body;
  // Other names pass the rule (the call then fails later: this backend has no sshd).
  PolicyRequest fine;
  fine.action = PolicyAction::kExec;
  fine.text = "true";
  fine.env_names = {"LANG", "BASH_ENVX"};
  EXPECT_NO_THROW(api_->gate().admit_tool(Principal{"alice", 3, false, false}, sb, fine));
}

TEST_F(ApiPolicyTest, AsyncApprovalIsUsedOnceDeadlineDeniesAndARestartFailsClosed) {
  std::map<std::string, std::string> async{{"Prefer", "respond-async"}};
  auto pending = call("POST", "/v1/sandboxes", R"({"cpus":2})", "tok-alice", async);
  ASSERT_EQ(pending.status, 202) << pending.body;
  std::string id = json(pending.body)->getObject("approval")->getValue<std::string>("id");
  EXPECT_EQ(call("GET", "/v1/approvals/" + id).status, 200);                 // its token
  EXPECT_EQ(call("GET", "/v1/approvals/" + id, "", "tok-bob").status, 404);  // not bob's
  ASSERT_EQ(call("POST", "/v1/approvals/" + id + "/approve", "", "tok-root").status, 200);
  std::map<std::string, std::string> with{{"Approval", id}};
  auto other = call("POST", "/v1/sandboxes", R"({"cpus":3})", "tok-alice", with);
  EXPECT_EQ(other.status, 403) << other.body;  // the approval was for 2 cpus
  EXPECT_NE(other.body.find("another call"), std::string::npos) << other.body;
  auto made = call("POST", "/v1/sandboxes", R"({"cpus":2})", "tok-alice", with);
  EXPECT_EQ(made.status, 201) << made.body;
  auto twice = call("POST", "/v1/sandboxes", R"({"cpus":2})", "tok-alice", with);
  EXPECT_EQ(twice.status, 403) << twice.body;
  EXPECT_NE(twice.body.find("was used"), std::string::npos) << twice.body;

  // 100 pending at once; undecided ones expire (6 s here) and count as denied.
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(call("POST", "/v1/sandboxes", R"({"cpus":2})", "tok-bob", async).status, 202);
  auto list = call("GET", "/v1/approvals?state=pending", "", "tok-root");
  EXPECT_EQ(json(list.body)->getArray("approvals")->size(), 100u);
  auto metrics = call("GET", "/metrics", "", "");
  EXPECT_NE(metrics.body.find("pvs_approvals_pending 100"), std::string::npos);
  std::string last =
      json(list.body)->getArray("approvals")->getObject(99)->getValue<std::string>("id");
  HttpReply expired;
  for (int i = 0; i < 300; ++i) {  // its deadline, awaited (15 s at most)
    expired = call("GET", "/v1/approvals/" + last, "", "tok-bob");
    if (json(expired.body)->getValue<std::string>("state") != "pending") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(json(expired.body)->getValue<std::string>("state"), "expired") << expired.body;

  // A restart: approvals of the old instance are denied, and say why.
  auto before = call("POST", "/v1/sandboxes", R"({"cpus":2})", "tok-bob", async);
  std::string old = json(before.body)->getObject("approval")->getValue<std::string>("id");
  stop();
  start();
  auto after = call("GET", "/v1/approvals/" + old, "", "tok-root");
  EXPECT_EQ(json(after.body)->getValue<std::string>("state"), "denied") << after.body;
  EXPECT_EQ(json(after.body)->getValue<std::string>("decided_by"), "restart");
  std::map<std::string, std::string> stale{{"Approval", old}};
  auto retry = call("POST", "/v1/sandboxes", R"({"cpus":2})", "tok-bob", stale);
  EXPECT_EQ(retry.status, 403) << retry.body;
  EXPECT_NE(retry.body.find("restarted"), std::string::npos) << retry.body;
}

// MCP tools ask the same engine (Api::admit_tool): deny is an error; an approval a person gave
// since serves the same call made again, once.
TEST_F(ApiPolicyTest, ToolsAndEditsAskTheSamePolicy) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  auto edit = call("POST", "/v1/sandboxes/" + sb + "/files/edit",
                   R"({"path":"/etc/hosts","old_string":"a","new_string":"b"})");
  EXPECT_EQ(edit.status, 403) << edit.body;
  EXPECT_NE(edit.body.find("policy.default[3]: read-only"), std::string::npos) << edit.body;

  Principal alice{"alice", 3, false, false};
  PolicyRequest rm;
  rm.action = PolicyAction::kExec;
  rm.text = "rm -rf /";
  try {
    api_->gate().admit_tool(alice, sb, rm);
    ADD_FAILURE() << "rm -rf / was admitted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 403);
    EXPECT_NE(e.message.find("no rm -rf /"), std::string::npos) << e.message;
  }
  PolicyRequest on;
  on.action = PolicyAction::kInternet;
  on.internet = true;
  on.egress = "on";
  std::atomic<int> reports{0};
  std::thread approver([&] {
    std::string id = pending_id();
    test::eventually([&] { return reports >= 2; }, std::chrono::seconds(9));  // two reports
    EXPECT_EQ(call("POST", "/v1/approvals/" + id + "/approve", "", "tok-carol").status, 200);
  });
  std::vector<std::pair<double, std::string>> told;
  std::string decided =
      api_->gate().admit_tool(alice, sb, on, [&](double s, double total, auto& m) {
        EXPECT_EQ(total, 10);  // approval_wait_seconds
        told.emplace_back(s, m);
        ++reports;
      });  // waits for carol, telling progress once a second
  approver.join();
  EXPECT_NE(decided.find("\"decided_by\":\"carol\""), std::string::npos) << decided;
  ASSERT_GE(told.size(), 2u);
  EXPECT_GT(told[1].first, told[0].first);
  EXPECT_NE(told[0].second.find("waiting for a person to approve internet on (approval ap-"),
            std::string::npos)
      << told[0].second;
}

}  // namespace
}  // namespace pvs::service
