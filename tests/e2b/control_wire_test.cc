#include "e2b/control_wire.h"

#include <gtest/gtest.h>

namespace pvs::service::e2b {
namespace {

ApiResult<NewSandbox> create(std::string_view body) {
  return parse_new_sandbox(body, {3600});
}

template <class T>
void expect_400(const ApiResult<T>& r, std::string_view text) {
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, 400);
  EXPECT_NE(r.error().message.find(text), std::string::npos) << r.error().message;
}

// The body `e2b` 2.51.0 sends for Sandbox.create({metadata, envs, timeoutMs: 300000}).
TEST(ControlWire, CreateAsTheSdkSendsIt) {
  auto r = create(R"({"templateID":"base","metadata":{"run":"42"},"envVars":{"FOO":"bar"},)"
                  R"("timeout":300})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->template_id, "base");
  EXPECT_EQ(r->create.ttl_seconds, 300);
  EXPECT_EQ(r->create.labels.at("run"), "42");
  EXPECT_EQ(r->env_vars.at("FOO"), "bar");
  EXPECT_EQ(r->create.internet.kind, EgressRequest::Kind::kOff);
  EXPECT_FALSE(r->internet_explicit);
}

TEST(ControlWire, CreateDefaults) {
  auto r = create("{}");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->template_id, "base");
  EXPECT_EQ(r->create.ttl_seconds, 0);
}

TEST(ControlWire, InternetAndAllowlists) {
  auto on = create(R"({"allow_internet_access":true})");
  ASSERT_TRUE(on);
  EXPECT_EQ(on->create.internet.kind, EgressRequest::Kind::kOn);
  EXPECT_TRUE(on->internet_explicit);
  auto list = create(R"({"network":{"allowOut":["PyPI.org","*.github.com","pypi.org"],)"
                     R"("denyOut":["0.0.0.0/0"]}})");
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->create.internet.kind, EgressRequest::Kind::kAllow);
  EXPECT_EQ(list->create.internet.names, (std::vector<std::string>{"pypi.org", "*.github.com"}));
  auto all = create(R"({"network":{"allowOut":["0.0.0.0/0"]}})");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->create.internet.kind, EgressRequest::Kind::kOn);
  // Internet on and nothing denied: E2B allows everything, allowOut or not.
  auto both = create(R"({"allow_internet_access":true,"network":{"allowOut":["a.org"]}})");
  ASSERT_TRUE(both);
  EXPECT_EQ(both->create.internet.kind, EgressRequest::Kind::kOn);
  auto off_list = create(R"({"allow_internet_access":false,"network":{"allowOut":["a.org"]}})");
  ASSERT_TRUE(off_list);
  EXPECT_EQ(off_list->create.internet.kind, EgressRequest::Kind::kAllow);
}

TEST(ControlWire, UnsupportedNetworkIsAClear400) {
  expect_400(create(R"({"network":{"allowOut":["8.8.8.8/32"]}})"), "by DNS name");
  expect_400(create(R"({"network":{"allowOut":["8.8.8.8"]}})"), "not supported by pve-sandbox");
  expect_400(create(R"({"network":{"allowOut":["2001:db8::1"]}})"), "by DNS name");
  expect_400(create(R"({"network":{"denyOut":["10.0.0.0/8"]}})"), "network.denyOut");
  expect_400(create(R"({"network":{"egressProxy":{"address":"p:1080"}}})"), "network.egressProxy");
  expect_400(create(R"({"network":{"rules":{}}})"), "network.rules");
  expect_400(create(R"({"network":{"allowOut":["bad name!"]}})"), "network.allowOut");
  expect_400(create(R"({"network":{"whatever":1}})"), "whatever");
  expect_400(create(R"({"network":[]})"), "network");
}

TEST(ControlWire, PortAccessIsReadFromNetwork) {
  auto plain = create("{}");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->ports.public_traffic);
  EXPECT_EQ(plain->ports.mask_host, "");
  auto masked =
      create(R"({"network":{"allowPublicTraffic":true,"maskRequestHost":"localhost:${PORT}"}})");
  ASSERT_TRUE(masked);
  EXPECT_TRUE(masked->ports.public_traffic);
  EXPECT_EQ(masked->ports.mask_host, "localhost:${PORT}");
  expect_400(create(R"({"network":{"maskRequestHost":"bad host"}})"), "network.maskRequestHost");
  expect_400(create(R"({"network":{"maskRequestHost":7}})"), "maskRequestHost");
}

