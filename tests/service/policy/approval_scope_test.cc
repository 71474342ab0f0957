// What an approval covers (#32, finding 2), on the netns stack (a real sshd per sandbox): the
// whole call (exec env and stdin, create's labels, an upload's content by Content-Digest),
// once (a failed consume is a refusal), decided by another token, used by a deadline.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "service/support/approval_fixture.h"
#include "service/support/policy_rules.h"

namespace pvs::service {
namespace {

class ApprovalScopeTest : public ApprovalApiTest {
 protected:
  void adjust_service(ServiceConfig& c) override {
    add_approver(c);
    PolicySpec spec;
    auto rule = [](const std::string& where, PolicyAction action) {
      return test::rule(where, {action}, Verdict::kApprove);
    };
    auto denied = rule("policy.default[3]", PolicyAction::kFilesWrite);
    denied.path = dir_ + "/denied/*";
    denied.verdict = Verdict::kDeny;
    denied.actions = {PolicyAction::kFilesWrite, PolicyAction::kFilesEdit};
    spec.default_rules.push_back(denied);
    auto echo = rule("policy.default[0]", PolicyAction::kExec);
    echo.command = "^echo approved";
    spec.default_rules.push_back(echo);
    auto big = rule("policy.default[1]", PolicyAction::kSandboxCreate);
    big.cpus_above = 1;
    spec.default_rules.push_back(big);
    auto write = rule("policy.default[2]", PolicyAction::kFilesWrite);
    write.path = dir_ + "/approved/*";
    spec.default_rules.push_back(write);
    c.policy = test::compiled(spec);
    c.approval_wait_seconds = 10;
    c.approval_use_seconds = 5;  // every test's uses fit, under the sanitizers' load too
  }
};

TEST_F(ApprovalScopeTest, TheApprovalCoversEveryFieldAndIsShownWhole) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  std::string exec = "/v1/sandboxes/" + sb + "/exec";
  std::string asked = R"({"command":"echo approved","env":{"A":"1"},"stdin":"in"})";
  std::string id = ask("POST", exec, asked);
  ASSERT_FALSE(id.empty());
  auto shown = call("GET", "/v1/approvals/" + id, "", "tok-carol");
  EXPECT_NE(shown.body.find(R"("env":[["A","1"]])"), std::string::npos) << shown.body;
  EXPECT_NE(shown.body.find(R"("stdin":"in")"), std::string::npos) << shown.body;
  ASSERT_TRUE(approve(id));
  std::map<std::string, std::string> with{{"Approval", id}};
  for (const char* other : {R"({"command":"echo approved","env":{"A":"2"},"stdin":"in"})",
                            R"({"command":"echo approved","env":{"A":"1"},"stdin":"x"})",
                            R"({"command":"echo approved","env":{"A":"1"},"stdin":"in",)"
                            R"("cwd":"/tmp"})"}) {
    auto r = call("POST", exec, other, "tok-alice", with);
    EXPECT_EQ(r.status, 403) << other << ": " << r.body;
    EXPECT_NE(r.body.find("another call"), std::string::npos) << r.body;
  }
  auto ran = call("POST", exec, asked, "tok-alice", with);
  EXPECT_EQ(ran.status, 200) << ran.body;

  // create: labels and ttl are part of the call.
  std::string cid = ask("POST", "/v1/sandboxes", R"({"cpus":2,"labels":{"a":"1"}})");
  ASSERT_TRUE(approve(cid));
  auto relabelled = call("POST", "/v1/sandboxes", R"({"cpus":2,"labels":{"a":"2"}})", "tok-alice",
                         {{"Approval", cid}});
  EXPECT_EQ(relabelled.status, 403) << relabelled.body;
}

TEST_F(ApprovalScopeTest, AnApprovedUploadWritesOnlyTheContentItsDigestNames) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  std::string path = dir_ + "/approved/f";
  std::string uri = "/v1/sandboxes/" + sb + "/files?path=" + path;
  auto bare = call("PUT", uri, "hello\n");
  EXPECT_EQ(bare.status, 400) << bare.body;  // needs approval: Content-Digest required
  EXPECT_NE(bare.body.find("Content-Digest"), std::string::npos) << bare.body;
  // sha-256 of "hello\n"
  std::map<std::string, std::string> digest{
      {"Content-Digest", "sha-256=:WJG1tSLV3whtD/CxEPvZ0hu0/HFjrzTQgoai6Eb2vgM=:"}};
  std::string id = ask("PUT", uri, "hello\n", digest);
  ASSERT_TRUE(approve(id));
  digest["Approval"] = id;
  auto forged = call("PUT", uri, "evil!\n", "tok-alice", digest);
  EXPECT_EQ(forged.status, 400) << forged.body;
  EXPECT_EQ(call("GET", uri).status, 404);  // nothing written
  auto left = call("GET", "/v1/sandboxes/" + sb + "/files?list=true&path=" + dir_ + "/approved");
  EXPECT_EQ(left.body.find(".f.pvs-tmp-"), std::string::npos) << left.body;  // nor left behind
  digest.erase("Approval");
  id = ask("PUT", uri, "hello\n", digest);
  ASSERT_TRUE(approve(id));
  digest["Approval"] = id;
  auto ok = call("PUT", uri, "hello\n", "tok-alice", digest);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(call("GET", uri).body, "hello\n");
}

