// GET /v1/audit through the real HTTP server (Api + HttpServer; the audit tail needs no
// Manager): admin only, limit and filters, newest last, the calls' own 401s on record, and
// 404 without an audit log; `sandboxctl audit` on it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <Poco/JSON/Parser.h>

#include "app/api.h"
#include "http/auth.h"
#include "service/support/http_client.h"
#include "service/support/in_process_fixture.h"
#include "support/sshd_fixture.h"

namespace pvs::service {
namespace {

class AuditApiTest : public test::InProcessServiceTest {
 protected:
  void start(bool with_audit) {
    config_.listen_port = 0;
    config_.audit_file = ::testing::TempDir() + "/audit-api-" + std::to_string(::getpid()) + ".log";
    std::remove(config_.audit_file.c_str());
    config_.tokens = {{"root", sha256_hex("tok-admin"), 0, true},
                      {"agent", sha256_hex("tok-agent"), 0, false}};
    serve(nullptr, with_audit);
  }
  void append(const std::string& action, const std::string& sandbox, int status) {
    AuditRecord r;
    r.request_id = "r-" + std::to_string(++n_);
    r.token = "root";
    r.action = action;
    r.sandbox = sandbox;
    r.status = status;
    ASSERT_TRUE(svc_->audit()->append(r));
  }
  // The records of a 200 reply, as objects.
  static Poco::JSON::Array::Ptr records(const test::HttpReply& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    Poco::JSON::Parser p;
    auto obj = p.parse(r.body).extract<Poco::JSON::Object::Ptr>();
    EXPECT_FALSE(obj->getValue<bool>("truncated"));
    return obj->getArray("records");
  }

  int n_ = 0;
};

TEST_F(AuditApiTest, AdminReadsTheTailWithFilters) {
  start(true);
  for (int i = 0; i < 150; ++i) {
    append(i % 10 == 0 ? "sandbox.create" : "sandbox.exec",
           i % 2 ? "sb-00000000000b" : "sb-00000000000a", 200);
  }
  auto all = records(test::http(port_, "GET", "/v1/audit", "", "tok-admin"));
  ASSERT_EQ(all->size(), 100u);                                                 // the default limit
  EXPECT_EQ(all->getObject(99)->getValue<std::string>("request_id"), "r-150");  // newest last
  EXPECT_EQ(all->getObject(0)->getValue<std::string>("request_id"), "r-51");

  auto three = records(test::http(port_, "GET", "/v1/audit?limit=3", "", "tok-admin"));
  ASSERT_EQ(three->size(), 3u);
  EXPECT_EQ(three->getObject(2)->getValue<std::string>("request_id"), "r-150");

  auto creates = records(
      test::http(port_, "GET", "/v1/audit?limit=1000&action=sandbox.create", "", "tok-admin"));
  ASSERT_EQ(creates->size(), 15u);
  for (std::size_t i = 0; i < creates->size(); ++i)
    EXPECT_EQ(creates->getObject(i)->getValue<std::string>("action"), "sandbox.create");
  auto both = records(test::http(port_, "GET",
                                 "/v1/audit?action=sandbox.create&sandbox=sb-00000000000a&limit=2",
                                 "", "tok-admin"));
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ(both->getObject(1)->getValue<std::string>("request_id"), "r-141");
  EXPECT_EQ(records(test::http(port_, "GET", "/v1/audit?sandbox=sb-000000000999", "", "tok-admin"))
                ->size(),
            0u);

  for (const char* bad :
       {"limit=0", "limit=1001", "limit=x", "limit=-1", "action=a%22b", "sandbox=a%20b"}) {
    EXPECT_EQ(test::http(port_, "GET", std::string("/v1/audit?") + bad, "", "tok-admin").status,
              400)
        << bad;
  }
}

TEST_F(AuditApiTest, AdminOnly) {
  start(true);
  append("sandbox.create", "sb-00000000000a", 201);
  auto other = test::http(port_, "GET", "/v1/audit", "", "tok-agent");
  EXPECT_EQ(other.status, 403);
  EXPECT_NE(other.body.find("permission_denied"), std::string::npos);
  EXPECT_EQ(test::http(port_, "GET", "/v1/audit").status, 401);
  // The refused call is itself on record, and the admin sees it as the newest line.
  auto last = records(test::http(port_, "GET", "/v1/audit?limit=1", "", "tok-admin"));
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ(last->getObject(0)->getValue<std::string>("action"), "auth.denied");
}

TEST_F(AuditApiTest, SandboxctlAuditPrintsTheTail) {
  start(true);
  for (int i = 0; i < 5; ++i)
    append(i == 3 ? "sandbox.create" : "sandbox.exec", "sb-00000000000a", 200);
  auto ctl = [&](std::vector<std::string> args, const std::string& token) {
    std::vector<std::string> argv = {PVS_SANDBOXCTL_BIN, "--url",
                                     "http://127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_captured(argv, ::testing::TempDir(), "",
                              {"SANDBOXCTL_TOKEN=" + token, "HOME=" + ::testing::TempDir()});
  };
  auto table = ctl({"audit", "--limit", "2"}, "tok-admin");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out.find("TIME"), 0u) << table.out;
  EXPECT_NE(table.out.find("sandbox.create"), std::string::npos) << table.out;
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), 3) << table.out;
  auto creates = ctl({"--json", "audit", "--action", "sandbox.create"}, "tok-admin");
  ASSERT_EQ(creates.exit_code, 0) << creates.err;
  Poco::JSON::Parser p;
  auto list = p.parse(creates.out).extract<Poco::JSON::Object::Ptr>()->getArray("records");
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->getObject(0)->getValue<std::string>("request_id"), "r-4");
  auto refused = ctl({"audit"}, "tok-agent");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("admin"), std::string::npos) << refused.err;
  EXPECT_EQ(ctl({"audit", "--since", "1h"}, "tok-admin").exit_code, 2);
}

TEST_F(AuditApiTest, NoAuditLogIsNotFound) {
  start(false);
  auto r = test::http(port_, "GET", "/v1/audit", "", "tok-admin");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("no audit file configured"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace pvs::service
