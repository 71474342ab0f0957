// pvesim's wire behaviour as a raw HTTPS client sees it: envelope, reason phrases, 401/501,
// Connection: close after errors, schema validation messages, the control endpoint.
#include <gtest/gtest.h>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/AcceptCertificateHandler.h>
#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/HTTPSClientSession.h>
#include <Poco/StreamCopier.h>

#include <algorithm>
#include <sstream>

#include "schema.h"
#include "sim.h"
#include "support/eventually.h"
#include "timing.h"

namespace {

constexpr const char* kAuth = "PVEAPIToken=root@pam!test=secret-uuid";

struct Answer {
  int status = 0;
  std::string reason, body, connection;
};

class PvesimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pvesim::Options options;
    options.tokens["root@pam!test"] = "secret-uuid";
    options.auth_delay_ms = 10;
    options.default_task_ms = 10;
    options.rrd_step_seconds = 1;
    auto sim = pvesim::Simulator::start(options);
    ASSERT_TRUE(sim) << sim.error().to_string();
    sim_ = std::move(*sim);
    context_ = new Poco::Net::Context(Poco::Net::Context::TLS_CLIENT_USE, "", "", "",
                                      Poco::Net::Context::VERIFY_NONE);
  }

  Answer request(const std::string& method, const std::string& path, const std::string& body = "",
                 const char* auth = kAuth,
                 const std::string& type = "application/x-www-form-urlencoded") {
    Poco::Net::HTTPSClientSession session("127.0.0.1", static_cast<Poco::UInt16>(sim_->port()),
                                          context_);
    Poco::Net::HTTPRequest req(method, path, Poco::Net::HTTPMessage::HTTP_1_1);
    if (auth) req.set("Authorization", auth);
    if (!body.empty()) {
      req.setContentType(type);
      req.setContentLength(static_cast<std::streamsize>(body.size()));
    }
    session.sendRequest(req) << body;
    Poco::Net::HTTPResponse resp;
    std::istream& in = session.receiveResponse(resp);
    Answer a;
    // Not getStatus(): 595/596 are no HTTPStatus enumerators (UBSan flags the load).
    std::ostringstream head;
    resp.write(head);
    a.status = std::stoi(head.str().substr(head.str().find(' ') + 1, 3));
    a.reason = resp.getReason();
    a.connection = resp.get("Connection", "");
    std::ostringstream os;
    Poco::StreamCopier::copyStream(in, os);
    a.body = os.str();
    return a;
  }

  // Polls GET `path` (under /api2/json/nodes/pve/lxc/) until its body has `needle` and, when
  // asked, no lock: a task's end is awaited, never assumed after a sleep. 30 s at most.
  bool await_body(const std::string& path, const std::string& needle, bool unlocked = false) {
    std::string body;
    if (pvs::test::eventually([&] {
          body = request("GET", "/api2/json/nodes/pve/lxc/" + path).body;
          return body.find(needle) != std::string::npos &&
                 (!unlocked || body.find(R"("lock")") == std::string::npos);
        }))
      return true;
    ADD_FAILURE() << path << " never showed " << needle << (unlocked ? " unlocked: " : ": ")
                  << body;
    return false;
  }

  std::unique_ptr<pvesim::Simulator> sim_;
  Poco::Net::Context::Ptr context_;
};

TEST_F(PvesimTest, EnvelopeAndNextIdAsString) {
  auto a = request("GET", "/api2/json/cluster/nextid");
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, R"({"data":"100"})");
  auto v = request("GET", "/api2/json/version");
  EXPECT_NE(v.body.find(R"("release":"9.1")"), std::string::npos);
}

TEST_F(PvesimTest, AuthenticationFailures) {
  auto none = request("GET", "/api2/json/cluster/nextid", "", nullptr);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.reason, "No ticket");
  EXPECT_EQ(none.body, "");
  auto bad = request("GET", "/api2/json/cluster/nextid", "", "PVEAPIToken=root@pam!test=nope");
  EXPECT_EQ(bad.status, 401);
  EXPECT_EQ(bad.reason, "Authentication failed!");
  // The secret is split at the last '=' and may be URI-escaped.
  auto escaped =
      request("GET", "/api2/json/cluster/nextid", "", "PVEAPIToken=root%40pam!test=secret-uuid");
  EXPECT_EQ(escaped.status, 200);
}