// A path rule cannot be walked around with another spelling of the path (finding 7).
TEST_F(ApprovalScopeTest, NonCanonicalPathsAreRefused) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  std::string files = "/v1/sandboxes/" + sb + "/files?path=";
  EXPECT_EQ(call("PUT", files + dir_ + "/denied/x", "x").status, 403);
  for (std::string p : {"/" + dir_ + "/denied/x", dir_ + "//denied/x", dir_ + "/./denied/x",
                        dir_ + "/approved/../denied/x"}) {
    auto r = call("PUT", files + p, "x");
    EXPECT_EQ(r.status, 400) << p << ": " << r.body;
    EXPECT_EQ(call("GET", files + p).status, 400) << p;
  }
  EXPECT_EQ(call("GET", files + dir_ + "/denied/x").status, 404);
}

// Symbolic links are resolved by the sandbox (SFTP realpath) before the policy judges the path,
// and the write goes to the path judged (finding 7).
TEST_F(ApprovalScopeTest, SymbolicLinksAreResolvedBeforeJudging) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  const std::string& d = dir_;
  auto made = call("POST", "/v1/sandboxes/" + sb + "/exec",
                   R"({"command":"mkdir -p )" + d + "/denied " + d + "/ok && echo a > " + d +
                       "/denied/f && ln -s " + d + "/denied " + d + "/link && ln -s " + d +
                       "/denied/f " + d + R"(/ok/lnk"})");
  ASSERT_EQ(made.status, 200) << made.body;
  std::string files = "/v1/sandboxes/" + sb + "/files?path=";
  for (std::string p : {d + "/link/x", d + "/link/new/x"}) {
    auto r = call("PUT", files + p, "x");
    EXPECT_EQ(r.status, 403) << p << ": " << r.body;
  }
  EXPECT_EQ(call("GET", files + d + "/denied/x").status, 404);
  auto edit = call("POST", "/v1/sandboxes/" + sb + "/files/edit",
                   R"({"path":")" + d + R"(/ok/lnk","old_string":"a","new_string":"b"})");
  EXPECT_EQ(edit.status, 403) << edit.body;
  EXPECT_EQ(call("GET", files + d + "/denied/f").body, "a\n");
  auto fine = call("PUT", files + d + "/ok/y", "y");
  EXPECT_EQ(fine.status, 200) << fine.body;
  EXPECT_NE(fine.body.find("\"path\":\"" + d + "/ok/y\""), std::string::npos) << fine.body;
}

// The race by construction: while a call blocks on its approval, a person approves and a repeat
// naming the approval uses it (both inside the waiter's progress callback, so before the waiter
// looks again); the waiter must then refuse, not run the call a second time.
TEST_F(ApprovalScopeTest, AWaiterWhoseApprovalWasUsedMeanwhileRefuses) {
  std::string sb = create();
  ASSERT_FALSE(sb.empty());
  Principal alice{"alice", 3, false, false};
  for (int round = 0; round < 3; ++round) {
    PolicyRequest req;
    req.action = PolicyAction::kExec;
    req.text = "echo approved " + std::to_string(round);
    bool used = false;
    auto progress = [&](double, double, const std::string&) {
      if (used) return;
      auto pending = api_->gate().approvals().list(true);
      ASSERT_EQ(pending.size(), 1u);
      const Approval& a = pending[0];
      ASSERT_TRUE(api_->gate().approvals().decide(a.id, true, "carol", ""));
      ASSERT_TRUE(api_->gate().approvals().consume(a.id, "alice", a.request.digest));
      used = true;
    };
    try {
      api_->gate().admit_tool(alice, sb, req, progress);
      ADD_FAILURE() << "round " << round << ": the call ran on an approval used already";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 403);
      EXPECT_NE(e.message.find("was used"), std::string::npos) << e.message;
    }
    EXPECT_TRUE(used);
  }
}

TEST_F(ApprovalScopeTest, NobodyDecidesTheirOwnAndAnUnusedApprovalExpires) {
  std::string id = ask("POST", "/v1/sandboxes", R"({"cpus":2})", {}, "tok-root");
  ASSERT_FALSE(id.empty());
  auto own = call("POST", "/v1/approvals/" + id + "/approve", "", "tok-root");  // admin
  EXPECT_EQ(own.status, 403) << own.body;
  EXPECT_NE(own.body.find("may not decide its own approval"), std::string::npos) << own.body;
  auto carol = ask("POST", "/v1/sandboxes", R"({"cpus":2})", {}, "tok-carol");  // approver
  EXPECT_EQ(call("POST", "/v1/approvals/" + carol + "/deny", "", "tok-carol").status, 403);

  // Approved, not used within approval_use_seconds (5): expired unused.
  std::string late = ask("POST", "/v1/sandboxes", R"({"cpus":2})");
  ASSERT_TRUE(approve(late));
  std::this_thread::sleep_for(std::chrono::milliseconds(5500));
  auto r = call("POST", "/v1/sandboxes", R"({"cpus":2})", "tok-alice", {{"Approval", late}});
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("expired unused"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace pvs::service
