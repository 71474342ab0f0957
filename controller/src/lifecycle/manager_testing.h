// Test hooks of the Manager, kept out of the public manager.h: failing a named step, and
// opening a Manager over other peers (fakes of ProxmoxApi/AgentApi in unit tests).
//
//   pvs::lifecycle::TestPeers peers;
//   peers.fault_hook = [](std::string_view step) { ... };  // fail a step
//   peers.agent = std::make_unique<FakeAgent>();             // or give another peer
//   auto m = pvs::lifecycle::open_manager(config, std::move(peers));
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "peers.h"
#include "pvesandbox/manager.h"

namespace pvs::lifecycle {

// Called before each step of create ("clone", "configure", "resize", "bind", "start", "ssh",
// "service", "internet", "ready") and destroy ("destroy:mark", "destroy:revoke",
// "destroy:delete"); an error return fails that step as if the peer had failed.
using FaultHook = std::function<Status(std::string_view step)>;

struct TestPeers {
  FaultHook fault_hook;
  std::unique_ptr<ProxmoxApi> proxmox;  // null: pve::Client over config.proxmox
  std::unique_ptr<AgentApi> agent;      // the first node's; null: AgentClient over its options
  std::map<std::string, std::unique_ptr<AgentApi>> agents;  // by node name, for the others
};

// Manager::open with these peers and hook.
Result<std::unique_ptr<Manager>> open_manager(ManagerConfig config, TestPeers peers);

}  // namespace pvs::lifecycle