TEST(ControlWire, UnsupportedFeaturesAreClear400s) {
  expect_400(create(R"({"autoResume":{"enabled":true}})"), "needs autoPause");
  expect_400(create(R"({"autoPause":true,"autoPauseMemory":true})"), "filesystem mode only");
  expect_400(create(R"({"mcp":{}})"), "mcp");
  expect_400(create(R"({"volumeMounts":[{"name":"Bad","path":"/v"}]})"), "volumeMounts");
  expect_400(create(R"({"volumeMounts":[{"name":"v"}]})"), "volumeMounts");
  expect_400(create(R"({"volumeMounts":[{"name":"v","path":"/v","ro":true}]})"), "volumeMounts");
  expect_400(create(R"({"volumeMounts":{"name":"v"}})"), "volumeMounts");
  expect_400(create(R"({"iam":{"tokens":{}}})"), "iam");
  EXPECT_TRUE(create(R"({"autoPause":false,"secure":true,"autoResume":{"enabled":false}})"));
}

// volumeMounts [{name, path}] as the SDK sends them (Record<path, Volume | name>): names, kept
// for create_for to resolve; [] is no mount.
TEST(ControlWire, VolumeMountsAreNamesAndPaths) {
  auto r = create(R"({"volumeMounts":[{"name":"work","path":"/mnt/w"},{"name":"c","path":"/c"}]})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->create.volumes, (std::vector<VolumeMount>{{"work", "/mnt/w"}, {"c", "/c"}}));
  r = create(R"({"volumeMounts":[]})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->create.volumes.empty());
}

// lifecycle {onTimeout: 'pause', autoResume: true} as the SDK sends it.
TEST(ControlWire, LifecycleMapsToPauseOnExpiry) {
  auto r = create(R"({"autoPause":true,"autoResume":{"enabled":true},"timeout":60})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->create.pause_on_expiry);
  EXPECT_TRUE(r->create.auto_resume);
  r = create(R"({"autoPause":true,"autoPauseMemory":false})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->create.pause_on_expiry);
  EXPECT_FALSE(r->create.auto_resume);
  r = create(R"({"autoPause":false})");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->create.pause_on_expiry);
}

// E2B's getHost(port): "<port>-<id>.<domain>".
TEST(ControlWire, PortHosts) {
  auto p = port_host("8080-sb-0123456789ab.e2b.example.org", "e2b.example.org");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->sandbox, "sb-0123456789ab");
  EXPECT_EQ(p->port, 8080);
  p = port_host("3000-sb-0123456789ab.E2B.Example.ORG:443", "e2b.example.org");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->port, 3000);
  EXPECT_EQ(*envd_host_sandbox("49983-sb-0123456789ab.e2b.example.org", "e2b.example.org"),
            "sb-0123456789ab");
  EXPECT_FALSE(envd_host_sandbox("8080-sb-0123456789ab.e2b.example.org", "e2b.example.org"));
  for (const char* bad :
       {"sb-0123456789ab.e2b.example.org", "0-sb-0123456789ab.e2b.example.org",
        "080-sb-0123456789ab.e2b.example.org", "65536-sb-0123456789ab.e2b.example.org",
        "123456-sb-0123456789ab.e2b.example.org", "8080-sb-XYZ.e2b.example.org",
        "8080-sb-0123456789ab.other.org", "8080-sb-0123456789ab.e2b.example.org.evil",
        "8080-sb-0123456789ab", "x8080-sb-0123456789ab.e2b.example.org", ""})
    EXPECT_FALSE(port_host(bad, "e2b.example.org")) << bad;
}

TEST(ControlWire, CreateValidation) {
  expect_400(create(R"({"templateID":""})"), "templateID");
  expect_400(create(R"({"templateID":"a b"})"), "templateID");
  expect_400(create(R"({"timeout":-1})"), "timeout");
  expect_400(create(R"({"timeout":86401})"), "timeout");
  expect_400(create(R"({"timeout":"300"})"), "timeout");
  expect_400(create(R"({"metadata":{"userId":"1"}})"), "metadata");
  expect_400(create(R"({"metadata":{"pve-sandbox/template-name":"x"}})"),
             "metadata: label key \"pve-sandbox/template-name\" is reserved");
  expect_400(create(R"({"envVars":{"1BAD":"x"}})"), "envVars");
  expect_400(create(R"({"envVars":{"A":1}})"), "envVars");
  expect_400(create(R"({"unknownField":1})"), "unknownField");
  expect_400(create("not json"), "JSON");
}

TEST(ControlWire, TimeoutConnectNetwork) {
  EXPECT_EQ(*parse_timeout(R"({"timeout":60})", 3600), 60);
  EXPECT_EQ(*parse_timeout(R"({"timeout":0})", 3600), 1);
  EXPECT_FALSE(parse_timeout(R"({})", 3600));
  EXPECT_FALSE(parse_timeout(R"({"timeout":3601})", 3600));
  EXPECT_EQ(*parse_connect(R"({"timeout":300})", 3600), 300);
  EXPECT_EQ(*parse_connect(R"({"timeout":300,"memory":false})", 3600), 300);
  EXPECT_EQ(*parse_connect(R"({})", 3600), 0);  // absent: the expiry stays
  EXPECT_FALSE(parse_connect(R"({"timeout":"1"})", 3600));
  auto net = parse_network_update(R"({"allowOut":["pypi.org"],"denyOut":["0.0.0.0/0"]})");
  ASSERT_TRUE(net) << net.error().message;
  EXPECT_EQ(net->kind, EgressRequest::Kind::kAllow);
  auto open = parse_network_update(R"({"allow_internet_access":true})");
  ASSERT_TRUE(open);
  EXPECT_EQ(open->kind, EgressRequest::Kind::kOn);
  auto closed = parse_network_update(R"({})");
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->kind, EgressRequest::Kind::kOff);
  EXPECT_FALSE(parse_network_update(R"({"maskRequestHost":"x"})"));
}

