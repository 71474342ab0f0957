// A gtest fixture with the controller binary running on a fresh test stack (pvesim, agent,
// sshd in a network namespace): its controller.yaml is stack_controller_yaml() followed by the
// test's own sections (auth:, http:, policy: ...). For the end-to-end tests that drive a real
// client (the MCP SDK, the E2B SDK, the console in Chromium) against the real binary.
//
//   class MyE2eTest : public test::ControllerOnStackTest {
//     void SetUp() override { start(PVS_CONTROLLER_BIN, "auth:\n  tokens: ...\n"); }
//   };
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "service/support/node_e2e_support.h"
#include "support/stack_fixture.h"

namespace pvs::test {

class ControllerOnStackTest : public ::testing::Test {
 protected:
  // Starts the stack and the controller `bin` on it, with `extra_yaml` after the stack's part.
  void start(const std::string& bin, const std::string& extra_yaml, StackOptions options = {}) {
    stack_ = std::make_unique<Stack>(std::move(options));
    dir_ = stack_->dir();
    port_ = free_port();
    std::string config = dir_ + "/controller.yaml";
    std::ofstream(config) << stack_controller_yaml(*stack_, port_, dir_) << extra_yaml;
    std::string why;
    pid_ = start_controller(bin, config, dir_, port_, &why);
    ASSERT_GT(pid_, 0) << why;
  }
  void TearDown() override {
    stop_controller(pid_);
    stack_.reset();
  }

  std::unique_ptr<Stack> stack_;
  std::string dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace pvs::test
