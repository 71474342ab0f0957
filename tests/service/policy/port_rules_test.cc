// The `ports` action (docs/policy.md, "Ports"): a rule's `ports` condition and its errors, and
// what a proxied request looks like to the rules (api/ports/port_policy.h): the port, the path
// as the service resolves it, "METHOD /path" for `command`, and the canonical form an approval
// binds.
#include <gtest/gtest.h>

#include "api/ports/port_policy.h"
#include "core/config/config.h"
#include "policy/policy.h"
#include "service/core/config/config_test_util.h"

namespace pvs::service {
namespace {

using testing::error_of;
using testing::kEnv;
using testing::with_policy;

TEST(PortRules, PortsPathAndMethodDecide) {
  auto c = parse_config(with_policy("  default:\n"
                                    "    - {action: ports, ports: [5432, \"6000-6009\"], "
                                    "decision: deny, message: no databases}\n"
                                    "    - {action: ports, path: /admin/*, decision: approve}\n"
                                    "    - {action: ports, command: '^(PUT|DELETE) ', "
                                    "decision: deny}\n"
                                    "    - {action: exec, decision: allow}\n"),
                        "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  const Policy& p = c->policy;
  EXPECT_TRUE(p.judges("ci", PolicyAction::kPorts));
  auto at = [&](int port, const char* method, const char* target) {
    return p.decide("ci",
                    ports::policy_request(static_cast<std::uint16_t>(port), method, target, ""));
  };
  auto d = at(5432, "GET", "/");
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule, "policy.default[0]");
  EXPECT_EQ(d.message, "no databases");
  EXPECT_EQ(at(6000, "GET", "/").verdict, Verdict::kDeny);
  EXPECT_EQ(at(6009, "GET", "/").verdict, Verdict::kDeny);
  EXPECT_EQ(at(6010, "GET", "/").verdict, Verdict::kAllow);
  EXPECT_EQ(at(5431, "GET", "/").rule, "policy.fallback");
  EXPECT_EQ(at(8000, "GET", "/admin/users").verdict, Verdict::kApprove);
  // The path the service resolves, not the one written: escapes decoded, dot segments gone.
  EXPECT_EQ(at(8000, "GET", "/x/..%2Fadmin/users?q=1").verdict, Verdict::kApprove);
  EXPECT_EQ(at(8000, "GET", "/%61dmin/users").verdict, Verdict::kApprove);
  EXPECT_EQ(at(8000, "GET", "/public/admin/users").verdict, Verdict::kAllow);
  EXPECT_EQ(at(8000, "DELETE", "/items/1").verdict, Verdict::kDeny);
  EXPECT_EQ(at(8000, "POST", "/items").verdict, Verdict::kAllow);
}

TEST(PortRules, BadPortsAreNamedWhereWritten) {
  auto error = [](const std::string& ports, const std::string& action = "ports") {
    return error_of(with_policy("  default:\n    - {action: " + action + ", ports: " + ports +
                                ", decision: deny}\n"));
  };
  EXPECT_EQ(error("[0]"), "controller.yaml: policy.default[0].ports: \"0\": ports are 1-65535");
  EXPECT_EQ(error("[65536]"),
            "controller.yaml: policy.default[0].ports: \"65536\": ports are 1-65535");
  EXPECT_EQ(error("[\"9000-8000\"]"),
            "controller.yaml: policy.default[0].ports: \"9000-8000\": the range's first port is "
            "above its last");
  EXPECT_EQ(error("[http]"),
            "controller.yaml: policy.default[0].ports: \"http\" is not a port (5432) or a range "
            "of ports (\"8000-8999\")");
  for (const char* bad : {"[\"80-\"]", "[\"-80\"]", "[\"8000-8999-9000\"]", "[\" 80\"]", "[-1]"})
    EXPECT_NE(error(bad).find("is not a port (5432) or a range of ports"), std::string::npos)
        << bad;
  EXPECT_EQ(error("5432"),
            "controller.yaml: policy.default[0].ports: must be a list of ports and ranges, e.g. "
            "[5432, \"8000-8999\"]");
  EXPECT_EQ(error("[]"),
            "controller.yaml: policy.default[0].ports: names no port (leave it out for any port)");
  EXPECT_EQ(error("[5432]", "internet"),
            "controller.yaml: policy.default[0].ports: judges the ports action (the sandbox port "
            "a request is proxied to), not internet");
  // Policy::compile checks what it is given too (a spec built in code).
  PolicySpec spec;
  PolicyRuleSpec rule;
  rule.where = "policy.default[0]";
  rule.actions = {PolicyAction::kPorts};
  rule.ports = {{8000, 7000}};
  spec.default_rules.push_back(rule);
  auto p = Policy::compile(spec);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message,
            "policy.default[0].ports: not a port or range of ports (1-65535, low-high): "
            "8000-7000");
}

TEST(PortRules, ARequestAsTheRulesSeeIt) {
  auto r = ports::policy_request(8000, "GET", "/a%20b/./c/../d?x=%2F", "websocket");
  EXPECT_EQ(r.action, PolicyAction::kPorts);
  EXPECT_EQ(r.port, 8000);
  EXPECT_EQ(r.path, "/a b/d");
  EXPECT_EQ(r.text, "GET /a b/d");
  EXPECT_EQ(
      r.canonical,
      R"({"method":"GET","port":8000,"target":"/a%20b/./c/../d?x=%2F","upgrade":"websocket"})");
  EXPECT_EQ(to_string(PolicyAction::kPorts), "ports");
  EXPECT_EQ(parse_policy_action("ports"), PolicyAction::kPorts);
  for (auto [target, path] : std::initializer_list<std::pair<const char*, const char*>>{
           {"/", "/"},
           {"/?q", "/"},
           {"/a/", "/a/"},
           {"/a/..", "/"},
           {"/a/b/..", "/a/"},
           {"/../../etc/passwd", "/etc/passwd"},
           {"/a//b", "/a//b"},
           {"/%zz%4", "/%zz%4"},
           {"/%2e%2E/x", "/x"}})
    EXPECT_EQ(ports::judged_path(target), path) << target;
}

}  // namespace
}  // namespace pvs::service