TEST_F(PvesimTest, BodyOnGetOrDeleteIs501) {
  auto del = request("DELETE", "/api2/json/nodes/pve/lxc/9000", "purge=1");
  EXPECT_EQ(del.status, 501);
  EXPECT_EQ(del.reason, "Unexpected content for method 'DELETE'");
  EXPECT_EQ(del.connection, "Close");
  auto get = request("GET", "/api2/json/cluster/nextid", "vmid=100");
  EXPECT_EQ(get.status, 501);
}

TEST_F(PvesimTest, UnknownPathIs501AndMissingGuestIs500) {
  auto a = request("GET", "/api2/json/nodes/pve/lxc/9000/frobnicate");
  EXPECT_EQ(a.status, 501);
  EXPECT_EQ(a.reason, "Method 'GET /api2/json/nodes/pve/lxc/9000/frobnicate' not implemented");
  auto m = request("GET", "/api2/json/nodes/pve/lxc/4242/status/current");
  EXPECT_EQ(m.status, 500);
  EXPECT_EQ(m.reason, "Configuration file 'nodes/pve/lxc/4242.conf' does not exist");
  EXPECT_EQ(m.connection, "Close");
  EXPECT_NE(m.body.find(R"("data":null)"), std::string::npos);
}

TEST_F(PvesimTest, SchemaValidationMessages) {
  auto a = request("POST", "/api2/json/nodes/pve/lxc/9000/clone", "newid=12&full=true&foo=1");
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.reason, "Parameter verification failed.");
  EXPECT_NE(a.body.find(R"("newid":"value must have a minimum value of 100")"), std::string::npos);
  EXPECT_NE(a.body.find(R"("full":"type check ('boolean') failed - got 'true'")"),
            std::string::npos);
  EXPECT_NE(a.body.find(R"("foo":"property is not defined in schema)"), std::string::npos);
  auto missing = request("POST", "/api2/json/nodes/pve/lxc/9000/clone", "full=1");
  EXPECT_NE(missing.body.find(R"("newid":"property is missing and it is not optional")"),
            std::string::npos);
  auto node = request("GET", "/api2/json/nodes/bad_node/lxc");
  EXPECT_EQ(node.status, 400);
  // JSON bodies are accepted too, with real booleans.
  auto json = request("POST", "/api2/json/nodes/pve/lxc/9000/clone",
                      R"({"newid":150,"full":false})", kAuth, "application/json");
  EXPECT_EQ(json.status, 200) << json.reason;
  EXPECT_EQ(sim_->schema_rejections(), 3u);
}

TEST_F(PvesimTest, ControlEndpoint) {
  auto f = request(
      "POST", "/_pvesim/faults",
      R"({"rules":[{"method":"GET","path":"/version","status":596,"message":"Connection timed out","count":1}]})",
      nullptr, "application/json");
  EXPECT_EQ(f.status, 200) << f.reason;
  EXPECT_EQ(request("GET", "/api2/json/version").status, 596);
  EXPECT_EQ(request("GET", "/api2/json/version").status, 200);
  auto s = request("GET", "/_pvesim/stats", "", nullptr);
  EXPECT_NE(s.body.find(R"("GET /version":2)"), std::string::npos) << s.body;
  EXPECT_EQ(sim_->count("GET", "/version"), 2u);
}

