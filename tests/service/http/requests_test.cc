#include "http/requests.h"

#include <gtest/gtest.h>

namespace pvs::service {
namespace {

ServiceConfig config() {
  ServiceConfig c;
  c.manager.max_cpus = 4;
  c.manager.max_memory_mb = 4096;
  c.manager.max_disk_gb = 32;
  c.manager.max_ttl = std::chrono::seconds(86400);
  c.max_exec_timeout_seconds = 600;
  c.max_body_bytes = 4096;
  return c;
}

std::string error(const ApiResult<CreateRequest>& r) {
  return r ? "" : r.error().message;
}

TEST(Requests, CreateDefaultsAndFields) {
  auto r = parse_create("", config());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->cpus, 1);
  EXPECT_EQ(r->memory_mb, 512);
  EXPECT_EQ(r->internet.kind, EgressRequest::Kind::kOff);
  r = parse_create(R"({"cpus":2,"memory_mb":1024,"disk_gb":10,"internet":true,"ttl_seconds":600,
                       "labels":{"team":"ml","run":"42"},"hostname":"agent-1"})",
                   config());
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->cpus, 2);
  EXPECT_EQ(r->disk_gb, 10);
  EXPECT_EQ(r->internet.kind, EgressRequest::Kind::kOn);
  EXPECT_EQ(r->ttl_seconds, 600);
  EXPECT_EQ(r->labels.at("team"), "ml");
  EXPECT_EQ(r->hostname, "agent-1");
}

TEST(Requests, CreateRejectsBadInput) {
  auto c = config();
  EXPECT_EQ(error(parse_create(R"({"cpus":5})", c)), "cpus: must be an integer in [1, 4]");
  EXPECT_EQ(error(parse_create(R"({"cpus":"2"})", c)), "cpus: must be an integer in [1, 4]");
  EXPECT_EQ(error(parse_create(R"({"memory_mb":32})", c)),
            "memory_mb: must be an integer in [64, 4096]");
  EXPECT_EQ(error(parse_create(R"({"ttl_seconds":86401})", c)),
            "ttl_seconds: must be an integer in [0, 86400]");
  EXPECT_EQ(error(parse_create(R"({"internet":"yes"})", c)),
            "internet: must be true, false, {\"allow\": [names]} or {\"list\": name}");
  EXPECT_EQ(error(parse_create(R"({"hostname":"Bad_Name"})", c)),
            "hostname: must be a DNS label: 1-63 of [a-z0-9-], no leading or trailing -");
  EXPECT_NE(error(parse_create(R"({"labels":{"BAD KEY":"x"}})", c)).find("labels: "),
            std::string::npos);
  EXPECT_EQ(error(parse_create(R"({"labels":{"pve-sandbox/template-name":"web"}})", c)),
            "labels: label key \"pve-sandbox/template-name\" is reserved: keys under "
            "pve-sandbox/ are the controller's own");
  EXPECT_EQ(error(parse_create(R"({"label":{}})", c)), "label: unknown field");
  EXPECT_EQ(error(parse_create(R"({"cpus":1)", c)).rfind("malformed JSON", 0), 0u);
}

TEST(Requests, Exec) {
  auto c = config();
  auto r = parse_exec(R"({"command":"echo hi","cwd":"/tmp","env":{"A_1":"x"},"stdin":"in",
                          "timeout_seconds":5})",
                      c);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->command, "echo hi");
  EXPECT_EQ(r->cwd, "/tmp");
  ASSERT_EQ(r->env.size(), 1u);
  EXPECT_EQ(r->env[0].first, "A_1");
  EXPECT_EQ(r->stdin_data, "in");
  EXPECT_EQ(r->timeout_seconds, 5);
  auto err = [&](const char* body) {
    auto x = parse_exec(body, c);
    return x ? std::string() : x.error().message;
  };
  EXPECT_EQ(err("{}"), "command: required");
  EXPECT_EQ(err(R"({"command":""})"), "command: must not be empty");
  EXPECT_EQ(err(R"({"command":["ls"]})"), "command: must be a string");
  EXPECT_EQ(err(R"({"command":"ls","cwd":"tmp"})"), "cwd: must be an absolute path");
  EXPECT_EQ(err(R"({"command":"ls","env":{"1A":"x"}})"), "env.1A: not a variable name");
  EXPECT_EQ(err(R"({"command":"ls","timeout_seconds":0})"),
            "timeout_seconds: must be an integer in [1, 600]");
  EXPECT_EQ(err(R"({"command":"ls","timeout":5})"), "timeout: unknown field");
}

