// The netns backend of a two-node cluster: each node's bridge lives in a network namespace of
// its own (node_netns, made here), each CT's veth joins its own node's bridge there, and its
// sshd answers on that bridge only. Needs root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "backend.h"
#include "sim.h"
#include "test_https.h"

namespace {

using pvesim::run_command;
using pvesim::testing::Https;

// The first bytes a TCP server at ip:port sends, as seen from network namespace `netns`.
std::string greeting(const std::string& netns, const std::string& ip, int port) {
  std::string out;
  std::thread([&] {
    int ns = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) return;
    bool entered = ::setns(ns, CLONE_NEWNET) == 0;
    ::close(ns);
    int fd = entered ? ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
    if (fd < 0) return;
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    char buf[64];
    if (::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) == 1 &&
        ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) out.assign(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
  }).join();
  return out;
}

bool netns_listed(const std::string& name) {
  std::string out;
  run_command({"ip", "netns", "list"}, &out);
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)  // "name" or "name (id: N)"
    if (line.substr(0, line.find(' ')) == name) return true;
  return false;
}

class PvesimClusterNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    // The real parts are required: without them the test fails, it never skips.
    ASSERT_EQ(::geteuid(), 0u) << "needs root (network namespaces)";
    ASSERT_EQ(::access("/usr/sbin/sshd", X_OK), 0) << "no /usr/sbin/sshd (openssh-server)";
    std::string pid = std::to_string(::getpid());
    for (const char* n : {"1", "2"}) {
      nodes_ns_.push_back("pvcn" + std::string(n) + "-" + pid);
      ASSERT_EQ(run_command({"ip", "netns", "add", nodes_ns_.back()}), 0);
    }
    char dir[] = "/tmp/pvesim-cluster-netns-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    ASSERT_EQ(run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", dir_ + "/key"}), 0);
    net_ = "10.214." + std::to_string(::getpid() % 250 + 1);
    pvesim::Options options;
    options.tokens["root@pam!test"] = "secret";
    options.auth_delay_ms = 10;
    options.default_task_ms = 10;
    options.backend = "netns";
    options.dhcp_cidr = net_ + ".0/24";  // one L2 range, as with one DHCP server
    for (int i = 0; i < 2; ++i) {
      pvesim::NodeOptions node;
      node.name = "node" + std::to_string(i + 1);
      node.templates = {9001 + i};
      node.netns.bridge = "pvcb" + pid.substr(pid.size() > 6 ? pid.size() - 6 : 0);
      node.netns.bridge_cidr = net_ + ".1/24";  // the same in both: separate namespaces
      node.netns.ns_prefix = "pvc" + std::to_string(i + 1) + "-" + pid + "-";
      node.netns.node_netns = nodes_ns_[static_cast<std::size_t>(i)];
      node.netns.authorized_keys = dir_ + "/key.pub";
      options.nodes.push_back(node);
    }
    bridge_ = options.nodes[0].netns.bridge;
    auto sim = pvesim::Simulator::start(options);
    ASSERT_TRUE(sim) << sim.error().to_string();
    sim_ = std::move(*sim);
    api_ = std::make_unique<Https>(sim_->port(), "PVEAPIToken=root@pam!test=secret");
  }

  void TearDown() override {
    sim_.reset();  // stops the CTs, deletes their namespaces and the bridges
    for (const auto& ns : nodes_ns_) run_command({"ip", "netns", "del", ns});
    if (dir_.empty()) return;
    for (const char* f : {"/key", "/key.pub"}) ::unlink((dir_ + f).c_str());
    ::rmdir(dir_.c_str());
  }

  // Clones `tmpl` on `node` to `vmid`, starts it, returns its address.
  std::string start(const std::string& node, int tmpl, int vmid) {
    const Https& api = *api_;
    auto post = [&](const std::string& path, const std::string& body) {
      auto a = api("POST", "/nodes/" + node + "/lxc/" + path, body);
      EXPECT_EQ(a.status, 200) << a.reason;
      return api.wait_task(node, a.data().convert<std::string>(), 20000);
    };
    EXPECT_EQ(post(std::to_string(tmpl) + "/clone", "newid=" + std::to_string(vmid)), "OK");
    EXPECT_EQ(post(std::to_string(vmid) + "/status/start", ""), "OK");
    auto list = api("GET", "/nodes/" + node + "/lxc/" + std::to_string(vmid) + "/interfaces");
    auto ifaces = list.array();
    for (std::size_t i = 0; ifaces && i < ifaces->size(); ++i)
      if (ifaces->getObject(i)->getValue<std::string>("name") == "eth0" &&
          ifaces->getObject(i)->has("inet")) {
        auto inet = ifaces->getObject(i)->getValue<std::string>("inet");
        return inet.substr(0, inet.find('/'));
      }
    return "";
  }

  std::vector<std::string> nodes_ns_;
  std::string dir_, net_, bridge_;
  std::unique_ptr<pvesim::Simulator> sim_;
  std::unique_ptr<Https> api_;
};

