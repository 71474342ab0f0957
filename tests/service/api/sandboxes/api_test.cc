// The REST API in-process (Api + HttpServer) on the real Manager, against pvesim's model backend
// with the real agent and ruleset in a node namespace (pvs::test::Stack): every endpoint with
// valid and invalid input, ownership, limits, audit log, metrics, concurrency, restart.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/StreamSocket.h>

#include "service/support/api_fixture.h"
#include "sim.h"

namespace pvs::service {
namespace {

TEST_F(ApiTest, PoolsAreForAdminsAndAnUnknownProfileIsRefused) {
  auto pools = call("GET", "/v1/pools", "", "tok-root");
  EXPECT_EQ(pools.status, 200) << pools.body;
  EXPECT_EQ(pools.body, R"({"pools":[]})");
  auto denied = call("GET", "/v1/pools");
  EXPECT_EQ(denied.status, 403) << denied.body;
  EXPECT_NE(denied.body.find("admin token"), std::string::npos) << denied.body;
  EXPECT_EQ(call("GET", "/v1/pools", "", "").status, 401);
  auto unknown = call("POST", "/v1/sandboxes", R"({"profile":"gpu"})");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_NE(unknown.body.find("no hot pool profile"), std::string::npos) << unknown.body;
  auto bad = call("POST", "/v1/sandboxes", R"({"profile":"GPU!"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("profile"), std::string::npos) << bad.body;
}

TEST_F(ApiTest, PublicEndpointsAuthAndRouting) {
  // Health without a token: the status only; with one: the peers and the count too.
  auto health = call("GET", "/v1/health", "", "");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(json(health.body)->getValue<std::string>("status"), "ok");
  EXPECT_FALSE(json(health.body)->has("agent")) << health.body;
  EXPECT_FALSE(json(health.body)->has("sandboxes")) << health.body;
  auto detailed = call("GET", "/v1/health");
  EXPECT_TRUE(json(detailed.body)->getObject("agent")->getValue<bool>("ok")) << detailed.body;
  EXPECT_TRUE(json(detailed.body)->has("sandboxes")) << detailed.body;

  auto openapi = call("GET", "/v1/openapi.json", "", "");
  EXPECT_EQ(openapi.status, 200);
  EXPECT_EQ(json(openapi.body)->getValue<std::string>("openapi"), "3.0.3");
  EXPECT_TRUE(json(openapi.body)->getObject("paths")->has("/v1/sandboxes/{id}/exec"));

  auto none = call("GET", "/v1/sandboxes", "", "");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(error_code(none), "unauthenticated");
  EXPECT_EQ(none.headers["WWW-Authenticate"], "Bearer");
  EXPECT_EQ(call("GET", "/v1/sandboxes", "", "tok-mallory").status, 401);
  EXPECT_EQ(call("GET", "/v1/sandboxes", "", sha256_hex("tok-alice")).status, 401);
  EXPECT_EQ(call("GET", "/v1/sandboxes").status, 200);
  // Refusals are aggregated per source: the first of an interval at once (route, reason,
  // sandbox, never the presented token), the rest as a count when the interval has ended.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/sb-0123456789ab", "", "",
                 {{"Authorization", "Basic dG9rLWFsaWNlOg=="}})
                .status,
            401);
  auto lines = audit_lines();
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& line : lines) {
    EXPECT_EQ(line->getValue<std::string>("action"), "auth.denied");
    EXPECT_EQ(line->getValue<std::string>("token"), "");
    EXPECT_EQ(line->getValue<int>("status"), 401);
    EXPECT_EQ(line->getValue<std::string>("result"), "error");
  }
  EXPECT_EQ(lines[0]->getObject("params")->getValue<std::string>("reason"), "missing");
  EXPECT_EQ(lines[0]->getObject("params")->getValue<std::string>("route"), "/v1/sandboxes");
  EXPECT_EQ(lines[1]->getObject("params")->getValue<int>("count"), 2);
  EXPECT_EQ(lines[2]->getObject("params")->getValue<std::string>("reason"), "not_bearer");
  EXPECT_EQ(lines[2]->getObject("params")->getValue<std::string>("method"), "DELETE");
  EXPECT_EQ(lines[2]->getObject("params")->getValue<std::string>("route"), "/v1/sandboxes/{id}");
  EXPECT_EQ(lines[2]->getValue<std::string>("sandbox"), "sb-0123456789ab");
  std::ifstream raw_in(config_.audit_file);
  std::string raw((std::istreambuf_iterator<char>(raw_in)), std::istreambuf_iterator<char>());
  for (const std::string& secret :
       {std::string("tok-mallory"), sha256_hex("tok-alice"), std::string("dG9rLWFsaWNlOg")}) {
    EXPECT_EQ(raw.find(secret), std::string::npos) << secret;
  }

