// The fixture of the agent's end-to-end tests (agent_server_*_test.cc): the agent binary in a
// network namespace of the test's own with the contract's tables.
#pragma once

#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "agent/agent_test_util.h"
#include "pvesandbox/common/protocol.h"

namespace pvs::test {

using namespace std::chrono_literals;

class AgentServerTest : public ::testing::Test {
 protected:
  void SetUp() override { ns_.load_contract(); }
  void start(const std::string& extra = "") {
    agent_ = std::make_unique<AgentProcess>(ns_, dir_, extra);
  }
  std::string nft_set() { return ns_.output("nft list set inet sandbox internet_allowed"); }
  // Polls LIST until `pred(reply)` holds; the window is generous for a loaded machine (it
  // returns as soon as the predicate holds).
  template <typename Pred>
  bool eventually(LineClient& c, Pred pred, std::chrono::milliseconds limit = 10000ms) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred(c.call("LIST"))) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  NetNs ns_;
  TempDir dir_;
  std::unique_ptr<AgentProcess> agent_;
};

}  // namespace pvs::test