TEST(ControlWire, ListQuery) {
  std::multimap<std::string, std::string> q{{"metadata", "run=42&user%3Dname=a%2520b"},
                                            {"state", "running,paused"},
                                            {"limit", "5"},
                                            {"nextToken", "10"},
                                            {"order", "desc"}};
  auto r = parse_list_query(q);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->metadata.at("run"), "42");
  EXPECT_EQ(r->metadata.at("user=name"), "a b");
  EXPECT_TRUE(r->running);
  EXPECT_EQ(r->limit, 5u);
  EXPECT_EQ(r->offset, 10u);
  EXPECT_TRUE(r->paused);
  EXPECT_FALSE(parse_list_query({{"state", "paused"}})->running);
  EXPECT_TRUE(parse_list_query({{"state", "paused"}})->paused);
  EXPECT_FALSE(parse_list_query({{"state", "running"}})->paused);
  EXPECT_TRUE(parse_list_query({})->paused);
  EXPECT_FALSE(parse_list_query({{"limit", "0"}}));
  EXPECT_FALSE(parse_list_query({{"limit", "x"}}));
  EXPECT_FALSE(parse_list_query({{"nextToken", "abc"}}));
  EXPECT_FALSE(parse_list_query({{"metadata", "novalue"}}));
  EXPECT_FALSE(parse_list_query({{"metadata", "a=%zz"}}));
  EXPECT_FALSE(parse_list_query({{"bogus", "1"}}));
}

// getMetrics' window: unix seconds, each optional, start not after end.
TEST(ControlWire, MetricsQuery) {
  auto both = parse_metrics_query({{"start", "100"}, {"end", "200"}});
  ASSERT_TRUE(both) << both.error().message;
  EXPECT_EQ(both->start, 100);
  EXPECT_EQ(both->end, 200);
  auto none = parse_metrics_query({});
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->start || none->end);
  EXPECT_TRUE(parse_metrics_query({{"start", "5"}, {"end", "5"}}));
  for (auto q : std::vector<std::multimap<std::string, std::string>>{{{"start", "6"}, {"end", "5"}},
                                                                     {{"start", "-1"}},
                                                                     {{"end", "1.5"}},
                                                                     {{"start", ""}},
                                                                     {{"start", "9999999999999"}},
                                                                     {{"step", "5"}}}) {
    auto r = parse_metrics_query(q);
    ASSERT_FALSE(r) << q.begin()->first << "=" << q.begin()->second;
    EXPECT_EQ(r.error().status, 400);
  }
}

// POST /sandboxes/{id}/pause: the SDK sends {"memory": keepMemory} only when keepMemory is
// given; the file-system mode is the only one (docs/design/pause.md).
TEST(ControlWire, PauseKeepsTheFileSystemOnly) {
  EXPECT_EQ(parse_pause("").value(), PauseMode::kFilesystem);
  EXPECT_EQ(parse_pause("{}").value(), PauseMode::kFilesystem);
  EXPECT_EQ(parse_pause(R"({"memory":false})").value(), PauseMode::kFilesystem);
  expect_400(parse_pause(R"({"memory":true})"), "keepMemory: false");
  expect_400(parse_pause(R"({"memory":"yes"})"), "memory");
  expect_400(parse_pause(R"({"hibernate":true})"), "hibernate");
}