  auto nope = call("GET", "/v1/nope");
  EXPECT_EQ(nope.status, 404);
  EXPECT_EQ(error_code(nope), "not_found");
  auto wrong = call("PATCH", "/v1/sandboxes/sb-000000000000");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.headers["Allow"], "GET, DELETE");
  EXPECT_EQ(error_code(wrong), "method_not_allowed");

  auto metrics = call("GET", "/metrics", "", "");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("pvs_manager_ready 1\n"), std::string::npos);
  EXPECT_NE(metrics.body.find(
                "pvs_http_requests_total{method=\"GET\",route=\"/v1/sandboxes\",status=\"401\"} 3"),
            std::string::npos)
      << metrics.body;
}

TEST_F(ApiTest, LifecycleOwnershipAndAudit) {
  auto r = call("POST", "/v1/sandboxes",
                R"({"cpus":2,"memory_mb":1024,"internet":false,"ttl_seconds":600,
                    "labels":{"team":"ml"},"hostname":"agent-1"})");
  ASSERT_EQ(r.status, 201) << r.body;
  auto sb = json(r.body);
  std::string id = sb->getValue<std::string>("id");
  EXPECT_EQ(r.headers["Location"], "/v1/sandboxes/" + id);
  EXPECT_EQ(sb->getValue<std::string>("hostname"), "agent-1");
  EXPECT_EQ(sb->getValue<std::string>("state"), "ready");
  EXPECT_EQ(sb->getValue<int>("cpus"), 2);
  EXPECT_EQ(sb->getValue<std::string>("owner"), "alice");
  EXPECT_FALSE(sb->isNull("expires_at"));
  // The audit line is on disk by the time the reply arrived.
  auto lines = audit_lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]->getValue<std::string>("action"), "sandbox.create");
  EXPECT_EQ(lines[0]->getValue<std::string>("token"), "alice");
  EXPECT_EQ(lines[0]->getValue<std::string>("sandbox"), id);
  EXPECT_EQ(lines[0]->getValue<int>("status"), 201);
  EXPECT_EQ(lines[0]->getObject("params")->getValue<int>("cpus"), 2);

  auto show = call("GET", "/v1/sandboxes/" + id);
  EXPECT_EQ(show.status, 200);
  EXPECT_EQ(json(show.body)->getValue<std::string>("id"), id);
  // Another token does not see it; an admin token does.
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + id, "", "tok-bob").status, 404);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id, "", "tok-bob").status, 404);
  EXPECT_EQ(json(call("GET", "/v1/sandboxes", "", "tok-bob").body)->getArray("sandboxes")->size(),
            0u);
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + id, "", "tok-root").status, 200);

  std::string other = create(R"({"labels":{"team":"web"}})");
  auto all = json(call("GET", "/v1/sandboxes").body)->getArray("sandboxes");
  EXPECT_EQ(all->size(), 2u);
  auto ml = json(call("GET", "/v1/sandboxes?label=team%3Dml").body)->getArray("sandboxes");
  ASSERT_EQ(ml->size(), 1u);
  EXPECT_EQ(ml->getObject(0)->getValue<std::string>("id"), id);
  EXPECT_EQ(call("GET", "/v1/sandboxes?label=team").status, 400);
  EXPECT_EQ(call("GET", "/v1/sandboxes?owner=x").status, 400);

  auto del = call("DELETE", "/v1/sandboxes/" + id);
  EXPECT_EQ(del.status, 204);
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + id).status, 404);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 404);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + other).status, 204);
  EXPECT_TRUE(stack_->containers().empty());
  lines = audit_lines();
  EXPECT_EQ(lines.back()->getValue<std::string>("action"), "sandbox.destroy");
  int destroys = 0, refused = 0;
  for (auto& l : lines) {
    if (l->getValue<std::string>("action") != "sandbox.destroy") continue;
    ++destroys;
    refused += l->getValue<std::string>("result") == "error";
  }
  EXPECT_EQ(destroys, 4);  // bob's, id twice, other
  EXPECT_EQ(refused, 2);   // bob's and the second one (404)
  auto metrics = call("GET", "/metrics", "", "").body;
  EXPECT_NE(metrics.find("pvs_sandbox_creates_total 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("pvs_sandboxes_live 0\n"), std::string::npos);
  // The Manager's calls to Proxmox (requests and tasks) and to the agent, as histograms.
  auto count_of = [&metrics](const std::string& series) {
    auto at = metrics.find("\n" + series + " ");
    return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + series.size() + 2));
  };
  for (const char* peer : {"pvs_proxmox_request", "pvs_proxmox_task", "pvs_agent_request"}) {
    std::string name = peer;
    EXPECT_GT(count_of(name + "_duration_seconds_count"), 0) << name << "\n" << metrics;
    EXPECT_EQ(count_of(name + "_duration_seconds_bucket{le=\"+Inf\"}"),
              count_of(name + "_duration_seconds_count"))
        << name;
    EXPECT_GT(count_of(name + "_duration_seconds_sum"), 0) << name;
    EXPECT_NE(metrics.find("# TYPE " + name + "_errors_total counter\n"), std::string::npos);
  }
  // Clone, start, destroy... of two sandboxes: at least 3 tasks each.
  EXPECT_GE(count_of("pvs_proxmox_task_duration_seconds_count"), 6);
}

