// A gtest fixture with the REST service in this process (InProcessService) on `config_`:
// serve() starts it on a loopback port (`port_`), TearDown stops it and removes the audit log.
//
//   class MyApiTest : public test::InProcessServiceTest {
//     void SetUp() override { config_.tokens = {...}; serve(manager); }
//   };
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>

#include "service/support/in_process_service.h"

namespace pvs::test {

class InProcessServiceTest : public ::testing::Test {
 protected:
  void serve(std::shared_ptr<Manager> manager = nullptr, bool audit_log = true) {
    config_.listen_port = 0;
    auto svc = InProcessService::start(config_, std::move(manager), audit_log);
    ASSERT_TRUE(svc) << svc.error().message;
    svc_ = std::move(*svc);
    port_ = svc_->port();
  }
  void TearDown() override {
    svc_.reset();
    std::remove(config_.audit_file.c_str());
  }

  service::ServiceConfig config_;
  std::unique_ptr<InProcessService> svc_;
  std::uint16_t port_ = 0;
};

}  // namespace pvs::test
