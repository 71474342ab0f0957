// The netns backend for real: a started CT is a network namespace on a bridge with an sshd
// that accepts the template's key; the OpenSSH client logs in; stop and destroy leave nothing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "backend.h"
#include "sim_fixture.h"

namespace pvs::pve::testing {
namespace {

bool link_exists(const std::string& name) {
  return pvesim::run_command({"ip", "link", "show", "dev", name}) == 0;
}

bool netns_exists(const std::string& name) {
  std::string out;
  pvesim::run_command({"ip", "netns", "list"}, &out);
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.substr(0, line.find(' ')) == name) return true;
  return false;
}

class NetnsTest : public SimTest {
 protected:
  void adjust(pvesim::Options& options) override {
    pid_t pid = ::getpid();
    octet_ = static_cast<int>(pid % 250) + 1;
    prefix_ = "pvst" + std::to_string(pid) + "-";
    bridge_ = "pvsb" + std::to_string(pid % 100000);
    char dir[] = "/tmp/pvs-netns-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    key_ = dir_ + "/id_ed25519";
    ASSERT_EQ(pvesim::run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key_}), 0)
        << "ssh-keygen missing?";
    std::string net = "10.213." + std::to_string(octet_);
    options.backend = "netns";
    options.dhcp_cidr = net + ".0/24";
    options.netns.bridge = bridge_;
    options.netns.bridge_cidr = net + ".1/24";
    options.netns.ns_prefix = prefix_;
    options.netns.authorized_keys = key_ + ".pub";
  }

  void TearDown() override {
    SimTest::TearDown();  // stops every CT and removes the bridge
    EXPECT_FALSE(link_exists(bridge_));
    for (const char* f : {"/id_ed25519", "/id_ed25519.pub"}) ::unlink((dir_ + f).c_str());
    ::rmdir(dir_.c_str());
  }

  std::string ipv4_of(int vmid) {
    for (int i = 0; i < 50; ++i) {
      auto ifaces = client_->interfaces(kNode, vmid);
      EXPECT_TRUE(ifaces) << ifaces.error().to_string();
      if (ifaces && ifaces->has_value()) {
        for (const auto& iface : **ifaces)
          for (const auto& a : iface.addresses)
            if (iface.name == "eth0" && a.family == "inet") return a.address;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "";
  }

  int ssh(const std::string& ip, const std::string& command, std::string* out, int timeout_s = 5) {
    return pvesim::run_command(
        {"ssh", "-i", key_, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
         "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=" + std::to_string(timeout_s), "-o",
         "LogLevel=ERROR", "root@" + ip, command},
        out);
  }

  int octet_ = 1;
  std::string prefix_, bridge_, dir_, key_;
};

TEST_F(NetnsTest, StartSshStopLeavesNothing) {
  ASSERT_TRUE(link_exists(bridge_));
  clone_ok(120);
  task_ok(client_->start(kNode, 120));
  std::string ns = prefix_ + "120";
  EXPECT_TRUE(netns_exists(ns));
  // The template's net0 has firewall=1: Proxmox's bridge port is then fwpr<vmid>p0.
  EXPECT_TRUE(link_exists("fwpr120p0"));
  std::string master;
  pvesim::run_command({"ip", "-o", "link", "show", "dev", "fwpr120p0"}, &master);
  EXPECT_NE(master.find("master " + bridge_), std::string::npos) << master;

  std::string ip = ipv4_of(120);
  ASSERT_EQ(ip, "10.213." + std::to_string(octet_) + ".100");  // first simulated lease
  // One login (each costs seconds on a busy machine): the sshd runs inside the namespace,
  // it sees only lo and eth0, and the DHCP router is the default route.
  std::string out;
  ASSERT_EQ(ssh(ip, "echo hello-from-ct; ls /sys/class/net; ip route show default", &out), 0)
      << out;
  EXPECT_NE(out.find("hello-from-ct"), std::string::npos) << out;
  EXPECT_NE(out.find("eth0"), std::string::npos);
  EXPECT_EQ(out.find("fwpr120p0"), std::string::npos) << out;
  EXPECT_NE(out.find("default via 10.213." + std::to_string(octet_) + ".1"), std::string::npos)
      << out;

  // The interface MAC is the one from net0.
  auto config = client_->config(kNode, 120);
  ASSERT_TRUE(config);
  auto ifaces = client_->interfaces(kNode, 120);
  ASSERT_TRUE(ifaces && ifaces->has_value());
  auto eth0 = std::find_if((*ifaces)->begin(), (*ifaces)->end(),
                           [](const Interface& i) { return i.name == "eth0"; });
  ASSERT_NE(eth0, (*ifaces)->end());
  std::string mac = eth0->hwaddr;
  std::transform(mac.begin(), mac.end(), mac.begin(), ::toupper);
  EXPECT_NE(config->at("net0").find("hwaddr=" + mac), std::string::npos);

  task_ok(client_->stop(kNode, 120));
  EXPECT_FALSE(netns_exists(ns));
  EXPECT_FALSE(link_exists("fwpr120p0"));
  EXPECT_NE(ssh(ip, "true", &out, 1), 0);
  auto stopped = client_->interfaces(kNode, 120);
  ASSERT_TRUE(stopped);
  EXPECT_FALSE(stopped->has_value());

  // A static address from net0 is used as given.
  std::string net = "10.213." + std::to_string(octet_);
  ASSERT_TRUE(client_->update_config(
      kNode, 120,
      {{"net0", "name=eth0,bridge=vmbr1,ip=" + net + ".50/24,gw=" + net + ".1,type=veth"}}));
  task_ok(client_->start(kNode, 120));
  EXPECT_EQ(ipv4_of(120), net + ".50");
  EXPECT_TRUE(link_exists("veth120i0"));  // no firewall=1 now
  ASSERT_EQ(ssh(net + ".50", "echo static", &out), 0) << out;
  task_ok(client_->destroy(kNode, 120, DestroyOptions{true, true, std::nullopt}));
  EXPECT_FALSE(netns_exists(ns));
  EXPECT_FALSE(link_exists("veth120i0"));
}

TEST_F(NetnsTest, ConcurrentStartsGetTheirOwnNamespaces) {
  clone_ok(130);
  clone_ok(131);
  auto a = client_->start(kNode, 130);
  auto b = client_->start(kNode, 131);
  ASSERT_TRUE(a && b);
  // The API keeps answering while the namespaces come up.
  EXPECT_TRUE(client_->status(kNode, 130));
  ASSERT_TRUE(client_->wait_task(*a));
  ASSERT_TRUE(client_->wait_task(*b));
  std::string ip130 = ipv4_of(130), ip131 = ipv4_of(131);
  EXPECT_FALSE(ip130.empty());
  EXPECT_FALSE(ip131.empty());
  EXPECT_NE(ip130, ip131);
  EXPECT_TRUE(netns_exists(prefix_ + "130"));
  EXPECT_TRUE(netns_exists(prefix_ + "131"));
  auto s130 = client_->stop(kNode, 130);
  auto s131 = client_->stop(kNode, 131);
  ASSERT_TRUE(s130 && s131);
  ASSERT_TRUE(client_->wait_task(*s130));
  ASSERT_TRUE(client_->wait_task(*s131));
  EXPECT_FALSE(netns_exists(prefix_ + "130"));
  EXPECT_FALSE(netns_exists(prefix_ + "131"));
  EXPECT_FALSE(link_exists("fwpr130p0"));
  EXPECT_FALSE(link_exists("fwpr131p0"));
}

}  // namespace
}  // namespace pvs::pve::testing
