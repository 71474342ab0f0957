// ApprovalApiTest: an ApiTest in which alice asks and carol, an approver, decides. The netns
// backend (a sandbox runs as a host user, so uploads go to a scratch directory it may write:
// dir_, made by add_approver and removed after), ask() with Prefer: respond-async, approve().
//
//   void adjust_service(ServiceConfig& c) override {
//     add_approver(c);
//     c.policy = test::compiled(...rules naming dir_...);
//   }
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>

#include "service/support/api_fixture.h"

namespace pvs::service {

class ApprovalApiTest : public ApiTest {
 protected:
  test::StackOptions stack_options() override {
    test::StackOptions o;
    o.backend = "netns";
    return o;
  }
  void add_approver(ServiceConfig& c) {
    char tmpl[] = "/tmp/pvs-approvals-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::filesystem::permissions(dir_, std::filesystem::perms::all);         // the sandbox's user
    c.tokens.push_back({"carol", sha256_hex("tok-carol"), 0, false, true});  // an approver
  }
  void TearDown() override {
    ApiTest::TearDown();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // Asks asynchronously; the approval's id (empty unless 202).
  std::string ask(const std::string& method, const std::string& uri, const std::string& body,
                  std::map<std::string, std::string> headers = {},
                  const std::string& token = "tok-alice") {
    headers["Prefer"] = "respond-async";
    auto r = call(method, uri, body, token, headers);
    EXPECT_EQ(r.status, 202) << r.body;
    return r.status == 202 ? json(r.body)->getObject("approval")->getValue<std::string>("id") : "";
  }
  bool approve(const std::string& id) {
    return call("POST", "/v1/approvals/" + id + "/approve", "", "tok-carol").status == 200;
  }
  std::string dir_;
};

}  // namespace pvs::service
