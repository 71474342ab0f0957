// The fixture of the Manager tests on pvesim's model backend (manager_*_test.cc): the stack of
// ModelStackTest, a Manager opened with test peers, and the checks every test needs.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "manager_testing.h"
#include "model_stack_fixture.h"
#include "pvesandbox/manager.h"
#include "pvesandbox/proxmox_client.h"
#include "pvesandbox/sandbox_metadata.h"
#include "sim.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

#ifndef PVS_AGENT_BIN
#error "PVS_AGENT_BIN must name the agent binary"
#endif
#ifndef PVS_LIFECYCLE_DRIVER
#error "PVS_LIFECYCLE_DRIVER must name the driver binary"
#endif

namespace pvs {

class ManagerModelTest : public ModelStackTest {
 protected:
  std::unique_ptr<Manager> open(ManagerConfig c, lifecycle::FaultHook hook = {}) {
    lifecycle::TestPeers peers;
    peers.fault_hook = std::move(hook);
    auto m = lifecycle::open_manager(std::move(c), std::move(peers));
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
  }
  std::unique_ptr<Manager> open() { return open(stack_->manager_config()); }

  // Nothing of any sandbox is left: no container, no set entry, no binding.
  void expect_clean() {
    EXPECT_TRUE(stack_->containers().empty());
    EXPECT_TRUE(stack_->internet_set().empty());
    EXPECT_TRUE(stack_->bound_ports().empty());
  }

  // A container the manager did not make (clone of the template, no marker).
  void foreign_container(int vmid, const std::string& description = "") {
    pve::CloneRequest req;
    req.source_vmid = 9000;
    req.new_vmid = vmid;
    req.description = description;
    auto upid = client_->clone("pve", req);
    ASSERT_TRUE(upid) << upid.error().to_string();
    ASSERT_TRUE(client_->wait_task(*upid));
  }
};

}  // namespace pvs