TEST_F(ApiTest, InvalidInputIsRejectedWithTheRightStatus) {
  struct Case {
    std::string method, uri, body;
    int status;
    std::string code;
  };
  std::string big(8192, 'x');
  std::vector<Case> cases = {
      {"POST", "/v1/sandboxes", "{", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", "[]", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"cpus":"2"})", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"cpus":1.5})", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"cpus":1000})", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"memroy_mb":512})", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"hostname":"-x"})", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", R"({"labels":{"k":1}})", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes", "{\"hostname\":\"" + big + "\"}", 413, "too_large"},
      {"GET", "/v1/sandboxes/sb-000000000000", "", 404, "not_found"},
      {"GET", "/v1/sandboxes/not-an-id", "", 400, "invalid_argument"},
      {"DELETE", "/v1/sandboxes/sb-000000000000", "", 404, "not_found"},
      {"POST", "/v1/sandboxes/sb-000000000000/exec", R"({"command":"ls"})", 404, "not_found"},
      {"POST", "/v1/sandboxes/sb-000000000000/exec", R"({"cmd":"ls"})", 400, "invalid_argument"},
      {"PUT", "/v1/sandboxes/sb-000000000000/internet", R"({"enabled":"yes"})", 400,
       "invalid_argument"},
      {"POST", "/v1/sandboxes/sb-000000000000/ttl", R"({"ttl_seconds":-1})", 400,
       "invalid_argument"},
      {"GET", "/v1/sandboxes/sb-000000000000/files", "", 400, "invalid_argument"},
      {"GET", "/v1/sandboxes/sb-000000000000/files?path=rel", "", 400, "invalid_argument"},
      {"POST", "/v1/sandboxes/sb-000000000000/snapshots", R"({"name":"1x"})", 400,
       "invalid_argument"},
      {"POST", "/v1/sandboxes/sb-000000000000/snapshots/x!/rollback", "", 400, "invalid_argument"},
  };
  for (const auto& c : cases) {
    auto r = call(c.method, c.uri, c.body);
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.uri << " " << c.body.substr(0, 60)
                                  << " -> " << r.body;
    EXPECT_EQ(error_code(r), c.code) << c.uri;
  }
  auto type = call("POST", "/v1/sandboxes", "cpus=1", "tok-alice",
                   {{"Content-Type", "application/x-www-form-urlencoded"}});
  EXPECT_EQ(type.status, 415);
  // A huge declared body is refused before it is read.
  Poco::Net::HTTPClientSession session("127.0.0.1", port_);
  Poco::Net::HTTPRequest req("POST", "/v1/sandboxes", Poco::Net::HTTPMessage::HTTP_1_1);
  req.set("Authorization", "Bearer tok-alice");
  req.setContentType("application/json");
  req.setContentLength64(Poco::Int64(10) << 30);
  session.sendRequest(req) << "{";
  Poco::Net::HTTPResponse resp;
  std::string body;
  Poco::StreamCopier::copyToString(session.receiveResponse(resp), body);
  EXPECT_EQ(resp.getStatus(), 413);
  EXPECT_TRUE(stack_->containers().empty());
}

