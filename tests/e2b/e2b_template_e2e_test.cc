// E2B's template builds end to end with the unmodified `e2b` SDK (2.51.0, pinned by
// tests/e2b/client/package-lock.json): client/e2b_template_client.mjs builds a template with
// Template.build (a COPY of a file uploaded to the controller's own one-time link, a RUN),
// creates a sandbox from it and finds both at its first command, then checks that failures
// reach the SDK with their log. pvesim's netns stand-in shares this machine's file system as
// the stack's user, so every file a build writes is under a directory of the stack's. This
// test checks the audit log and that nothing is left. Without node or npm it fails.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/auth.h"
#include "service/support/controller_fixture.h"
#include "service/support/node_e2e_support.h"
#include "support/stack_fixture.h"

#ifndef PVS_CONTROLLER_BIN
#error "PVS_CONTROLLER_BIN, PVS_E2B_CLIENT_DIR and PVS_E2B_NODE_DIR must be defined"
#endif

namespace pvs::service {
namespace {

constexpr const char* kAdminKey = "e2b_00112233445566778899aabbccddeeff";
constexpr const char* kAgentKey = "e2b_ffeeddccbbaa99887766554433221100";

std::string report(const test::ProcessResult& p) {
  return "exit " + std::to_string(p.exit_code) + "\nstdout:\n" + p.out + "stderr:\n" + p.err;
}

class E2bTemplateE2eTest : public test::ControllerOnStackTest {
 protected:
  static void SetUpTestSuite() {
    install_error_ = test::npm_install_once(PVS_E2B_CLIENT_DIR, PVS_E2B_NODE_DIR,
                                            "e2b_template_client.mjs", "e2b");
  }
  static inline std::string install_error_;

  void SetUp() override {
    ASSERT_TRUE(install_error_.empty()) << install_error_;
    start(PVS_CONTROLLER_BIN,
          std::string() + "auth:\n  tokens:\n" + "    - {name: builder, sha256: " +
              sha256_hex("tok-builder") + ", e2b_key_sha256: " + sha256_hex(kAdminKey) +
              ", admin: true}\n" + "    - {name: agent, sha256: " + sha256_hex("tok-agent") +
              ", e2b_key_sha256: " + sha256_hex(kAgentKey) + "}\n");
    work_ = dir_ + "/tpl";
    ASSERT_EQ(::mkdir(work_.c_str(), 0755), 0);
    auto* pw = ::getpwnam(stack_->user().c_str());
    ASSERT_TRUE(pw);
    ASSERT_EQ(::chown(work_.c_str(), pw->pw_uid, pw->pw_gid), 0);
  }
  std::string work_;
};

TEST_F(E2bTemplateE2eTest, UnmodifiedSdkBuildsATemplateAndCreatesFromIt) {
  std::string base = "http://127.0.0.1:" + std::to_string(port_);
  auto r = test::run_captured(
      {"node", std::string(PVS_E2B_NODE_DIR) + "/e2b_template_client.mjs"}, dir_, "",
      {"E2B_API_URL=" + base + "/e2b", "E2B_SANDBOX_URL=" + base + "/e2b/envd",
       std::string("E2B_API_KEY=") + kAdminKey, std::string("PVS_E2B_OTHER_KEY=") + kAgentKey,
       "PVS_URL=" + base, "PVS_ADMIN=tok-builder", "PVS_WORK=" + work_});
  EXPECT_EQ(r.exit_code, 0) << report(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << report(r);
  EXPECT_NE(r.out.find("ok the copied file and the RUN step are there at the first command"),
            std::string::npos)
      << report(r);
  // The files the builds wrote are where the test put them, and only there.
  EXPECT_EQ(test::slurp(work_ + "/files/hello.txt"), "hello from the sdk\n");
  EXPECT_EQ(test::slurp(work_ + "/first.out"), "ok\n");  // the broken build's first RUN ran
  EXPECT_EQ(test::slurp(work_ + "/docker.out"), "hello from the sdk\n");  // fromDockerfile

  // The start and the outcome of each build are on record under the key's token.
  std::string audit = test::slurp(dir_ + "/audit.log");
  EXPECT_NE(audit.find("\"action\":\"e2b.template.build\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"action\":\"e2b.template.built\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"token\":\"builder\""), std::string::npos);
  EXPECT_EQ(audit.find(kAdminKey), std::string::npos);
  // Failed builds left no container, the built template was deleted, the sandbox killed.
  EXPECT_TRUE(stack_->containers().empty());
}

}  // namespace
}  // namespace pvs::service