TEST(Requests, SmallBodies) {
  auto c = config();
  EXPECT_EQ(parse_internet(R"({"enabled":true})").value().kind, EgressRequest::Kind::kOn);
  EXPECT_EQ(parse_internet(R"({"enabled":false})").value().kind, EgressRequest::Kind::kOff);
  EXPECT_EQ(parse_internet("{}").error().message,
            "enabled: required (true or false), or allow (a list of names) or list");
  EXPECT_EQ(parse_internet(R"({"enabled":1})").error().message, "enabled: must be true or false");
  EXPECT_EQ(parse_ttl(R"({"ttl_seconds":60})", c).value(), 60);
  EXPECT_EQ(parse_ttl("{}", c).error().message, "ttl_seconds: required");
  EXPECT_EQ(parse_ttl(R"({"ttl_seconds":0})", c).error().message,
            "ttl_seconds: must be an integer in [1, 86400]");
  auto s = parse_snapshot(R"({"name":"before-upgrade","description":"x"})");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->name, "before-upgrade");
  EXPECT_FALSE(parse_snapshot(R"({"name":"current"})"));
  EXPECT_FALSE(parse_snapshot(R"({"name":"1abc"})"));
  EXPECT_FALSE(parse_snapshot(R"({})"));
}

TEST(Requests, UsageWindow) {
  auto all = parse_usage_window("", "");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->since, 0);
  EXPECT_EQ(all->until, std::numeric_limits<std::int64_t>::max());
  auto w = parse_usage_window("100", "100");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->since, 100);
  EXPECT_EQ(w->until, 100);
  EXPECT_EQ(parse_usage_window("x", "").error().message,
            "since: unix seconds (a non-negative integer)");
  EXPECT_EQ(parse_usage_window("", "-1").error().message,
            "until: unix seconds (a non-negative integer)");
  EXPECT_EQ(parse_usage_window("5", "4").error().message, "since: after until");
  EXPECT_EQ(parse_usage_window("99999999999999999999", "").error().status, 400);
}

TEST(Requests, Parameters) {
  EXPECT_TRUE(is_sandbox_id("sb-0123456789ab"));
  EXPECT_FALSE(is_sandbox_id("sb-0123456789aB"));
  EXPECT_FALSE(is_sandbox_id("sb-0123456789a"));
  EXPECT_FALSE(is_sandbox_id("../etc/passwd"));
  EXPECT_TRUE(validate_path("/tmp/x"));
  EXPECT_FALSE(validate_path("tmp/x"));
  EXPECT_FALSE(validate_path(""));
  EXPECT_FALSE(validate_path(std::string("/a\0b", 4)));
  // Non-canonical spellings would slip past path rules (#32, finding 7).
  for (const char* p : {"//etc/x", "/etc//x", "/tmp/./x", "/tmp/../etc/x", "/tmp/.", "/tmp/.."})
    EXPECT_FALSE(validate_path(p)) << p;
  EXPECT_TRUE(validate_path("/tmp/.hidden"));
  EXPECT_TRUE(validate_path("/tmp/..x"));
  EXPECT_FALSE(validate_path("/" + std::string(5000, 'a')));
  EXPECT_EQ(parse_mode("0755").value(), 0755u);
  EXPECT_EQ(parse_mode("600").value(), 0600u);
  EXPECT_FALSE(parse_mode("0800"));
  EXPECT_FALSE(parse_mode("rwx"));
  EXPECT_FALSE(parse_mode("177777"));
  EXPECT_EQ(parse_list_limit("").value(), kDefaultListLimit);
  EXPECT_EQ(parse_list_limit("1").value(), 1u);
  EXPECT_EQ(parse_list_limit("100000").value(), 100000u);
  for (const char* bad : {"0", "100001", "-1", "1e3", "99999999999999999999999", " 5"})
    EXPECT_FALSE(parse_list_limit(bad)) << bad;
  auto sel = parse_selector({"team=ml", "run=42"});
  ASSERT_TRUE(sel);
  EXPECT_EQ(sel->size(), 2u);
  EXPECT_TRUE(parse_selector({"pve-sandbox/template-name=web"}));  // reading is fine
  EXPECT_FALSE(parse_selector({"team"}));
  EXPECT_FALSE(parse_selector({"=x"}));
}

