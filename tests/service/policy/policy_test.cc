// The policy engine and its configuration: rule order, per-token rules, each condition, the
// fallback, and the errors a bad `policy:` section gets (file, line, rule, what is wrong).
#include "policy/policy.h"

#include <gtest/gtest.h>

#include "core/config/config.h"
#include "service/core/config/config_test_util.h"

namespace pvs::service {
namespace {

using testing::error_of;
using testing::kEnv;
using testing::with_policy;

const char* kRules =
    "  approval_timeout_seconds: 120\n"
    "  default:\n"
    "    - {action: exec, command: '(^|\\s)rm\\s+-rf\\s+/(\\s|$)', decision: deny,\n"
    "       message: no rm -rf /}\n"
    "    - {action: exec, command: '^(apt-get|pip) install', decision: approve}\n"
    "    - {actions: [files.write, files.edit], path: /etc/*, decision: deny}\n"
    "    - {action: internet, internet: true, decision: approve}\n"
    "    - {action: sandbox.create, cpus_above: 4, decision: deny, message: at most 4 cpus}\n"
    "  tokens:\n"
    "    - token: ops\n"
    "      rules: [{action: exec, decision: allow}]\n";

PolicyRequest exec(const std::string& text) {
  PolicyRequest r;
  r.action = PolicyAction::kExec;
  r.text = text;
  return r;
}

TEST(Policy, RulesInOrderPerTokenAndEachCondition) {
  auto c = parse_config(with_policy(kRules), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->approval_timeout_seconds, 120);
  EXPECT_TRUE(c->tokens[1].approver);
  const Policy& p = c->policy;
  EXPECT_EQ(p.rule_count(), 6u);
  auto d = p.decide("ci", exec("cd /tmp && rm -rf / "));
  EXPECT_EQ(d.verdict, Verdict::kDeny);
  EXPECT_EQ(d.rule, "policy.default[0]");
  EXPECT_EQ(d.message, "no rm -rf /");
  EXPECT_EQ(p.decide("ci", exec("rm -rf /tmp/x")).verdict, Verdict::kAllow);
  EXPECT_EQ(p.decide("ci", exec("rm -rf /tmp/x")).rule, "policy.fallback");
  EXPECT_EQ(p.decide("ci", exec("pip install x")).verdict, Verdict::kApprove);
  EXPECT_EQ(p.decide("ops", exec("rm -rf /")).verdict, Verdict::kAllow);  // its own rules
  PolicyRequest write;
  write.action = PolicyAction::kFilesEdit;
  write.path = "/etc/ssh/sshd_config";
  EXPECT_EQ(p.decide("ci", write).verdict, Verdict::kDeny);
  write.path = "/home/x/etc";
  EXPECT_EQ(p.decide("ci", write).verdict, Verdict::kAllow);
  PolicyRequest net;
  net.action = PolicyAction::kInternet;
  net.internet = true;
  EXPECT_EQ(p.decide("ci", net).verdict, Verdict::kApprove);
  net.internet = false;
  EXPECT_EQ(p.decide("ci", net).verdict, Verdict::kAllow);
  PolicyRequest create;
  create.action = PolicyAction::kSandboxCreate;
  create.cpus = 4;
  EXPECT_EQ(p.decide("ci", create).verdict, Verdict::kAllow);
  create.cpus = 5;
  EXPECT_EQ(p.decide("ci", create).message, "at most 4 cpus");
  EXPECT_NE(describe(*c).find("policy 6 rules"), std::string::npos);
}

TEST(Policy, EnvNamesMatchAnyNameAskedForAndBadPatternsAreNamed) {
  auto c = parse_config(with_policy("  default:\n"
                                    "    - {actions: [exec, terminal.open], env_names: "
                                    "'^(BASH_ENV|PROMPT_COMMAND)$', decision: deny}\n"),
                        "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  PolicyRequest r = exec("true");
  EXPECT_EQ(c->policy.decide("ci", r).verdict, Verdict::kAllow);  // no env: the rule needs one
  r.env_names = {"LANG", "PROMPT_COMMAND"};
  EXPECT_EQ(c->policy.decide("ci", r).verdict, Verdict::kDeny);
  r.action = PolicyAction::kTerminalOpen;
  EXPECT_EQ(c->policy.decide("ci", r).verdict, Verdict::kDeny);
  r.env_names = {"LANG"};
  EXPECT_EQ(c->policy.decide("ci", r).verdict, Verdict::kAllow);
  EXPECT_NE(error_of(with_policy("  default:\n    - {action: exec, env_names: '(', "
                                 "decision: deny}\n"))
                .find("policy.default[0].env_names"),
            std::string::npos);
}

TEST(Policy, PatternsRunInLinearTime) {
  PolicySpec spec;
  PolicyRuleSpec r;
  r.where = "policy.default[0]";
  r.actions = {PolicyAction::kExec};
  r.command = "(a+)+$";  // catastrophic for a backtracking engine
  r.verdict = Verdict::kDeny;
  spec.default_rules.push_back(r);
  auto p = Policy::compile(spec);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->decide("x", exec(std::string(100000, 'a') + "!")).verdict, Verdict::kAllow);
}

TEST(Policy, BadRulesNameTheFileLineRuleAndReason) {
  EXPECT_EQ(error_of(with_policy("  default:\n    - {action: exec, command: 'rm (', "
                                 "decision: deny}\n")),
            "controller.yaml: policy.default[0].command: not a valid regular expression (RE2 "
            "syntax): missing ): rm (");
  EXPECT_NE(error_of(with_policy("  default:\n    - {action: run, decision: deny}\n"))
                .find("policy.default[0].action: \"run\" is not an action"),
            std::string::npos);
  EXPECT_NE(error_of(with_policy("  default:\n    - {action: exec}\n"))
                .find("policy.default[0].decision: must be one of allow, deny, approve"),
            std::string::npos);
  EXPECT_NE(error_of(with_policy("  default:\n    - {decision: deny}\n"))
                .find("policy.default[0].action: set action (one) or actions"),
            std::string::npos);
  EXPECT_NE(error_of(with_policy("  default:\n    - {action: files.write, path: etc/*, "
                                 "decision: deny}\n"))
                .find("path: must be an absolute path glob"),
            std::string::npos);
  EXPECT_NE(error_of(with_policy("  tokens:\n    - {token: nobody, rules: []}\n"))
                .find("policy.tokens[0].token: no token named \"nobody\" in auth.tokens"),
            std::string::npos);
  EXPECT_NE(error_of(with_policy("  fallback: maybe\n")).find("policy.fallback"),
            std::string::npos);
}

}  // namespace
}  // namespace pvs::service