// A running CT gets at once only what Proxmox hot-plugs; the rest waits for the next start.
TEST_F(PvesimTest, RunningContainerKeepsNonHotplugChangesPending) {
  const std::string running = R"("status":"running")", stopped = R"("status":"stopped")";
  ASSERT_EQ(request("POST", "/api2/json/nodes/pve/lxc/9000/clone", "newid=100").status, 200);
  ASSERT_TRUE(await_body("100/status/current", stopped, true));  // the clone ended
  ASSERT_EQ(request("POST", "/api2/json/nodes/pve/lxc/100/status/start").status, 200);
  ASSERT_TRUE(await_body("100/status/current", running, true));
  auto put = request("PUT", "/api2/json/nodes/pve/lxc/100/config",
                     "cores=2&memory=1024&description=claimed&nameserver=10.0.0.53");
  ASSERT_EQ(put.status, 200) << put.body;
  auto applied = request("GET", "/api2/json/nodes/pve/lxc/100/config?current=1").body;
  EXPECT_NE(applied.find(R"("cores":2)"), std::string::npos) << applied;
  EXPECT_NE(applied.find(R"("memory":1024)"), std::string::npos) << applied;
  EXPECT_NE(applied.find(R"("description":"claimed")"), std::string::npos) << applied;
  EXPECT_EQ(applied.find("nameserver"), std::string::npos) << applied;
  auto shown = request("GET", "/api2/json/nodes/pve/lxc/100/config").body;
  EXPECT_NE(shown.find(R"("nameserver":"10.0.0.53")"), std::string::npos) << shown;
  ASSERT_EQ(request("POST", "/api2/json/nodes/pve/lxc/100/status/stop").status, 200);
  ASSERT_TRUE(await_body("100/status/current", stopped, true));
  ASSERT_EQ(request("POST", "/api2/json/nodes/pve/lxc/100/status/start").status, 200);
  ASSERT_TRUE(await_body("100/status/current", running, true));
  applied = request("GET", "/api2/json/nodes/pve/lxc/100/config?current=1").body;
  EXPECT_NE(applied.find(R"("nameserver":"10.0.0.53")"), std::string::npos) << applied;
}

// rrddata: 70 rows a step apart, the newest at the last whole step; values only for the time
// a CT has run, its time alone otherwise (the template never ran).
TEST_F(PvesimTest, RrdDataHoldsValuesSinceTheStart) {
  EXPECT_EQ(request("GET", "/api2/json/nodes/pve/lxc/9000/rrddata").status, 400);  // timeframe
  EXPECT_EQ(request("GET", "/api2/json/nodes/pve/lxc/9000/rrddata?timeframe=minute").status, 400);
  auto rows = [&](const std::string& query) {
    auto a = request("GET", "/api2/json/nodes/pve/lxc/" + query);
    EXPECT_EQ(a.status, 200) << a.body;
    return Poco::JSON::Parser().parse(a.body).extract<Poco::JSON::Object::Ptr>()->getArray("data");
  };
  auto idle = rows("9000/rrddata?timeframe=hour&cf=AVERAGE");
  ASSERT_EQ(idle->size(), 70u);
  for (std::size_t i = 0; i < idle->size(); ++i) {
    auto row = idle->getObject(static_cast<unsigned>(i));
    EXPECT_EQ(row->size(), 1u);  // {time}
    if (i == 0) continue;
    auto before = idle->getObject(static_cast<unsigned>(i - 1));
    EXPECT_EQ(row->getValue<Poco::Int64>("time") - before->getValue<Poco::Int64>("time"), 1);
  }
  auto day = rows("9000/rrddata?timeframe=day");
  EXPECT_EQ(day->getObject(1)->getValue<Poco::Int64>("time") -
                day->getObject(0)->getValue<Poco::Int64>("time"),
            30);
  ASSERT_EQ(request("POST", "/api2/json/nodes/pve/lxc/9000/clone", "newid=100").status, 200);
  ASSERT_TRUE(await_body("100/status/current", R"("status":"stopped")", true));  // the clone ended
  ASSERT_EQ(request("POST", "/api2/json/nodes/pve/lxc/100/status/start").status, 200);
  ASSERT_TRUE(await_body("100/status/current", R"("status":"running")", true));
  // The step after the start ends within a second: then the newest row has the values.
  ASSERT_TRUE(await_body("100/rrddata?timeframe=hour", R"("maxmem":536870912)"));
  auto ran = rows("100/rrddata?timeframe=hour");
  auto newest = ran->getObject(69);
  EXPECT_EQ(newest->getValue<int>("maxcpu"), 1);
  EXPECT_TRUE(newest->has("cpu") && newest->has("mem") && newest->has("maxdisk"));
  EXPECT_EQ(ran->getObject(0)->size(), 1u);  // 69 s before: not started yet
}