TEST_F(ApiTest, KeepAliveSurvivesUnreadBodiesAndErrors) {
  Poco::Net::HTTPClientSession session("127.0.0.1", port_);
  session.setKeepAlive(true);
  for (int i = 0; i < 3; ++i) {
    Poco::Net::HTTPRequest req("POST", "/v1/nope", Poco::Net::HTTPMessage::HTTP_1_1);
    req.set("Authorization", "Bearer tok-alice");
    std::string body = R"({"some":"body the handler never reads"})";
    req.setContentLength(static_cast<std::streamsize>(body.size()));
    session.sendRequest(req) << body;
    Poco::Net::HTTPResponse resp;
    std::string out;
    Poco::StreamCopier::copyToString(session.receiveResponse(resp), out);
    EXPECT_EQ(resp.getStatus(), 404);
    Poco::Net::HTTPRequest get("GET", "/v1/sandboxes", Poco::Net::HTTPMessage::HTTP_1_1);
    get.set("Authorization", "Bearer tok-alice");
    session.sendRequest(get);
    Poco::StreamCopier::copyToString(session.receiveResponse(resp), out);
    EXPECT_EQ(resp.getStatus(), 200) << out;
  }
}

TEST_F(ApiTest, PerTokenLimit) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(create());
  auto r = call("POST", "/v1/sandboxes", "{}");
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(error_code(r), "limit_exceeded");
  EXPECT_EQ(call("POST", "/v1/sandboxes", "{}", "tok-bob").status, 201);  // bob has his own
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + ids[0]).status, 204);
  EXPECT_EQ(call("POST", "/v1/sandboxes", "{}").status, 201);
}

TEST_F(ApiTest, InternetTtlAndSnapshots) {
  std::string id = create(R"({"internet":false})");
  auto info = json(call("GET", "/v1/sandboxes/" + id).body);
  std::string address = info->getValue<std::string>("address");
  EXPECT_TRUE(stack_->internet_set().empty());
  auto on = call("PUT", "/v1/sandboxes/" + id + "/internet", R"({"enabled":true})");
  ASSERT_EQ(on.status, 200) << on.body;
  EXPECT_TRUE(json(on.body)->getValue<bool>("internet"));
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{address});
  auto off = call("PUT", "/v1/sandboxes/" + id + "/internet", R"({"enabled":false})");
  ASSERT_EQ(off.status, 200);
  EXPECT_TRUE(stack_->internet_set().empty());

  auto ttl = call("POST", "/v1/sandboxes/" + id + "/ttl", R"({"ttl_seconds":7200})");
  ASSERT_EQ(ttl.status, 200) << ttl.body;
  EXPECT_NE(json(ttl.body)->getValue<std::string>("expires_at"),
            info->getValue<std::string>("expires_at"));
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + id + "/ttl", R"({"ttl_seconds":99999999})").status,
            400);

  auto snap = call("POST", "/v1/sandboxes/" + id + "/snapshots",
                   R"({"name":"before","description":"clean state"})");
  ASSERT_EQ(snap.status, 201) << snap.body;
  auto list = json(call("GET", "/v1/sandboxes/" + id + "/snapshots").body)->getArray("snapshots");
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->getObject(0)->getValue<std::string>("name"), "before");
  auto rb = call("POST", "/v1/sandboxes/" + id + "/snapshots/before/rollback");
  EXPECT_EQ(rb.status, 200) << rb.body;
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + id + "/snapshots/nosuch/rollback").status, 404);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id + "/snapshots/nosuch").status, 404);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id + "/snapshots/before").status, 204);
  EXPECT_EQ(
      json(call("GET", "/v1/sandboxes/" + id + "/snapshots").body)->getArray("snapshots")->size(),
      0u);
  auto actions = audit_lines();
  std::vector<std::string> names;
  for (auto& l : actions) names.push_back(l->getValue<std::string>("action"));
  EXPECT_EQ(std::count(names.begin(), names.end(), "sandbox.internet"), 2);
  EXPECT_EQ(std::count(names.begin(), names.end(), "sandbox.snapshot"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "sandbox.rollback"), 2);
}

