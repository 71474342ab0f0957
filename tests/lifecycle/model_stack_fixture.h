// ModelStackTest: a lifecycle test on pvesim's model backend (no namespaces or sshd per
// container): the stack, and a Proxmox client of its own for checking what the Manager did.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "pvesandbox/proxmox_client.h"
#include "support/stack_fixture.h"

namespace pvs {

class ModelStackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StackOptions o;
    o.backend = "model";
    stack_ = std::make_unique<test::Stack>(o);
    auto client = pve::Client::create(stack_->manager_config().proxmox);
    ASSERT_TRUE(client) << client.error().message;
    client_ = std::move(*client);
  }
  void TearDown() override {
    client_.reset();
    stack_.reset();
  }
  std::unique_ptr<test::Stack> stack_;
  std::unique_ptr<pve::Client> client_;
};

}  // namespace pvs
