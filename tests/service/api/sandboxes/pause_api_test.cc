// POST /v1/sandboxes/{id}/pause and /resume (docs/api.md "Pause and resume") in-process, on the
// real Manager against pvesim's model backend: the states, what a paused sandbox refuses, input
// checks, ownership and the audit. Files across a pause: tests/lxc/lxc_pause_test.cc.
#include <gtest/gtest.h>

#include "service/support/api_fixture.h"

namespace pvs::service {
namespace {

TEST_F(ApiTest, PauseAndResumeKeepTheSandboxAndRefuseWhatAPausedOneCannotDo) {
  std::string id = create(R"({"ttl_seconds":600,"labels":{"team":"ml"}})");
  ASSERT_FALSE(id.empty());
  const std::string base = "/v1/sandboxes/" + id;
  auto before = json(call("GET", base).body);

  EXPECT_EQ(call("POST", base + "/pause", "", "tok-bob").status, 404);  // not bob's
  auto bad = call("POST", base + "/pause", R"({"mode":"hibernate"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(call("POST", base + "/pause", R"({"keep":true})").status, 400);
  auto memory = call("POST", base + "/pause", R"({"mode":"memory"})");
  EXPECT_EQ(memory.status, 400) << memory.body;
  EXPECT_NE(memory.body.find("filesystem"), std::string::npos) << memory.body;
  EXPECT_EQ(json(call("GET", base).body)->getValue<std::string>("state"), "ready");

  auto paused = call("POST", base + "/pause");
  ASSERT_EQ(paused.status, 200) << paused.body;
  auto p = json(paused.body);
  EXPECT_EQ(p->getValue<std::string>("state"), "paused");
  EXPECT_EQ(p->getValue<std::string>("status"), "stopped");
  EXPECT_EQ(p->getValue<std::string>("address"), before->getValue<std::string>("address"));
  EXPECT_EQ(p->getObject("labels")->getValue<std::string>("team"), "ml");
  EXPECT_NE(p->getValue<std::string>("expires_at"), before->getValue<std::string>("expires_at"));
  auto listed = json(call("GET", "/v1/sandboxes").body)->getArray("sandboxes");
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->getObject(0)->getValue<std::string>("state"), "paused");

  auto metrics = call("GET", "/metrics", "", "").body;
  EXPECT_NE(metrics.find("\npvs_sandboxes_paused 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\npvs_sandbox_pause_duration_seconds_count 1\n"), std::string::npos);

  auto again = call("POST", base + "/pause", R"({"mode":"filesystem"})");
  EXPECT_EQ(again.status, 409) << again.body;
  auto exec = call("POST", base + "/exec", R"({"command":"true"})");
  EXPECT_EQ(exec.status, 409) << exec.body;
  EXPECT_NE(exec.body.find("paused; resume it first"), std::string::npos) << exec.body;
  EXPECT_EQ(call("POST", base + "/ttl", R"({"ttl_seconds":60})").status, 409);

  EXPECT_EQ(call("POST", base + "/resume", R"({"ttl_seconds":0})").status, 400);
  EXPECT_EQ(call("POST", base + "/resume", "", "tok-bob").status, 404);
  auto resumed = call("POST", base + "/resume", R"({"ttl_seconds":1200})");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  auto r = json(resumed.body);
  EXPECT_EQ(r->getValue<std::string>("state"), "ready");
  EXPECT_EQ(r->getValue<std::string>("status"), "running");
  EXPECT_EQ(call("POST", base + "/resume").status, 409);  // not paused
  metrics = call("GET", "/metrics", "", "").body;
  EXPECT_NE(metrics.find("\npvs_sandboxes_paused 0\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\npvs_sandbox_resume_duration_seconds_count 1\n"), std::string::npos);

  std::map<std::string, std::vector<int>> statuses;
  for (auto& l : audit_lines())
    statuses[l->getValue<std::string>("action")].push_back(l->getValue<int>("status"));
  EXPECT_EQ(statuses["sandbox.pause"], (std::vector<int>{404, 400, 400, 400, 200, 409}));
  EXPECT_EQ(statuses["sandbox.resume"], (std::vector<int>{400, 404, 200, 409}));
}

// Paused sandboxes count against the token's max_paused, not its max_sandboxes: a pause frees
// room for a create, a pause past max_paused is 429, and so is a resume (an auto-resume too)
// that would run more than max_sandboxes.
class PausedCapTest : public ApiTest {
 protected:
  void adjust_service(ServiceConfig& c) override {
    c.tokens[0].max_sandboxes = 2;  // alice
    c.tokens[0].max_paused = 1;
  }
};

TEST_F(PausedCapTest, PausedSandboxesHaveACapOfTheirOwn) {
  std::string a = create(R"({"ttl_seconds":600,"on_expiry":"pause","auto_resume":true})");
  std::string b = create();
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(call("POST", "/v1/sandboxes", "{}").status, 429);  // 2 running
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + a + "/pause").status, 200);
  std::string c = create();  // a paused one leaves room
  ASSERT_FALSE(c.empty());
  auto second = call("POST", "/v1/sandboxes/" + b + "/pause");
  EXPECT_EQ(second.status, 429) << second.body;
  EXPECT_NE(second.body.find("limit max_paused 1"), std::string::npos) << second.body;
  auto resume = call("POST", "/v1/sandboxes/" + a + "/resume");
  EXPECT_EQ(resume.status, 429) << resume.body;
  EXPECT_NE(resume.body.find("limit max_sandboxes 2"), std::string::npos) << resume.body;
  auto woken = call("POST", "/v1/sandboxes/" + a + "/exec", R"({"command":"true"})");
  EXPECT_EQ(woken.status, 429) << woken.body;  // auto_resume is a resume too
  EXPECT_EQ(json(call("GET", "/v1/sandboxes/" + a).body)->getValue<std::string>("state"), "paused");
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + c).status, 204);
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + a + "/resume").status, 200);  // room again
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + b + "/pause").status, 200);
}

}  // namespace
}  // namespace pvs::service