TEST(PvesimSchema, PropertyStringsAndFormats) {
  auto schema = pvesim::Schema::load(PVESIM_SCHEMA_FILE_FOR_TEST);
  ASSERT_TRUE(schema) << schema.error().to_string();
  pvesim::ParamMap path;
  auto* ep = schema->match("PUT", "/nodes/pve/lxc/100/config", &path);
  ASSERT_NE(ep, nullptr);
  EXPECT_EQ(path["vmid"], "100");
  auto ok = schema->validate(
      *ep,
      {{"node", "pve"},
       {"vmid", "100"},
       {"net0",
        "name=eth0,bridge=vmbr1,ip=10.99.0.5/16,gw=10.99.0.1,hwaddr=BC:24:11:00:00:01,firewall=1"},
       {"tags", "a;b,c"},
       {"rootfs", "local-lvm:vm-100-disk-0,size=8G"}});
  EXPECT_TRUE(ok.empty()) << ok.begin()->first << ": " << ok.begin()->second;
  auto bad = schema->validate(*ep, {{"node", "pve"},
                                    {"vmid", "100"},
                                    {"net0", "name=eth0,ip=dhcp,hwaddr=01:00:00:00:00:01"},
                                    {"net32", "name=eth1"},
                                    {"tags", "bad tag!"}});
  EXPECT_EQ(bad.size(), 3u);
  EXPECT_NE(bad["net0"].find("hwaddr"), std::string::npos);
  EXPECT_NE(bad["net32"].find("not defined"), std::string::npos);
  EXPECT_EQ(pvesim::split_list("a, b;c\td"), (std::vector<std::string>{"a", "b", "c", "d"}));
}

// POST .../template answers null and a vztemplate task makes the CT a template; the clone
// lock is per source: a second clone of one source is refused while one of another runs.
TEST_F(PvesimTest, TemplateConversionAndTheCloneLockPerSource) {
  auto unlocked = [&](const std::string& vmid) { await_body(vmid + "/config", "{", true); };
  ASSERT_EQ(request("POST", "/api2/json/nodes/pve/lxc/9000/clone", "newid=100").status, 200);
  unlocked("100");
  auto t = request("POST", "/api2/json/nodes/pve/lxc/100/template");
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.body, R"({"data":null})");
  ASSERT_TRUE(await_body("100/config", R"("template":1)"));
  EXPECT_NE(
      request("GET", "/api2/json/nodes/pve/lxc/100/config").body.find("local-lvm:base-100-disk-0"),
      std::string::npos);
  auto again = request("POST", "/api2/json/nodes/pve/lxc/100/template");
  EXPECT_EQ(again.status, 500);
  EXPECT_EQ(again.reason, "you can't convert a template to a template");

  sim_->hold_tasks("vzclone", true);
  ASSERT_EQ(request("POST", "/api2/json/nodes/pve/lxc/9000/clone", "newid=101").status, 200);
  auto locked = request("POST", "/api2/json/nodes/pve/lxc/9000/clone", "newid=102");
  EXPECT_EQ(locked.status, 500);
  EXPECT_NE(locked.reason.find("CT is locked (disk)"), std::string::npos) << locked.reason;
  ASSERT_EQ(request("POST", "/api2/json/nodes/pve/lxc/100/clone", "newid=102").status, 200);
  auto running = sim_->running_tasks("vzclone");
  std::sort(running.begin(), running.end());
  EXPECT_EQ(running, (std::vector<std::string>{"100", "9000"}));
  sim_->hold_tasks("vzclone", false);
  unlocked("101");
  unlocked("102");
  EXPECT_TRUE(sim_->running_tasks("vzclone").empty());
}

}  // namespace

TEST(Timing, ProfilesNameEveryTaskTheControllerWaitsFor) {
  auto fast = pvesim::timing_profile("fast");
  auto real = pvesim::timing_profile("realistic");
  for (const char* type : {"vzclone", "vzstart", "vzstop", "vzdestroy", "resize", "vzsnapshot",
                           "vzrollback", "vzdelsnapshot", "vztemplate"}) {
    EXPECT_EQ(fast.at(type), 0) << type;
    EXPECT_GE(real.at(type), 500) << type;
  }
  EXPECT_GE(real.at("vzstart"), 1000);  // "one to several seconds"
  EXPECT_TRUE(pvesim::timing_profile("slow").empty());
}
