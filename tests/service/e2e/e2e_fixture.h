// The fixture of the service's end-to-end tests (e2e_*_test.cc): the pve-sandbox-controller
// binary and sandboxctl against the whole stack (pvs::test::Stack, pvesim's netns backend).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/StreamSocket.h>

#include "http/auth.h"
#include "service/support/http_client.h"
#include "service/support/json_object.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

#ifndef PVS_CONTROLLER_BIN
#error "PVS_CONTROLLER_BIN and PVS_SANDBOXCTL_BIN must name the binaries"
#endif

namespace pvs::service {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using Proc = test::ProcessResult;

// Runs argv with `input` on stdin; stdout/stderr collected through files in `dir`.
inline Proc run(const std::vector<std::string>& argv, const std::string& dir,
                const std::string& input = "", const std::vector<std::string>& env = {}) {
  return test::run_captured(argv, dir, input, env);
}

class ServiceE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = std::make_unique<test::Stack>();
    dir_ = stack_->dir();
    port_ = test::free_port();
    config_ = dir_ + "/controller.yaml";
    ManagerConfig mc = stack_->manager_config();  // the stack's user, key and agent socket
    std::ofstream(config_) << "listen:\n  address: 127.0.0.1\n  port: " << port_ << "\n"
                           << "auth:\n  tokens:\n    - name: demo\n      sha256: "
                           << sha256_hex("tok-demo") << "\n      max_sandboxes: 64\n"
                           << "audit:\n  file: " << dir_ << "/audit.log\n"
                           << "proxmox:\n  url: https://127.0.0.1:" << stack_->port() << "\n"
                           << "  node: pve\n  token_id: " << test::Stack::kTokenId << "\n"
                           << "  token_secret_env: PVS_E2E_PVE_SECRET\n"
                           << "  fingerprint: \"" << stack_->fingerprint() << "\"\n"
                           << "  template_vmid: 9000\n  vmid_min: 10000\n  vmid_max: 10999\n"
                           << "ssh:\n  user: " << mc.ssh.user << "\n"
                           << "  private_key_file: " << mc.ssh.private_key_file << "\n"
                           << "  host_key_policy: pinned\n  host_key_fingerprint: \""
                           << mc.ssh.host_key_fingerprint << "\"\n  connect_timeout_seconds: 15\n"
                           << "  ready_timeout_seconds: 20\n"
                           // Uploads over 1 MiB go in chunks over several connections.
                           << "  transfer_chunk_mib: 1\n"
                           << "agent:\n  socket: " << mc.agent.socket_path << "\n"
                           << "limits:\n  reconcile_interval_seconds: 5\n"
                           << "http:\n  max_upload_bytes: " << kMaxUpload << "\n"
                           << "  max_download_bytes: " << kMaxDownload << "\n";
    start_controller();
  }
  void TearDown() override {
    stop_controller();
    stack_.reset();
  }

  // `cacert` not empty: the controller serves HTTPS with that certificate; health is checked
  // with sandboxctl --cacert.
  void start_controller(const std::string& cacert = "") {
    log_ = dir_ + "/controller" + std::to_string(++starts_) + ".log";
    test::SpawnOptions so;
    so.stdout_file = log_;
    so.env = {std::string("PVS_E2E_PVE_SECRET=") + test::Stack::kTokenSecret};
    pid_ = test::spawn_process({PVS_CONTROLLER_BIN, "--config=" + config_}, so);
    ASSERT_GT(pid_, 0) << "cannot start " << PVS_CONTROLLER_BIN;
    for (int i = 0; i < 200; ++i) {
      if (!cacert.empty()) {
        if (run({PVS_SANDBOXCTL_BIN, "--cacert", cacert, "--url", https_url(), "health"}, dir_)
                .exit_code == 0) {
          return;
        }
      } else {
        try {
          auto h = test::http(port_, "GET", "/v1/health");
          if (h.status == 200) return;
        } catch (...) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "controller did not become healthy:\n" << slurp(log_);
  }
  std::string https_url(const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(port_);
  }
  int stop_controller() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  Proc ctl(std::vector<std::string> args, const std::string& input = "") {
    std::vector<std::string> argv = {PVS_SANDBOXCTL_BIN, "--url",
                                     "http://127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, dir_, input, {"SANDBOXCTL_TOKEN=tok-demo", "HOME=" + dir_});
  }

  static constexpr std::uint64_t kMaxUpload = 4 << 20;
  static constexpr std::uint64_t kMaxDownload = 6 << 20;

  std::unique_ptr<test::Stack> stack_;
  std::string dir_, config_, log_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  int starts_ = 0;
};

}  // namespace pvs::service