TEST(ControlWire, KeysHostsTemplates) {
  EXPECT_TRUE(is_e2b_api_key("e2b_0123456789abcdef"));
  EXPECT_FALSE(is_e2b_api_key("e2b_0123456789ABCDEF"));
  EXPECT_FALSE(is_e2b_api_key("e2b_123"));
  EXPECT_FALSE(is_e2b_api_key("pvs_0123456789abcdef"));
  EXPECT_EQ(sandbox_from_host("49983-sb-4f2a9c1e0b7d.sandbox.example.org"), "sb-4f2a9c1e0b7d");
  EXPECT_EQ(sandbox_from_host("49983-sb-4f2a9c1e0b7d.lan:8787"), "sb-4f2a9c1e0b7d");
  EXPECT_FALSE(sandbox_from_host("8080-sb-4f2a9c1e0b7d.example.org"));
  EXPECT_FALSE(sandbox_from_host("49983-sb-4f2a9c1e0b7d"));
  EXPECT_FALSE(sandbox_from_host("49983-../etc.example.org"));
  EXPECT_EQ(
      envd_host_sandbox("49983-sb-4f2a9c1e0b7d.Sandbox.Example.org:443", "sandbox.example.org"),
      "sb-4f2a9c1e0b7d");
  EXPECT_FALSE(envd_host_sandbox("49983-sb-4f2a9c1e0b7d.other.org", "sandbox.example.org"));
  EXPECT_FALSE(
      envd_host_sandbox("49983-sb-4f2a9c1e0b7d.xsandbox.example.org", "sandbox.example.org"));
  EXPECT_TRUE(is_template_id("base"));
  EXPECT_TRUE(is_template_id("small-1.x_y"));
  EXPECT_FALSE(is_template_id("-x"));
}

TEST(ControlWire, Replies) {
  SandboxView s;
  s.id = "sb-4f2a9c1e0b7d";
  s.template_id = "base";
  s.client_id = "ci";
  s.access_token = "tok";
  s.started_at = 0;
  s.end_at = 60;
  s.metadata = {{"run", "42"}};
  EXPECT_EQ(sandbox_reply(s),
            R"({"templateID":"base","sandboxID":"sb-4f2a9c1e0b7d","clientID":"ci",)"
            R"("envdVersion":"0.5.7","envdAccessToken":"tok","trafficAccessToken":null,)"
            R"("domain":null})");
  std::string detail = detail_reply(s);
  EXPECT_NE(detail.find(R"("endAt":"1970-01-01T00:01:00.000Z")"), std::string::npos) << detail;
  EXPECT_NE(detail.find(R"("state":"running")"), std::string::npos);
  EXPECT_NE(detail.find(R"("allowInternetAccess":null)"), std::string::npos);
  EXPECT_NE(detail.find(R"("lifecycle":{"autoResume":false,"onTimeout":"kill"})"),
            std::string::npos)
      << detail;
  s.pause_on_timeout = s.auto_resume = true;
  EXPECT_NE(detail_reply(s).find(R"("lifecycle":{"autoResume":true,"onTimeout":"pause"})"),
            std::string::npos);
  s.allow_out = {"pypi.org"};
  EXPECT_NE(detail_reply(s).find(R"("network":{"allowOut":["pypi.org"],"denyOut":["0.0.0.0/0"]})"),
            std::string::npos);
  EXPECT_EQ(list_reply(std::vector<SandboxView>{}), "[]");
  EXPECT_NE(detail_reply(s).find(R"("volumeMounts":[])"), std::string::npos);
  s.volume_mounts = {{"work", "/mnt/w"}};
  EXPECT_NE(detail_reply(s).find(R"("volumeMounts":[{"name":"work","path":"/mnt/w"}])"),
            std::string::npos);
  EXPECT_NE(list_reply({s}).find(R"("volumeMounts":[{"name":"work","path":"/mnt/w"}])"),
            std::string::npos);
  EXPECT_EQ(e2b_error_body(not_found("no sandbox sb-1")),
            R"({"code":404,"message":"no sandbox sb-1"})");
  MetricView m{60, 2, 12.5, 1, 2, 3, 4, 5};
  EXPECT_NE(metrics_reply({m}).find(R"("timestampUnix":60,"cpuCount":2,"cpuUsedPct":12.5)"),
            std::string::npos);
}

}  // namespace
}  // namespace pvs::service::e2b
