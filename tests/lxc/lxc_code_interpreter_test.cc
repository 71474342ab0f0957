// E2B's code interpreter on real containers: the shipped recipe (templates/code-interpreter:
// Jupyter kernels behind E2B's code interpreter API, a service with a ready check, a hot pool)
// is built from the test's own mirror of its Debian packages (the fixture lxc_debs fetched them
// on the host's network into the build tree; apt-repo.sh serves them as deb.test), then the
// unmodified @e2b/code-interpreter SDK (tests/e2b/client/code_interpreter_client.mjs) creates a
// sandbox of the template from its pool and runs code in it. Without node or npm it fails.
#include <gtest/gtest.h>

#include <sstream>

#include "http/auth.h"
#include "lxc/code_interpreter_template.h"
#include "lxc_support.h"
#include "service/support/controller_fixture.h"
#include "service/support/http_client.h"
#include "service/support/node_e2e_support.h"
#include "support/stack_fixture.h"

namespace pvs::service {
namespace {

constexpr const char* kAdminKey = "e2b_00112233445566778899aabbccddeeff";
constexpr const char* kToken = "tok-builder";

class LxcCodeInterpreterTest : public test::ControllerOnStackTest {
 protected:
  static void SetUpTestSuite() {
    install_error_ = test::npm_install_once(PVS_E2B_CLIENT_DIR, PVS_E2B_NODE_DIR,
                                            "code_interpreter_client.mjs", "@e2b/code-interpreter");
  }
  static inline std::string install_error_;

  void SetUp() override {
    ASSERT_TRUE(install_error_.empty()) << install_error_;
    test::StackOptions o;
    o.backend = "lxc";
    o.egress = true;
    start(PVS_CONTROLLER_BIN,
          "auth:\n  tokens:\n    - {name: builder, sha256: " + sha256_hex(kToken) +
              ", e2b_key_sha256: " + sha256_hex(kAdminKey) + ", admin: true}\n",
          o);
    run_dir_ = lxctest::own_run_dir();
    ASSERT_FALSE(run_dir_.empty());
  }
  void TearDown() override {
    ControllerOnStackTest::TearDown();
    EXPECT_EQ(lxctest::leftovers(run_dir_), std::vector<std::string>{});
  }

  test::HttpReply call(const std::string& method, const std::string& path,
                       const std::string& body = "") {
    return test::http(port_, method, path, body, kToken);
  }
  std::string run_dir_;
};

TEST_F(LxcCodeInterpreterTest, TheSdkRunsCodeInASandboxOfTheShippedTemplate) {
  test::CodeInterpreterBuild b{PVS_CODE_INTERPRETER_DIR, PVS_APT_REPO_SCRIPT, PVS_LXC_DEBS};
  // The kernels abort what reaches them within 30 s of a cell's error, where ipykernel's default
  // window is one turn of its event loop, a race a loaded machine loses: the client's cells
  // after an error (1/0, the interrupt) show by construction that one error costs no later cell.
  b.kernel_config = "c.Kernel.stop_on_error_timeout = 30.0\n";
  ASSERT_EQ(test::build_code_interpreter(*stack_, port_, kToken, b), "");
  EXPECT_NE(b.reply.find("==> start and ready"), std::string::npos) << b.reply;
  std::printf("[ figure ] code-interpreter-v1 build: %.1f s\n", b.seconds);

  std::string base = "http://127.0.0.1:" + std::to_string(port_);
  auto r = test::run_captured(
      {"node", std::string(PVS_E2B_NODE_DIR) + "/code_interpreter_client.mjs"}, dir_, "",
      {"E2B_API_URL=" + base + "/e2b", "E2B_SANDBOX_URL=" + base + "/e2b/envd",
       std::string("E2B_API_KEY=") + kAdminKey});
  const std::string report =
      "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "stderr:\n" + r.err;
  EXPECT_EQ(r.exit_code, 0) << report;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << report;
  EXPECT_NE(r.out.find("ok the kernel is free after the interrupt"), std::string::npos) << report;
  EXPECT_NE(r.out.find("ok an error does not abort the next cell"), std::string::npos) << report;
  EXPECT_NE(r.out.find("ok and its context runs cells again"), std::string::npos) << report;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("[ figure ]", 0) == 0) std::printf("%s\n", line.c_str());
  }
  EXPECT_EQ(call("DELETE", "/v1/templates/code-interpreter-v1").status, 204);
  EXPECT_EQ(call("DELETE", "/v1/templates/mirror").status, 204);
}

}  // namespace
}  // namespace pvs::service
