// From `internet` as asked to the Egress a sandbox gets: named lists resolved, the token's
// caps (403), bad names (400); what policy rules see of it; the sandbox JSON form.
#include <gtest/gtest.h>

#include "policy/egress_access.h"
#include "service/support/policy_rules.h"

namespace pvs::service {
namespace {

ServiceConfig egress_config() {
  ServiceConfig c;
  c.egress.lists["python-packages"] = Egress::allow({"pypi.org", "files.pythonhosted.org"}).list;
  c.egress.lists["git"] = Egress::allow({"*.github.com"}, {443}).list;
  c.egress.max_names = 4;
  TokenConfig free;
  free.name = "free";
  TokenConfig narrow;
  narrow.name = "narrow";
  narrow.egress.lists = std::vector<std::string>{"python-packages"};
  narrow.egress.names = std::vector<std::string>{"*.example.com", "api.openai.com"};
  narrow.egress.max_names = 2;
  TokenConfig lists_only;
  lists_only.name = "lists-only";
  lists_only.egress.names = std::vector<std::string>{};
  c.tokens = {free, narrow, lists_only};
  return c;
}

EgressRequest allow(std::vector<std::string> names, std::vector<std::uint16_t> ports = {}) {
  EgressRequest r;
  r.kind = EgressRequest::Kind::kAllow;
  r.names = std::move(names);
  r.ports = std::move(ports);
  return r;
}

EgressRequest list(std::string name) {
  EgressRequest r;
  r.kind = EgressRequest::Kind::kList;
  r.list = std::move(name);
  return r;
}

TEST(EgressAccess, OnOffAndOwnLists) {
  auto c = egress_config();
  EXPECT_EQ(resolve_egress({}, c, "free").value(), Egress::off());
  EgressRequest on;
  on.kind = EgressRequest::Kind::kOn;
  EXPECT_EQ(resolve_egress(on, c, "narrow").value(), Egress::on());  // policy decides on
  auto e = resolve_egress(allow({"pypi.org", "*.github.com"}, {443}), c, "free");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->mode, Egress::Mode::kAllowlist);
  EXPECT_EQ(e->list.names, (std::vector<std::string>{"*.github.com", "pypi.org"}));
  EXPECT_EQ(e->list.ports, (std::vector<std::uint16_t>{443}));
  EXPECT_EQ(egress_json(*e), R"({"allow":["*.github.com","pypi.org"],"ports":[443]})");
}

TEST(EgressAccess, NamedListsResolveWithTheirName) {
  auto c = egress_config();
  auto e = resolve_egress(list("python-packages"), c, "free");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->list_name, "python-packages");
  EXPECT_EQ(e->list.ports, (std::vector<std::uint16_t>{80, 443}));
  EXPECT_EQ(egress_json(*e), R"({"allow":["files.pythonhosted.org","pypi.org"],"ports":[80,443],)"
                             R"("list":"python-packages"})");
  auto unknown = resolve_egress(list("nope"), c, "free");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().status, 400);
  EXPECT_EQ(unknown.error().message, "internet.list: no egress list named nope");
}

TEST(EgressAccess, TheTokensCapsAre403s) {
  auto c = egress_config();
  EXPECT_TRUE(resolve_egress(list("python-packages"), c, "narrow"));
  auto other_list = resolve_egress(list("git"), c, "narrow");
  ASSERT_FALSE(other_list);
  EXPECT_EQ(other_list.error().status, 403);
  EXPECT_EQ(other_list.error().message, "token narrow may not use the egress list git");
  EXPECT_TRUE(resolve_egress(allow({"a.example.com", "*.b.example.com"}), c, "narrow"));
  EXPECT_TRUE(resolve_egress(allow({"api.openai.com"}), c, "narrow"));
  auto outside = resolve_egress(allow({"example.com"}), c, "narrow");  // the apex is not below
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error().status, 403);
  EXPECT_EQ(outside.error().message, "token narrow may not ask for egress to example.com");
  auto wider = resolve_egress(allow({"*.openai.com"}), c, "narrow");
  ASSERT_FALSE(wider);
  auto many =
      resolve_egress(allow({"a.example.com", "b.example.com", "c.example.com"}), c, "narrow");
  ASSERT_FALSE(many);
  EXPECT_EQ(many.error().message, "token narrow may ask for at most 2 egress names");
  auto over_default =
      resolve_egress(allow({"a.org", "b.org", "c.org", "d.org", "e.org"}), c, "free");
  ASSERT_FALSE(over_default);
  EXPECT_EQ(over_default.error().message, "token free may ask for at most 4 egress names");
  EXPECT_FALSE(resolve_egress(allow({"pypi.org"}), c, "lists-only"));
  EXPECT_TRUE(resolve_egress(list("git"), c, "lists-only"));
}

