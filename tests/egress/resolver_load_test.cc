// The resolver under load from one source (#32 finding 4), a real pve-sandbox-resolver process
// against a fake agent and a fake upstream on loopback. The upstream holds the "slow" names
// until the test releases them, so what runs while they wait is decided by construction.
// PVS_RESOLVER_BIN runs the same tests against another build (e.g. main's, where they fail).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "resolver_fixture.h"

namespace pvs::resolver::testing {
namespace {

using namespace std::chrono_literals;

class ResolverLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pvs-resolver-load-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
    agent_ = std::make_unique<FakeAgent>(dir_ + "/agent.sock");
  }
  void TearDown() override {
    resolver_.reset();
    agent_.reset();
    std::filesystem::remove_all(dir_);
  }
  void start(const std::string& extra = "") {
    resolver_ = std::make_unique<ResolverProcess>(dir_, *agent_, upstream_, extra);
    ASSERT_TRUE(resolver_->started()) << resolver_binary();
  }
  std::uint16_t port() const { return resolver_->port(); }

  std::string dir_;
  FakeUpstream upstream_;
  std::unique_ptr<FakeAgent> agent_;
  std::unique_ptr<ResolverProcess> resolver_;
};

// Before: four workers each blocked on the upstream for one slow name, and every other source
// waited for the upstream timeout.
TEST_F(ResolverLoad, SlowNamesOfOneSourceDoNotStarveAnother) {
  start("upstream_timeout_ms: 30000\n");
  UniqueFd flood = udp_socket("127.0.0.2", port());
  for (int i = 0; i < 20; ++i) udp_send(flood.get(), "slow" + std::to_string(i) + ".test", i);
  ASSERT_TRUE(upstream_.wait_asked(4));  // the flood holds what it may hold
  auto answer = udp_query("127.0.0.3", port(), "fast.test", 10s);
  ASSERT_TRUE(answer) << "another source got no answer while one source's names were slow";
  EXPECT_EQ(answer->rcode, dns::Rcode::kNoError);
  upstream_.release();
}

// A source's queries beyond max_inflight_per_source wait in its own queue; freed slots go round
// robin across the sources that wait.
TEST_F(ResolverLoad, InflightIsCappedPerSourceAndSlotsGoRoundRobin) {
  start("upstream_timeout_ms: 30000\nmax_inflight: 2\nmax_inflight_per_source: 2\n");
  UniqueFd a = udp_socket("127.0.0.2", port());
  UniqueFd b = udp_socket("127.0.0.3", port());
  for (int i = 0; i < 6; ++i) udp_send(a.get(), "slow-a" + std::to_string(i) + ".test", i);
  ASSERT_TRUE(upstream_.wait_asked(2));
  for (int i = 0; i < 2; ++i) udp_send(b.get(), "slow-b" + std::to_string(i) + ".test", i);
  // Nothing more reaches the upstream while both slots are held ...
  auto fast = udp_query("127.0.0.4", port(), "fast.test", 300ms);
  EXPECT_FALSE(fast) << "a third query ran beyond max_inflight";
  EXPECT_EQ(upstream_.asked().size(), 2u);
  // ... and of the next two slots one goes to b, though a queued four more before it.
  upstream_.release(1);
  ASSERT_TRUE(upstream_.wait_asked(3));
  upstream_.release(1);
  ASSERT_TRUE(upstream_.wait_asked(4));
  auto asked = upstream_.asked();
  EXPECT_TRUE(asked[2].starts_with("slow-b") || asked[3].starts_with("slow-b"))
      << asked[2] << " " << asked[3];
  upstream_.release();
}

// Before: 32 slots shared by all, none kept for the other sources. Only keys main knew here.
TEST_F(ResolverLoad, TcpConnectionsAreCappedPerSource) {
  start("max_tcp_clients: 8\n");  // max_tcp_per_source: 4 by default
  std::vector<UniqueFd> mine;
  for (int i = 0; i < 5; ++i) mine.push_back(tcp_connect("127.0.0.2", port()));
  int answered = 0;
  for (auto& fd : mine) {
    if (tcp_send_query(fd.get(), "fast.test", 7) && tcp_read_answer(fd.get(), 5s)) ++answered;
  }
  EXPECT_EQ(answered, 4);
  UniqueFd other = tcp_connect("127.0.0.3", port());
  ASSERT_TRUE(tcp_send_query(other.get(), "fast.test", 8));
  EXPECT_TRUE(tcp_read_answer(other.get(), 5s)) << "another source was refused";
}