namespace pvs::service {
namespace {

TEST(PolicyWebhook, ReadFromPolicyWithItsSecretAndBadOnesNamed) {
  auto c = parse_config(with_policy("  webhook:\n    url: https://hooks.example.test/approvals\n"
                                    "    secret_env: PVS_TEST_SECRET\n    attempts: 3\n"),
                        "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->webhook.url, "https://hooks.example.test/approvals");
  EXPECT_EQ(c->webhook.secret, "s3cr3t-uuid");
  EXPECT_EQ(c->webhook.attempts, 3);
  EXPECT_EQ(c->webhook.timeout_seconds, 5);
  auto no_secret = parse_config(with_policy(kRules), "controller.yaml", &kEnv);
  ASSERT_TRUE(no_secret);
  EXPECT_TRUE(no_secret->webhook.url.empty());  // no webhook unless configured
  EXPECT_EQ(
      error_of(with_policy("  webhook:\n    url: ftp://x\n    secret_env: PVS_TEST_SECRET\n")),
      "controller.yaml: policy.webhook.url: must start with http:// or https://");
  EXPECT_NE(error_of(with_policy("  webhook:\n    url: http://127.0.0.1:9/\n"))
                .find("policy.webhook.secret_file: is required (or secret_env)"),
            std::string::npos);
  EXPECT_NE(error_of(with_policy("  webhook:\n    url: http://127.0.0.1:9/\n"
                                 "    secret_env: PVS_TEST_SECRET\n    retries: 3\n"))
                .find("policy.webhook.retries"),
            std::string::npos);
}

}  // namespace
}  // namespace pvs::service