TEST(EgressAccess, BadNamesAre400s) {
  auto r = resolve_egress(allow({"PyPI.org"}), egress_config(), "free");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, 400);
}

TEST(EgressAccess, Coverage) {
  EXPECT_TRUE(egress_name_covered("pypi.org", "pypi.org"));
  EXPECT_TRUE(egress_name_covered("a.b.example.com", "*.example.com"));
  EXPECT_TRUE(egress_name_covered("*.b.example.com", "*.example.com"));
  EXPECT_FALSE(egress_name_covered("example.com", "*.example.com"));
  EXPECT_FALSE(egress_name_covered("badexample.com", "*.example.com"));
  EXPECT_FALSE(egress_name_covered("*.example.com", "example.com"));
  EXPECT_FALSE(egress_name_covered("a.example.com", "example.com"));
}

TEST(EgressAccess, PolicyRulesSeeTheNames) {
  PolicySpec spec;
  auto deny = test::rule("policy.default[0]",
                         {PolicyAction::kInternet, PolicyAction::kSandboxCreate}, Verdict::kDeny);
  deny.egress_names = R"((^|\.)pastebin\.com$)";
  auto listed = test::rule("policy.default[1]", {PolicyAction::kInternet}, Verdict::kAllow);
  listed.egress_list = "python-packages";
  auto approve = test::rule("policy.default[2]", {PolicyAction::kInternet}, Verdict::kApprove);
  approve.internet = true;  // on and every allowlist
  spec.default_rules = {deny, listed, approve};
  auto p = Policy::compile(spec);
  ASSERT_TRUE(p) << p.error().message;
  auto c = egress_config();
  auto decide = [&](const EgressRequest& r) {
    PolicyRequest asked;
    asked.action = PolicyAction::kInternet;
    set_policy_egress(asked, resolve_egress(r, c, "free").value());
    return p->decide("free", asked);
  };
  EXPECT_EQ(decide(allow({"pypi.org", "pastebin.com"})).rule, "policy.default[0]");
  EXPECT_EQ(decide(allow({"x.pastebin.com"})).verdict, Verdict::kDeny);
  EXPECT_EQ(decide(list("python-packages")).verdict, Verdict::kAllow);
  EXPECT_EQ(decide(allow({"pypi.org"})).verdict, Verdict::kApprove);
  EgressRequest on;
  on.kind = EgressRequest::Kind::kOn;
  EXPECT_EQ(decide(on).verdict, Verdict::kApprove);
  EXPECT_EQ(decide({}).rule, "policy.fallback");

  auto mode = test::rule("policy.default[0]", {PolicyAction::kInternet}, Verdict::kDeny);
  mode.egress = "on";
  PolicySpec only_on;
  only_on.default_rules = {mode};
  auto q = Policy::compile(only_on);
  ASSERT_TRUE(q);
  PolicyRequest asked;
  asked.action = PolicyAction::kInternet;
  set_policy_egress(asked, Egress::on());
  EXPECT_EQ(q->decide("free", asked).verdict, Verdict::kDeny);
  set_policy_egress(asked, Egress::allow({"pypi.org"}));
  EXPECT_EQ(q->decide("free", asked).verdict, Verdict::kAllow);
}

}  // namespace
}  // namespace pvs::service

namespace pvs::service {
namespace {

// Own lists open at most the token's ports: 80 and 443 by default, as "internet on" (#32, 5).
TEST(EgressAccess, PortsAreCappedPerToken) {
  auto c = egress_config();
  EXPECT_TRUE(resolve_egress(allow({"a.org"}, {80, 443}), c, "free"));
  auto other = resolve_egress(allow({"a.org"}, {443, 22}), c, "free");
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().status, 403);
  EXPECT_EQ(other.error().message,
            "token free may not ask for port 22 (auth.tokens[].egress.ports: 80,443)");
  EXPECT_FALSE(resolve_egress(allow({"a.org"}, {8443}), c, "nobody-configured"));
  c.tokens[0].egress.ports = {8443};
  EXPECT_TRUE(resolve_egress(allow({"a.org"}, {8443}), c, "free"));
  EXPECT_FALSE(resolve_egress(allow({"a.org"}), c, "free"));  // 80 and 443 by default
}

}  // namespace
}  // namespace pvs::service