// Before: the connection took one of the shared slots before its source was looked at.
TEST_F(ResolverLoad, AnOutsiderHoldsNoTcpSlot) {
  start("sandbox_cidr: 127.0.0.0/30\nmax_tcp_clients: 2\n");
  std::vector<UniqueFd> outsiders;
  for (int i = 0; i < 2; ++i) outsiders.push_back(tcp_connect("127.0.0.9", port()));
  for (auto& fd : outsiders) EXPECT_TRUE(tcp_closed(fd.get(), 10s)) << "outsider kept open";
  UniqueFd inside = tcp_connect("127.0.0.2", port());
  ASSERT_TRUE(tcp_send_query(inside.get(), "fast.test", 9));
  EXPECT_TRUE(tcp_read_answer(inside.get(), 5s)) << "a sandbox was refused: outsiders hold slots";
}

// Before: every TCP client opened its own agent connection (and a thread).
TEST_F(ResolverLoad, TcpClientsShareTheAgentConnectionsAndNoThreads) {
  start("max_tcp_clients: 100\n");  // agent_connections: 2, max_tcp_per_source: 4 by default
  std::vector<UniqueFd> clients;
  for (int s = 0; s < 18; ++s) {
    for (int i = 0; i < 4; ++i) {
      clients.push_back(tcp_connect("127.0.1." + std::to_string(s + 1), port()));
    }
  }
  for (auto& fd : clients) ASSERT_TRUE(tcp_send_query(fd.get(), "fast.test", 1));
  int answered = 0;
  for (auto& fd : clients) answered += tcp_read_answer(fd.get(), 5s) ? 1 : 0;
  EXPECT_EQ(answered, 72);
  EXPECT_LE(agent_->connections(), 2);
  EXPECT_LE(resolver_->threads(), 2) << "threads grow with the clients";
}

int check_config(const std::string& dir, const std::string& config_extra, const std::string& unit,
                 const std::string& agent_yaml) {
  std::ofstream(dir + "/r.yaml") << "listen: 10.99.0.1\nsandbox_cidr: 10.99.0.0/16\n"
                                    "upstreams: [\"10.99.0.1\"]\n"
                                 << config_extra;
  std::ofstream(dir + "/unit.service") << "[Service]\n" << unit;
  std::ofstream(dir + "/agent.yaml") << (agent_yaml.empty() ? "max_clients: 64\n" : agent_yaml);
  std::string cmd = resolver_binary() + " --config " + dir + "/r.yaml check-config --unit " + dir +
                    "/unit.service --agent-config " + dir + "/agent.yaml 2>/dev/null";
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(ResolverLoad, CheckConfigHoldsTheLimitsAgainstTheUnitAndTheAgent) {
  EXPECT_EQ(check_config(dir_, "", "TasksMax=64\nLimitNOFILE=1024\n", "max_clients: 64\n"), 0);
  EXPECT_EQ(check_config(dir_, "max_tcp_clients: 2000\n", "LimitNOFILE=1024\n", ""), 1);
  EXPECT_EQ(check_config(dir_, "max_tcp_clients: 2000\n", "LimitNOFILE=4096:8192\n", ""), 0);
  EXPECT_EQ(check_config(dir_, "agent_connections: 8\n", "", "max_clients: 12\n"), 1);
  EXPECT_EQ(check_config(dir_, "", "TasksMax=1\n", ""), 1);
  EXPECT_EQ(check_config(dir_, "max_tcp_per_source: 64\n", "", ""), 1);  // > max_tcp_clients
}

TEST(ResolverPackaging, ShippedConfigFitsTheShippedUnitAndAgent) {
  std::string root = PVS_SOURCE_ROOT;
  std::string cmd = resolver_binary() + " --config " + root +
                    "/resolver/resolver.yaml check-config --unit " + root +
                    "/packaging/deb/systemd/pve-sandbox-resolver.service --agent-config " + root +
                    "/hostagent/agent.yaml";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

}  // namespace
}  // namespace pvs::resolver::testing
