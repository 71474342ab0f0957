#include "core/observability/audit.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <Poco/JSON/Parser.h>

#include "service/support/audit_file_fixture.h"

namespace pvs::service {
namespace {

class AuditTest : public test::AuditFileTest {
 protected:
  std::vector<std::string> lines() {
    std::ifstream in(path_);
    std::vector<std::string> out;
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }
};

TEST_F(AuditTest, OneJsonLinePerRecordVisibleImmediately) {
  auto log = AuditLog::open(path_, false);
  ASSERT_TRUE(log) << log.error().message;
  AuditRecord r;
  r.request_id = "r1";
  r.token = "ci";
  r.remote = "127.0.0.1";
  r.action = "sandbox.create";
  r.sandbox = "sb-0123456789ab";
  r.params_json = R"({"cpus":1})";
  r.status = 201;
  r.duration_ms = 12;
  ASSERT_TRUE((*log)->append(r));
  auto l = lines();  // read back without closing: it was flushed by append()
  ASSERT_EQ(l.size(), 1u);
  auto v = Poco::JSON::Parser().parse(l[0]).extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(v->getValue<std::string>("token"), "ci");
  EXPECT_EQ(v->getValue<std::string>("action"), "sandbox.create");
  EXPECT_EQ(v->getValue<std::string>("result"), "ok");
  EXPECT_EQ(v->getValue<int>("status"), 201);
  EXPECT_EQ(v->getObject("params")->getValue<int>("cpus"), 1);
  EXPECT_EQ(v->getValue<std::string>("time").size(), 24u);

  r.error_code = "not_found";
  r.error_message = "no such sandbox";
  r.status = 404;
  ASSERT_TRUE((*log)->append(r));
  l = lines();
  ASSERT_EQ(l.size(), 2u);
  v = Poco::JSON::Parser().parse(l[1]).extract<Poco::JSON::Object::Ptr>();
  EXPECT_EQ(v->getValue<std::string>("result"), "error");
  EXPECT_EQ(v->getObject("error")->getValue<std::string>("code"), "not_found");

  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST_F(AuditTest, ConcurrentAppendsNeverInterleaveAndReopenFollowsRotation) {
  auto log = AuditLog::open(path_, true);
  ASSERT_TRUE(log);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        AuditRecord r;
        r.action = "sandbox.exec";
        r.params_json = "{\"command_bytes\":" + std::to_string(t * 1000 + i) + "}";
        ASSERT_TRUE((*log)->append(r));
      }
    });
  }
  for (auto& t : threads) t.join();
  auto l = lines();
  ASSERT_EQ(l.size(), 400u);
  for (const auto& line : l) EXPECT_NO_THROW(Poco::JSON::Parser().parse(line)) << line;
  ASSERT_EQ(rename(path_.c_str(), (path_ + ".1").c_str()), 0);
  ASSERT_TRUE((*log)->reopen());
  ASSERT_TRUE((*log)->append(AuditRecord{}));
  EXPECT_EQ(lines().size(), 1u);
}

TEST(Audit, TimeFormat) {
  EXPECT_EQ(format_rfc3339_ms(1795360000123), "2026-11-22T15:06:40.123Z");
}

TEST(Audit, OpenFailsLoudly) {
  auto log = AuditLog::open("/nonexistent-dir/audit.log", false);
  ASSERT_FALSE(log);
  EXPECT_NE(log.error().message.find("/nonexistent-dir/audit.log"), std::string::npos);
}

}  // namespace
}  // namespace pvs::service
