// The policy's `ports` action end to end (docs/policy.md, "Ports"): a real HTTP server in a netns
// sandbox (ports_fixture.h), judged on every surface that proxies to it (REST's path, a preview
// link, E2B's E2b-Sandbox-Port routing, an upgrade) before anything reaches the sandbox.
#include <gtest/gtest.h>

#include "service/api/ports/ports_fixture.h"
#include "service/support/policy_rules.h"

namespace pvs::service {
namespace {

constexpr int kDenied = 8002;  // a port alice's rules refuse, a service listening on it

class PortsPolicyTest : public PortsApiTest {
 protected:
  void adjust_service(ServiceConfig& c) override {
    PortsApiTest::adjust_service(c);
    c.approval_wait_seconds = 0;  // undecided at once: REST's 202, E2B's 503
    auto no_db =
        test::rule("policy.default[0]", {PolicyAction::kPorts}, Verdict::kDeny, "not that port");
    no_db.ports = {{kDenied, kDenied}, {9000, 9099}};
    auto secret = test::rule("policy.default[1]", {PolicyAction::kPorts}, Verdict::kApprove,
                             "a person looks");
    secret.path = "/echo/secret*";
    c.policy = test::compiled({{no_db, secret}, {}, Verdict::kAllow});
  }
  void SetUp() override {
    PortsApiTest::SetUp();
    if (HasFatalFailure()) return;
    start_service(kDenied);
    connect_e2b();
  }
  // The newest `sandbox.port` record with `status`, once there is one (a proxied reply's is
  // written when it has ended, maybe just after the client read it): at most 10 s.
  Poco::JSON::Object::Ptr newest(int status) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      auto lines = audit_lines();
      for (auto it = lines.rbegin(); it != lines.rend(); ++it)
        if ((*it)->getValue<std::string>("action") == "sandbox.port" &&
            (*it)->getValue<int>("status") == status)
          return *it;
      if (std::chrono::steady_clock::now() >= deadline) return nullptr;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
};

TEST_F(PortsPolicyTest, ADenyRuleOnOnePortRefusesItOnEverySurfaceWhileAnotherWorks) {
  auto refused = call("GET", url("/index.txt", kDenied));
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(error_code(refused), "permission_denied");
  EXPECT_NE(refused.body.find("denied by policy rule policy.default[0]: not that port"),
            std::string::npos)
      << refused.body;
  auto record = newest(403);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->getObject("params")->getValue<int>("port"), kDenied);
  EXPECT_EQ(record->getObject("policy")->getValue<std::string>("verdict"), "deny");
  EXPECT_EQ(record->getObject("policy")->getValue<std::string>("rule"), "policy.default[0]");
  // Another port goes through, as before (its rules were asked: the allow is audited too).
  auto ok = call("GET", url("/index.txt"));
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.body, "hello from the sandbox");
  auto allowed = newest(200);
  ASSERT_TRUE(allowed);
  EXPECT_EQ(allowed->getObject("policy")->getValue<std::string>("verdict"), "allow");
  // An upgrade is judged before it is sent: nothing switched, nothing reached the service.
  auto ws = call("GET", url("/ws", kDenied), "", "tok-alice",
                 {{"Connection", "Upgrade"}, {"Upgrade", "websocket"}});
  EXPECT_EQ(ws.status, 403) << ws.body;
  // A preview link acts for its maker, under the maker's rules.
  auto made = call("POST", "/v1/sandboxes/" + sb_ + "/previews",
                   "{\"port\":" + std::to_string(kDenied) + "}");
  ASSERT_EQ(made.status, 201) << made.body;
  auto link = json(made.body)->getValue<std::string>("path");
  EXPECT_EQ(call("GET", link + "index.txt", "", "").status, 403);
  // E2B's routing: refused in E2B's error shape; port 8000 still served.
  auto e = e2b(kDenied, "/index.txt");
  EXPECT_EQ(e.status, 403) << e.body;
  EXPECT_EQ(json(e.body)->getValue<int>("code"), 403) << e.body;
  EXPECT_NE(json(e.body)->getValue<std::string>("message").find("policy.default[0]"),
            std::string::npos);
  EXPECT_EQ(newest(403)->getValue<std::string>("request_id"), e.headers["X-Request-Id"]);
  EXPECT_EQ(newest(403)->getObject("policy")->getValue<std::string>("verdict"), "deny");
  auto e_ok = e2b(kPort, "/index.txt");
  EXPECT_EQ(e_ok.status, 200) << e_ok.body;
  EXPECT_EQ(e_ok.body, "hello from the sandbox");
  EXPECT_EQ(e2b(9050, "/").status, 403);  // a range: refused before anything is opened
  EXPECT_EQ(e2b(kDenied, "/index.txt", true).status, 403);
  auto by_host = e2b(kPort, "/index.txt", true);
  EXPECT_EQ(by_host.status, 200) << by_host.body;
  EXPECT_EQ(by_host.body, "hello from the sandbox");
}

// `approve`: the request opens an approval and is answered at once (REST 202, E2B 503); once
// a person approved, the same request goes through once (REST: naming it, its Approval header
// not reaching the service; E2B: repeated as is).
TEST_F(PortsPolicyTest, AnApprovalLetsTheSameRequestThroughOnce) {
  const std::string path = "/echo/secret?x=1";
  auto pending = call("GET", url(path));
  ASSERT_EQ(pending.status, 202) << pending.body;
  auto approval = json(pending.body)->getObject("approval");
  const std::string id = approval->getValue<std::string>("id");
  EXPECT_EQ(pending.headers["Location"], "/v1/approvals/" + id);
  EXPECT_EQ(approval->getValue<std::string>("action"), "ports");
  EXPECT_EQ(approval->getValue<std::string>("summary"), "port 8000: GET /echo/secret");
  EXPECT_EQ(approval->getObject("request")->getValue<std::string>("target"), path);
  EXPECT_EQ(call("GET", url(path), "", "tok-alice", {{"Approval", id}}).status, 403);  // pending
  ASSERT_EQ(call("POST", "/v1/approvals/" + id + "/approve", "{}", "tok-root").status, 200);
  EXPECT_EQ(call("GET", url("/echo/secret?x=2"), "", "tok-alice", {{"Approval", id}}).status,
            403);  // another request
  auto through = call("GET", url(path), "", "tok-alice", {{"Approval", id}});
  ASSERT_EQ(through.status, 200) << through.body;
  EXPECT_FALSE(json(through.body)->getObject("headers")->has("approval")) << through.body;
  EXPECT_EQ(call("GET", url(path), "", "tok-alice", {{"Approval", id}}).status, 403);  // once

  auto e = e2b(kPort, path);
  ASSERT_EQ(e.status, 503) << e.body;
  const std::string message = json(e.body)->getValue<std::string>("message");
  const std::string e_id = message.substr(9, message.find(' ', 9) - 9);  // "approval ap-..."
  ASSERT_EQ(call("POST", "/v1/approvals/" + e_id + "/approve", "{}", "tok-root").status, 200)
      << message;
  auto e_through = e2b(kPort, path);
  EXPECT_EQ(e_through.status, 200) << e_through.body;
  EXPECT_EQ(e2b(kPort, path).status, 503);  // used: the next one asks again
}

}  // namespace
}  // namespace pvs::service