TEST_F(PvesimClusterNetns, EachContainerIsOnItsOwnNodesBridge) {
  std::string a = start("node1", 9001, 101), b = start("node2", 9002, 102);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_NE(a, b);  // one lease range for the cluster
  // The host ends of the veths are in the node namespaces, not in ours.
  EXPECT_EQ(run_command({"ip", "-n", nodes_ns_[0], "link", "show", "dev", "fwpr101p0"}), 0);
  EXPECT_EQ(run_command({"ip", "-n", nodes_ns_[1], "link", "show", "dev", "fwpr102p0"}), 0);
  EXPECT_NE(run_command({"ip", "link", "show", "dev", "fwpr101p0"}), 0);
  EXPECT_NE(run_command({"ip", "-n", nodes_ns_[0], "link", "show", "dev", "fwpr102p0"}), 0);
  std::string pid = std::to_string(::getpid());
  EXPECT_TRUE(netns_listed("pvc1-" + pid + "-101"));
  EXPECT_TRUE(netns_listed("pvc2-" + pid + "-102"));
  // Each CT's sshd answers on its own node's bridge, and the other node does not reach it.
  EXPECT_EQ(greeting(nodes_ns_[0], a, 22).rfind("SSH-2.0", 0), 0u);
  EXPECT_EQ(greeting(nodes_ns_[1], b, 22).rfind("SSH-2.0", 0), 0u);
  EXPECT_EQ(greeting(nodes_ns_[0], b, 22), "");
  EXPECT_EQ(greeting(nodes_ns_[1], a, 22), "");
  sim_.reset();
  EXPECT_FALSE(netns_listed("pvc1-" + pid + "-101"));
  EXPECT_NE(run_command({"ip", "-n", nodes_ns_[0], "link", "show", "dev", bridge_}), 0);
}

// A process killed before its cleanup leaves /etc/netns/<ns>; a later one whose pid (and so
// prefix) is the same must not start its CT with that host key.
TEST_F(PvesimClusterNetns, AStaleEtcNetnsIsNotTheNewContainers) {
  std::string etc = "/etc/netns/pvc1-" + std::to_string(::getpid()) + "-103";
  ASSERT_EQ(run_command({"mkdir", "-p", etc + "/ssh"}), 0);
  ASSERT_EQ(run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                         etc + "/ssh/ssh_host_ed25519_key"}),
            0);
  ASSERT_FALSE(start("node1", 9001, 103).empty());
  std::string listing;
  ASSERT_EQ(
      run_command({"ssh-keygen", "-l", "-f", etc + "/ssh/ssh_host_ed25519_key.pub"}, &listing), 0);
  EXPECT_NE(listing.find(sim_->ssh_host_key_fingerprint()), std::string::npos) << listing;
  sim_.reset();
  EXPECT_NE(::access(etc.c_str(), F_OK), 0);
}

}  // namespace
