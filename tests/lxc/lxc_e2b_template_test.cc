// E2B's Template.build, snapshots, fork and volumes on real containers: the unmodified `e2b` SDK
// (2.51.0, pinned by tests/e2b/client/package-lock.json) runs
// tests/e2b/client/e2b_lxc_template_client.mjs, e2b_fork_client.mjs and e2b_volume_client.mjs
// against the controller binary on pvesim's lxc backend with the egress
// stack (StackOptions::egress): aptInstall from the test's own mirror (deb.test, apt-repo.sh)
// and setEnvs, which the netns stand-in refuses, reach a sandbox of the template; a snapshot
// and a fork keep the files; a volume keeps them across sandboxes (real ext4 volumes, mounted
// by the containers). Without node or npm it fails.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "http/auth.h"
#include "lxc_support.h"
#include "service/support/controller_fixture.h"
#include "service/support/http_client.h"
#include "service/support/node_e2e_support.h"
#include "support/stack_fixture.h"

namespace pvs::service {
namespace {

constexpr const char* kAdminKey = "e2b_00112233445566778899aabbccddeeff";
constexpr const char* kOtherKey = "e2b_ffeeddccbbaa99887766554433221100";

class LxcE2bTemplateTest : public test::ControllerOnStackTest {
 protected:
  static void SetUpTestSuite() {
    install_error_ = test::npm_install_once(PVS_E2B_CLIENT_DIR, PVS_E2B_NODE_DIR,
                                            "e2b_lxc_template_client.mjs", "e2b");
  }
  static inline std::string install_error_;

  void SetUp() override {
    ASSERT_TRUE(install_error_.empty()) << install_error_;
    test::StackOptions o;
    o.backend = "lxc";
    o.egress = true;
    o.volume_holder = true;
    start(PVS_CONTROLLER_BIN,
          "auth:\n  tokens:\n    - {name: builder, sha256: " + sha256_hex("tok-builder") +
              ", e2b_key_sha256: " + sha256_hex(kAdminKey) + ", admin: true}\n" +
              "    - {name: other, sha256: " + sha256_hex("tok-other") + ", e2b_key_sha256: " +
              sha256_hex(kOtherKey) + "}\n" + "limits:\n  reconcile_interval_seconds: 2\n" +
              "volumes:\n  holder_template_vmid: " + std::to_string(test::kVolumeHolderTemplate) +
              "\n",
          o);
    run_dir_ = lxctest::own_run_dir();
    ASSERT_FALSE(run_dir_.empty());
  }
  void TearDown() override {
    ControllerOnStackTest::TearDown();
    EXPECT_EQ(lxctest::leftovers(run_dir_), std::vector<std::string>{});
  }
  std::string run_dir_;
};

TEST_F(LxcE2bTemplateTest, AptInstallAndSetEnvsReachTheSandbox) {
  ASSERT_EQ(lxctest::sh(std::string(PVS_APT_REPO_SCRIPT) + " " + stack_->www_dir()), 0);
  std::string base = "http://127.0.0.1:" + std::to_string(port_);
  auto r = test::run_captured(
      {"node", std::string(PVS_E2B_NODE_DIR) + "/e2b_lxc_template_client.mjs"}, dir_, "",
      {"E2B_API_URL=" + base + "/e2b", "E2B_SANDBOX_URL=" + base + "/e2b/envd",
       std::string("E2B_API_KEY=") + kAdminKey});
  const std::string report =
      "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "stderr:\n" + r.err;
  EXPECT_EQ(r.exit_code, 0) << report;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << report;
  EXPECT_NE(r.out.find("ok the package, the RUN step and the env are there"), std::string::npos)
      << report;
  EXPECT_EQ(test::http(port_, "DELETE", "/v1/templates/sdk-apt", "", "tok-builder").status, 204);
  EXPECT_EQ(test::http(port_, "DELETE", "/v1/templates/sdk-mirror", "", "tok-builder").status, 204);
}

TEST_F(LxcE2bTemplateTest, SnapshotsAndForksKeepTheFiles) {
  std::string base = "http://127.0.0.1:" + std::to_string(port_);
  auto r = test::run_captured(
      {"node", std::string(PVS_E2B_NODE_DIR) + "/e2b_fork_client.mjs"}, dir_, "",
      {"E2B_API_URL=" + base + "/e2b", "E2B_SANDBOX_URL=" + base + "/e2b/envd",
       std::string("E2B_API_KEY=") + kAdminKey, std::string("E2B_OTHER_KEY=") + kOtherKey});
  const std::string report =
      "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "stderr:\n" + r.err;
  EXPECT_EQ(r.exit_code, 0) << report;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << report;
  EXPECT_NE(r.out.find("ok each fork has a disk of its own"), std::string::npos) << report;
  std::cout << r.out;
  // The forks are gone (the client killed them): the reconcile destroys their base.
  bool gone = false;
  for (int i = 0; i < 150 && !gone; ++i) {
    auto list = test::http(port_, "GET", "/v1/templates", "", "tok-builder");
    gone = list.status == 200 && list.body.find("\"fork_base\":true") == std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(gone) << test::http(port_, "GET", "/v1/templates", "", "tok-builder").body;
}

TEST_F(LxcE2bTemplateTest, VolumesKeepTheFilesAcrossSandboxes) {
  std::string base = "http://127.0.0.1:" + std::to_string(port_);
  auto r = test::run_captured(
      {"node", std::string(PVS_E2B_NODE_DIR) + "/e2b_volume_client.mjs"}, dir_, "",
      {"E2B_API_URL=" + base + "/e2b", "E2B_SANDBOX_URL=" + base + "/e2b/envd",
       "E2B_VOLUME_API_URL=" + base + "/e2b", std::string("E2B_API_KEY=") + kAdminKey,
       std::string("E2B_OTHER_KEY=") + kOtherKey});
  const std::string report =
      "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "stderr:\n" + r.err;
  EXPECT_EQ(r.exit_code, 0) << report;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << report;
  EXPECT_NE(r.out.find("ok it is not listed any more"), std::string::npos) << report;
  std::cout << r.out;
  // Its holder is gone with it: no container of the pool is left but the templates.
  auto volumes = test::http(port_, "GET", "/v1/volumes", "", "tok-builder");
  EXPECT_EQ(volumes.body, "{\"volumes\":[]}");
}

}  // namespace
}  // namespace pvs::service
