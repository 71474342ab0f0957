// Starts pvesim in-process (real HTTPS on loopback) and a client pinned to its certificate.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "pvesandbox/proxmox_client.h"
#include "sim.h"

namespace pvs::pve::testing {

inline constexpr const char* kNode = "pve";
inline constexpr const char* kTokenId = "sandbox@pve!controller";
inline constexpr const char* kSecret = "0d3c5e2a-6b1f-4a8e-9c7d-2f4b6a8c0e1f";
inline constexpr int kTemplate = 9000;

class SimTest : public ::testing::Test {
 protected:
  virtual void adjust(pvesim::Options& /*options*/) {}

  void SetUp() override {
    pvesim::Options options;
    options.tokens[kTokenId] = kSecret;
    options.auth_delay_ms = 20;
    options.default_task_ms = 20;
    options.task_ms["vzclone"] = 60;
    options.pools = {"sandboxes"};
    adjust(options);
    auto sim = pvesim::Simulator::start(options);
    ASSERT_TRUE(sim) << sim.error().to_string();
    sim_ = std::move(*sim);
    client_ = make_client();
  }

  void TearDown() override {
    client_.reset();
    sim_.reset();
  }

  ClientOptions client_options() const {
    ClientOptions o;
    o.base_url = "https://127.0.0.1:" + std::to_string(sim_->port());
    o.token_id = kTokenId;
    o.token_secret = kSecret;
    o.fingerprint = sim_->fingerprint();
    o.backoff_initial = std::chrono::milliseconds(5);
    o.backoff_max = std::chrono::milliseconds(20);
    o.request_timeout = std::chrono::milliseconds(10000);
    return o;
  }

  std::unique_ptr<Client> make_client(const ClientOptions& o) {
    auto c = Client::create(o);
    EXPECT_TRUE(c) << c.error().to_string();
    return c ? std::move(*c) : nullptr;
  }
  std::unique_ptr<Client> make_client() { return make_client(client_options()); }

  // Clones the template into `vmid` and waits for the task.
  void clone_ok(int vmid, const std::string& pool = "") {
    CloneRequest r;
    r.source_vmid = kTemplate;
    r.new_vmid = vmid;
    r.hostname = "sb-" + std::to_string(vmid);
    r.pool = pool;
    auto upid = client_->clone(kNode, r);
    ASSERT_TRUE(upid) << upid.error().to_string();
    auto done = client_->wait_task(*upid);
    ASSERT_TRUE(done) << done.error().to_string();
  }

  void task_ok(const Result<std::string>& upid) {
    ASSERT_TRUE(upid) << upid.error().to_string();
    auto done = client_->wait_task(*upid);
    ASSERT_TRUE(done) << done.error().to_string();
  }

  std::unique_ptr<pvesim::Simulator> sim_;
  std::unique_ptr<Client> client_;
};

// SimTest for ProxmoxClient's tests (client_*_test.cc): every request the client sent passed the
// real schema, unless a test sent junk on purpose.
class ClientTest : public SimTest {
 protected:
  void TearDown() override {
    // Every request the client sent passed the real schema (unless a test sent junk on purpose).
    if (!expect_rejections_) {
      EXPECT_EQ(sim_->schema_rejections(), 0u);
    }
    SimTest::TearDown();
  }
  bool expect_rejections_ = false;
};

}  // namespace pvs::pve::testing