TEST(Requests, InternetTakesAnAllowlistAtCreateAndAtRunTime) {
  auto c = config();
  auto r = parse_create(R"({"internet":{"allow":["pypi.org","*.github.com"],"ports":[443]}})", c);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->internet.kind, EgressRequest::Kind::kAllow);
  EXPECT_EQ(r->internet.names, (std::vector<std::string>{"pypi.org", "*.github.com"}));
  EXPECT_EQ(r->internet.ports, (std::vector<std::uint16_t>{443}));
  EXPECT_EQ(egress_request_json(r->internet),
            R"({"allow":["pypi.org","*.github.com"],"ports":[443]})");
  r = parse_create(R"({"internet":{"list":"python-packages"}})", c);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->internet.kind, EgressRequest::Kind::kList);
  EXPECT_EQ(r->internet.list, "python-packages");

  auto i = parse_internet(R"({"allow":["pypi.org"]})");
  ASSERT_TRUE(i) << i.error().message;
  EXPECT_EQ(i->kind, EgressRequest::Kind::kAllow);
  EXPECT_TRUE(i->ports.empty());  // 80 and 443 when resolved
  i = parse_internet(R"({"list":"git"})");
  ASSERT_TRUE(i) << i.error().message;
  EXPECT_EQ(egress_request_json(*i), R"({"list":"git"})");
}

TEST(Requests, BadAllowlistsAre400sNamingTheField) {
  auto c = config();
  auto create_error = [&](const std::string& internet) {
    return error(parse_create("{\"internet\":" + internet + "}", c));
  };
  EXPECT_EQ(create_error(R"({"allow":["PyPI.org"]})"),
            "internet.allow: egress name \"PyPI.org\" may hold only a-z 0-9 - and dots (lower "
            "case) (a lower-case DNS name, or *. and one for its subdomains)");
  EXPECT_NE(create_error(R"({"allow":["localhost"]})").find("needs at least two labels"),
            std::string::npos);
  EXPECT_NE(create_error(R"({"allow":["*.com"]})").find("com is a public suffix"),
            std::string::npos);
  EXPECT_EQ(create_error(R"({"allow":[]})"), "internet.allow: names no name");
  EXPECT_EQ(create_error(R"({"allow":["a.org"],"list":"x"})"),
            "internet.allow: give allow (a list of names) or list (a named list)");
  EXPECT_EQ(create_error(R"({})"),
            "internet.allow: give allow (a list of names) or list (a named list)");
  EXPECT_EQ(create_error(R"({"list":"x","ports":[80]})"),
            "internet.ports: a named list has its own ports");
  EXPECT_EQ(create_error(R"({"list":"Bad"})"),
            "internet.list: not a list name (1-64 of [a-z0-9._-])");
  EXPECT_EQ(create_error(R"({"allow":["a.org"],"ports":[0]})"),
            "internet: ports: must be a list of at most 16 integers in [1, 65535]");
  EXPECT_EQ(create_error(R"({"allow":["a.org"],"extra":1})"), "internet: extra: unknown field");
  EXPECT_EQ(create_error(R"({"allow":"a.org"})"), "internet: allow: must be a list of strings");
  EXPECT_EQ(parse_internet(R"({"allow":["a.org"],"enabled":true})").error().message,
            "allow: unknown field");
  EXPECT_EQ(
      parse_internet(R"({"allow":["a.org"],"ports":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]})")
          .error()
          .message,
      "ports: must be a list of at most 16 integers in [1, 65535]");
}

}  // namespace
}  // namespace pvs::service
