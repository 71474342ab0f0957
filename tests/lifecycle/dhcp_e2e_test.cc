// DHCP addressing (ManagerConfig::dhcp) on the whole stack: the node's dnsmasq answers only the
// reservations the real agent publishes at BIND, and every sandbox namespace gets its address
// from it with a real DHCP client (busybox udhcpc), through the hardened ruleset.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "pvesandbox/manager.h"
#include "pvesandbox/proxmox_client.h"
#include "support/stack_fixture.h"

namespace pvs {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The MAC the controller derives from a sandbox's address: 02:53:<address bytes>.
std::string mac_of(Ipv4Address address) {
  auto a = address.to_uint();
  char b[18];
  std::snprintf(b, sizeof b, "02:53:%02x:%02x:%02x:%02x", a >> 24, (a >> 16) & 0xff,
                (a >> 8) & 0xff, a & 0xff);
  return b;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

class DhcpE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StackOptions o;
    o.dhcp = true;
    stack_ = std::make_unique<test::Stack>(o);
    auto m = Manager::open(stack_->manager_config());
    ASSERT_TRUE(m) << m.error().message;
    manager_ = std::move(*m);
  }
  void TearDown() override {
    manager_.reset();
    stack_.reset();
  }

  std::string net0(int vmid) {
    auto client = pve::Client::create(stack_->manager_config().proxmox);
    if (!client) return "";
    auto conf = (*client)->config("pve", vmid);
    return conf && conf->count("net0") ? conf->at("net0") : "";
  }
  std::string reservation(int vmid) {
    return stack_->dhcp_hosts_dir() + "/veth" + std::to_string(vmid) + "i0";
  }

  std::unique_ptr<test::Stack> stack_;
  std::unique_ptr<Manager> manager_;
};

TEST_F(DhcpE2eTest, SandboxGetsItsReservedAddressFromDnsmasq) {
  CreateOptions o;
  o.internet = true;
  auto sb = manager_->create(o);
  ASSERT_TRUE(sb) << sb.error().message << "\ndnsmasq:\n" << stack_->dnsmasq_log();
  auto info = (*sb)->info();
  ASSERT_TRUE(info.address);
  std::string ip = info.address->to_string();

  // Proxmox holds ip=dhcp and the MAC derived from the address; no static ip, no gw.
  std::string n = net0(info.vmid);
  EXPECT_NE(n.find("ip=dhcp"), std::string::npos) << n;
  EXPECT_EQ(n.find("gw="), std::string::npos) << n;
  std::string mac = mac_of(*info.address);
  std::string upper = mac;
  for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_NE(n.find("hwaddr=" + upper), std::string::npos) << n;

  // The agent published the reservation, dnsmasq leased it, the namespace configured it.
  EXPECT_EQ(slurp(reservation(info.vmid)), mac + "," + ip + "\n");
  EXPECT_NE(slurp(stack_->dnsmasq_leases()).find(mac + " " + ip), std::string::npos)
      << slurp(stack_->dnsmasq_leases());
  auto r = (*sb)->exec("ip -4 -o addr show dev eth0; ip -4 route show default");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE(r->out.find("inet " + ip + "/16"), std::string::npos) << r->out;
  EXPECT_NE(r->out.find("default via 10.99.0.1"), std::string::npos) << r->out;
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{ip});

  ASSERT_TRUE((*sb)->destroy());
  EXPECT_FALSE(exists(reservation(info.vmid)));
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_TRUE(stack_->bound_ports().empty());
}

// The allocator hands out the lowest free address, so a destroyed sandbox's address goes to the
// next one at once, while dnsmasq still holds the old container's lease (containers are stopped,
// they never release it). dnsmasq refuses an address leased to a different MAC; the MAC derived
// from the address makes the new container the same client, and it gets the address.
TEST_F(DhcpE2eTest, ReusedAddressIsLeasedAgainWhileTheOldLeaseRuns) {
  auto first = manager_->create({});
  ASSERT_TRUE(first) << first.error().message << "\ndnsmasq:\n" << stack_->dnsmasq_log();
  auto a = (*first)->info();
  ASSERT_TRUE((*first)->destroy());
  EXPECT_NE(slurp(stack_->dnsmasq_leases()).find(a.address->to_string()), std::string::npos)
      << "the old lease should still run";

  auto second = manager_->create({});
  ASSERT_TRUE(second) << second.error().message << "\ndnsmasq:\n" << stack_->dnsmasq_log();
  auto b = (*second)->info();
  EXPECT_EQ(b.address, a.address);
  EXPECT_NE(b.vmid, 0);
  auto r = (*second)->exec("ip -4 -o addr show dev eth0");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_NE(r->out.find("inet " + b.address->to_string() + "/16"), std::string::npos) << r->out;
  ASSERT_TRUE((*second)->destroy());
}

// Without an answer from the DHCP server the container starts without an address (as a real one
// would): the wait for SSH fails the create, which rolls back everything.
TEST_F(DhcpE2eTest, NoLeaseFailsTheCreateAndLeavesNothing) {
  stack_->stop_dnsmasq();
  auto c = stack_->manager_config();
  c.ssh_ready_timeout = std::chrono::milliseconds(2000);
  auto m = Manager::open(c);
  ASSERT_TRUE(m) << m.error().message;
  manager_.reset();
  auto sb = (*m)->create({});
  ASSERT_FALSE(sb);
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_TRUE(stack_->ct_namespaces().empty());
  EXPECT_TRUE(stack_->bound_ports().empty());
  EXPECT_TRUE(stack_->internet_set().empty());
  EXPECT_EQ((*m)->list().size(), 0U);
}

}  // namespace
}  // namespace pvs
