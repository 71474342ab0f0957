// AgentClient against the real agent binary in a namespace of the test's own: over the unix
// socket and over a spawned relay command, with reconnects, timeouts and concurrent callers.
#include <grp.h>
#include <pwd.h>

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "agent/agent_test_util.h"
#include "pvesandbox/agent_client.h"

namespace pvs::test {
namespace {

using namespace std::chrono_literals;

Ipv4Address ip(const char* text) {
  return *Ipv4Address::parse(text);
}

AgentClientOptions over_socket(const std::string& path, std::chrono::milliseconds timeout = 10s) {
  AgentClientOptions options;
  options.socket_path = path;
  options.connect_timeout = timeout;
  options.request_timeout = timeout;
  return options;
}

class AgentClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_.load_contract();
    agent_ = std::make_unique<AgentProcess>(ns_, dir_);
  }
  NetNs ns_;
  TempDir dir_;
  std::unique_ptr<AgentProcess> agent_;
};

void exercise(AgentClient& client) {
  auto hello = client.connect();
  ASSERT_TRUE(hello) << hello.error().message;
  EXPECT_EQ(hello->agent_version, PVS_VERSION);
  EXPECT_EQ(hello->protocol, 1);
  ASSERT_TRUE(client.allow(ip("10.99.0.5")));
  ASSERT_TRUE(client.allow(ip("10.99.0.6"), 600));
  auto list = client.list();
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0], (proto::Grant{ip("10.99.0.5"), std::nullopt}));
  EXPECT_EQ((*list)[1].address, ip("10.99.0.6"));
  ASSERT_TRUE((*list)[1].ttl_seconds);
  EXPECT_GE(*(*list)[1].ttl_seconds, 598u);
  ASSERT_TRUE(client.revoke(ip("10.99.0.5")));
  auto synced = client.sync({{ip("10.99.1.1"), std::nullopt}, {ip("10.99.1.2"), 60}});
  ASSERT_TRUE(synced);
  EXPECT_EQ(*synced, 2u);
  proto::Binding b{"veth100i0", *MacAddress::parse("bc:24:11:00:00:01"), ip("10.99.1.1")};
  ASSERT_TRUE(client.bind(b));
  auto bindings = client.bindings();
  ASSERT_TRUE(bindings);
  EXPECT_EQ(*bindings, std::vector<proto::Binding>{b});
  ASSERT_TRUE(client.unbind("veth100i0"));
  auto status = client.status();
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(proto::find_field(*status, "elements"), "2");
  EXPECT_EQ(proto::find_field(*status, "egress_connections_refused"), "0");
  // Nothing refused yet (the counting itself: tests/egress/refused-e2e.sh).
  auto none = client.egress_refused(ip("10.99.0.5"));
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());
  // Agent errors come back typed.
  auto refused = client.allow(ip("10.99.0.1"));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(refused.error().message.find("address not allowed"), std::string::npos);
}

TEST_F(AgentClientTest, EveryMethodOverTheSocket) {
  AgentClient client(over_socket(agent_->socket()));
  exercise(client);
}

TEST_F(AgentClientTest, EveryMethodOverARelayCommand) {
  AgentClientOptions options;
  options.command = {PVS_AGENT_BINARY, "relay", "--socket", agent_->socket()};
  AgentClient client(options);
  exercise(client);
  client.close();
  // And again after close: a fresh relay is spawned.
  auto list = client.list();
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->size(), 2u);
}

TEST_F(AgentClientTest, ReconnectsAfterTheAgentRestarts) {
  AgentClient client(over_socket(agent_->socket()));
  ASSERT_TRUE(client.allow(ip("10.99.0.5")));
  agent_->stop();
  auto down = client.list();
  ASSERT_FALSE(down);
  EXPECT_EQ(down.error().code, ErrorCode::kUnavailable);
  agent_->start();
  auto list = client.list();  // the broken connection is replaced transparently
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->size(), 1u);
}

TEST_F(AgentClientTest, SyncTooLargeForOneLineIsRefusedBeforeSending) {
  AgentClient client(over_socket(agent_->socket()));
  std::vector<proto::Grant> grants;
  for (std::uint32_t i = 0; i < 6000; ++i) grants.push_back({Ipv4Address(0x0a630002u + i), {}});
  auto r = client.sync(grants);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kTooLarge);
  grants.resize(4500);  // ~50 KiB: fits
  auto ok = client.sync(grants);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(*ok, 4500u);
}

TEST_F(AgentClientTest, RefusedPeerGetsPermissionDenied) {
  group* nogroup = ::getgrnam("nogroup");
  ASSERT_NE(nogroup, nullptr);
  agent_.reset();
  std::filesystem::remove(dir_.file("agent.yaml"));
  agent_ = std::make_unique<AgentProcess>(ns_, dir_, "allowed_uids: [4242]\n");
  AgentClient client(over_socket(agent_->socket()));
  auto r = client.connect();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kPermissionDenied) << r.error().message;
}

TEST_F(AgentClientTest, TimesOutOnASilentPeer) {
  // A listener that accepts and never answers.
  std::string path = dir_.file("silent.sock");
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  AgentClient client(over_socket(path, 300ms));
  auto r = client.list();
  ASSERT_FALSE(r);
  // The peer never answers, so only the timeout can end the call: no upper bound needed.
  EXPECT_EQ(r.error().code, ErrorCode::kTimeout) << r.error().message;
  ::close(fd);
}

TEST_F(AgentClientTest, ThreadSafeUnderConcurrentCallers) {
  AgentClient client(over_socket(agent_->socket()));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        Ipv4Address a(0x0a630a00u + static_cast<std::uint32_t>(t * 50 + i + 2));
        if (!client.allow(a, 600)) ++failures;
        if (!client.list()) ++failures;
        if (!client.revoke(a)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  auto list = client.list();
  ASSERT_TRUE(list);
  EXPECT_TRUE(list->empty());
}

}  // namespace
}  // namespace pvs::test