// Usage over time: Proxmox's RRD rows since the create (pvesim's step cut to a second), then
// the live sample; a window cuts either off; bad windows are 400; another's sandbox is 404.
TEST_F(ApiTest, UsageOverTime) {
  stack_->sim().set_rrd_step_seconds(1);
  std::string id = create();
  std::string path = "/v1/sandboxes/" + id + "/usage";
  Poco::JSON::Array::Ptr samples;
  for (int i = 0; i < 100; ++i) {  // until a whole step has passed since the create
    auto r = call("GET", path);
    ASSERT_EQ(r.status, 200) << r.body;
    samples = json(r.body)->getArray("samples");
    if (samples->size() >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GE(samples->size(), 2u);
  auto sample = [&](std::size_t i) { return samples->getObject(static_cast<unsigned>(i)); };
  for (std::size_t i = 0; i < samples->size(); ++i) {
    EXPECT_EQ(sample(i)->getValue<bool>("live"), i + 1 == samples->size());
    EXPECT_EQ(sample(i)->getValue<double>("cpus"), 1);
    EXPECT_EQ(sample(i)->getValue<Poco::Int64>("maxmem"), 512LL << 20);
    EXPECT_GT(sample(i)->getValue<Poco::Int64>("maxdisk"), 0);
    if (i > 0) {
      EXPECT_GE(sample(i)->getValue<Poco::Int64>("time"),  // the live one may share a second
                sample(i - 1)->getValue<Poco::Int64>("time"));
    }
  }
  // Up to the first step: that step (and the live sample only if now is still that second).
  Poco::Int64 first = sample(0)->getValue<Poco::Int64>("time");
  auto cut = json(call("GET", path + "?until=" + std::to_string(first)).body)->getArray("samples");
  ASSERT_GE(cut->size(), 1u);
  EXPECT_FALSE(cut->getObject(0)->getValue<bool>("live"));
  for (std::size_t i = 0; i < cut->size(); ++i) {
    EXPECT_LE(cut->getObject(static_cast<unsigned>(i))->getValue<Poco::Int64>("time"), first);
    EXPECT_EQ(cut->getObject(static_cast<unsigned>(i))->getValue<bool>("live"), i == 1);
  }
  std::string later = std::to_string(first + 3600);
  auto live = json(call("GET", path + "?since=" + later).body)->getArray("samples");
  EXPECT_EQ(live->size(), 0u);  // from after now: not even the live sample
  EXPECT_EQ(json(call("GET", path + "?since=1&until=2").body)->getArray("samples")->size(), 0u);
  for (const char* bad : {"?since=x", "?until=-1", "?since=5&until=4"}) {
    auto r = call("GET", path + bad);
    EXPECT_EQ(r.status, 400) << bad << r.body;
    EXPECT_EQ(error_code(r), "invalid_argument") << r.body;
  }
  EXPECT_EQ(call("GET", path, "", "tok-bob").status, 404);
}

TEST_F(ApiTest, ThirtyTwoClientsAtOnce) {
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 32; ++i) {
    clients.emplace_back([&, i] {
      auto r = http(port_, "POST", "/v1/sandboxes",
                    "{\"labels\":{\"client\":\"" + std::to_string(i) + "\"}}", "tok-bob");
      if (r.status != 201) {
        ADD_FAILURE() << r.status << " " << r.body;
        return;
      }
      std::string id = json(r.body)->getValue<std::string>("id");
      auto g = http(port_, "GET", "/v1/sandboxes/" + id, "", "tok-bob");
      auto d = http(port_, "DELETE", "/v1/sandboxes/" + id, "", "tok-bob");
      if (g.status == 200 && d.status == 204) ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 32);
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_EQ(json(call("GET", "/v1/sandboxes", "", "tok-root").body)->getArray("sandboxes")->size(),
            0u);
}

TEST_F(ApiTest, RestartKeepsLiveSandboxes) {
  std::string a = create(R"({"labels":{"keep":"1"}})");
  std::string b = create(R"({"internet":true})");
  // The old Manager is kept until its sandboxes are gone (it holds them; see the report on
  // the Manager's Sandbox<->core reference cycle), the service restarts on a new one.
  auto old_manager = api_->manager();
  stop();
  start();
  auto list = json(call("GET", "/v1/sandboxes").body)->getArray("sandboxes");
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + a).status, 200);
  auto sb = json(call("GET", "/v1/sandboxes/" + b).body);
  EXPECT_TRUE(sb->getValue<bool>("internet"));
  EXPECT_EQ(stack_->internet_set().size(), 1u);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + a).status, 204);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + b).status, 204);
  EXPECT_TRUE(stack_->internet_set().empty());
  EXPECT_TRUE(old_manager->reconcile());  // forgets the vanished sandboxes
  EXPECT_TRUE(old_manager->list().empty());
}

TEST_F(ApiTest, StartingServiceAnswers503) {
  api_->set_manager(nullptr);
  auto h = call("GET", "/v1/health", "", "");
  EXPECT_EQ(h.status, 503);
  EXPECT_EQ(json(h.body)->getValue<std::string>("status"), "starting");
  auto l = call("GET", "/v1/sandboxes");
  EXPECT_EQ(l.status, 503);
  EXPECT_EQ(error_code(l), "unavailable");
}

}  // namespace
}  // namespace pvs::service
