// dhcp_hosts_dir: the agent publishes its bindings as dnsmasq reservations. The real agent
// binary in a namespace of its own with the contract's sets; the last test runs a real dnsmasq
// on a bridge and a real DHCP client (busybox udhcpc) in a "container" namespace.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "agent/agent_test_util.h"

namespace pvs::test {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every entry of the directory: name -> content ("<dir>" for directories).
std::map<std::string, std::string> listing(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename();
    out[name] = e.is_directory() ? "<dir>" : read_text(e.path());
  }
  return out;
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

// `nft list set` of the namespace's port_mac set, elements only.
std::string port_macs(const NetNs& ns) {
  std::string out = ns.output("nft list set bridge sandbox_l2 port_mac");
  auto at = out.find("elements");
  return at == std::string::npos ? "" : out.substr(at, out.find('}', at) - at);
}

class AgentDhcpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_.load_contract();
    hosts_ = dir_.file("dhcp-hosts");
    fs::create_directory(hosts_);
  }
  std::string yaml() const { return "dhcp_hosts_dir: " + hosts_ + "\n"; }
  NetNs ns_;
  TempDir dir_;
  std::string hosts_;
};

TEST_F(AgentDhcpTest, FilesFollowBindAndUnbind) {
  AgentProcess agent(ns_, dir_, yaml());
  LineClient c(agent.socket());
  ASSERT_EQ(c.call("BIND veth100i0 BC:24:11:2A:3B:4C 10.99.0.7"), "OK");
  EXPECT_EQ(listing(hosts_),
            (std::map<std::string, std::string>{{"veth100i0", "bc:24:11:2a:3b:4c,10.99.0.7\n"}}));
  EXPECT_EQ(mode_of(hosts_ + "/veth100i0"), 0644u);  // dnsmasq reads it as an unprivileged user

  // Re-BIND with a new MAC and address rewrites the file; a second port gets its own.
  ASSERT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:08 10.99.0.8"), "OK");
  ASSERT_EQ(c.call("BIND fwpr101p0 bc:24:11:00:00:09 10.99.0.9"), "OK");
  EXPECT_EQ(listing(hosts_),
            (std::map<std::string, std::string>{{"veth100i0", "bc:24:11:00:00:08,10.99.0.8\n"},
                                                {"fwpr101p0", "bc:24:11:00:00:09,10.99.0.9\n"}}));

  ASSERT_EQ(c.call("UNBIND veth100i0"), "OK");
  EXPECT_EQ(listing(hosts_),
            (std::map<std::string, std::string>{{"fwpr101p0", "bc:24:11:00:00:09,10.99.0.9\n"}}));
  ASSERT_EQ(c.call("UNBIND veth100i0"), "OK");  // idempotent, file already gone
  ASSERT_EQ(c.call("UNBIND fwpr101p0"), "OK");
  EXPECT_TRUE(listing(hosts_).empty());
  EXPECT_NE(c.call("STATUS").find(" dhcp_hosts=ok"), std::string::npos);
}

TEST_F(AgentDhcpTest, OffByDefault) {
  AgentProcess agent(ns_, dir_);
  LineClient c(agent.socket());
  ASSERT_EQ(c.call("BIND veth100i0 bc:24:11:2a:3b:4c 10.99.0.7"), "OK");
  EXPECT_TRUE(listing(hosts_).empty());
  EXPECT_NE(c.call("STATUS").find(" dhcp_hosts=off"), std::string::npos);
}

TEST_F(AgentDhcpTest, RestartMirrorsTheBindingsExactly) {
  AgentProcess agent(ns_, dir_, yaml());
  {
    LineClient c(agent.socket());
    ASSERT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:07 10.99.0.7"), "OK");
    ASSERT_EQ(c.call("BIND veth101i0 bc:24:11:00:00:08 10.99.0.8"), "OK");
    ASSERT_EQ(c.call("BIND veth102i0 bc:24:11:00:00:09 10.99.0.9"), "OK");
  }
  agent.kill_now();
  // While it is down: one reservation lost, one changed by hand, a stale one and a leftover temp
  // file appear; a subdirectory and dot files that are not ours are left alone.
  fs::remove(hosts_ + "/veth100i0");
  std::ofstream(hosts_ + "/veth101i0") << "02:00:00:00:00:01,10.99.9.9\n";
  std::ofstream(hosts_ + "/veth999i0") << "bc:24:11:00:00:99,10.99.0.99\n";
  std::ofstream(hosts_ + "/.veth102i0.tmp") << "half";
  std::ofstream(hosts_ + "/.keep") << "";
  fs::create_directory(hosts_ + "/subdir");
  agent.start();
  EXPECT_EQ(listing(hosts_),
            (std::map<std::string, std::string>{{"veth100i0", "bc:24:11:00:00:07,10.99.0.7\n"},
                                                {"veth101i0", "bc:24:11:00:00:08,10.99.0.8\n"},
                                                {"veth102i0", "bc:24:11:00:00:09,10.99.0.9\n"},
                                                {".keep", ""},
                                                {"subdir", "<dir>"}}));
  for (const char* f : {"veth100i0", "veth101i0", "veth102i0"}) {
    EXPECT_EQ(mode_of(hosts_ + "/" + f), 0644u) << f;
  }
  LineClient c(agent.socket());
  EXPECT_NE(c.call("STATUS").find(" dhcp_hosts=ok"), std::string::npos);
}

TEST_F(AgentDhcpTest, MissingDirectoryIsCreatedAtStart) {
  std::string nested = dir_.file("new-hosts");
  AgentProcess agent(ns_, dir_, "dhcp_hosts_dir: " + nested + "\n");
  ASSERT_TRUE(fs::is_directory(nested));
  EXPECT_EQ(mode_of(nested), 0755u);
  LineClient c(agent.socket());
  ASSERT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:07 10.99.0.7"), "OK");
  EXPECT_EQ(read_text(nested + "/veth100i0"), "bc:24:11:00:00:07,10.99.0.7\n");
  EXPECT_NE(agent.log_text().find("restart dnsmasq"), std::string::npos) << agent.log_text();
}

// chattr +i: not even root may create files in the directory (the tests run as root, which file
// modes do not stop). Undone however the test ends.
class Immutable {
 public:
  explicit Immutable(std::string path) : path_(std::move(path)) { must_run("chattr +i " + path_); }
  ~Immutable() { (void)shell_output("chattr -i " + path_); }
  Immutable(const Immutable&) = delete;
  Immutable& operator=(const Immutable&) = delete;

 private:
  std::string path_;
};

TEST_F(AgentDhcpTest, UnwritableDirectoryFailsBindAndChangesNothing) {
  AgentProcess agent(ns_, dir_, yaml());
  LineClient c(agent.socket());
  ASSERT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:07 10.99.0.7"), "OK");
  std::string macs_before = port_macs(ns_);
  ASSERT_NE(macs_before.find("bc:24:11:00:00:07"), std::string::npos) << macs_before;
  {
    Immutable lock(hosts_);
    std::string reply = c.call("BIND veth101i0 bc:24:11:00:00:08 10.99.0.8");
    EXPECT_TRUE(reply.starts_with("ERR 500 dhcp reservation: ")) << reply;
    reply = c.call("BIND veth100i0 bc:24:11:00:00:09 10.99.0.9");  // a re-BIND too
    EXPECT_TRUE(reply.starts_with("ERR 500 dhcp reservation: ")) << reply;
    // Neither the kernel nor the desired state moved, and the old reservation is intact.
    EXPECT_EQ(port_macs(ns_), macs_before);
    EXPECT_EQ(c.call("BINDINGS"), "OK 1 veth100i0=bc:24:11:00:00:07/10.99.0.7");
    EXPECT_EQ(listing(hosts_),
              (std::map<std::string, std::string>{{"veth100i0", "bc:24:11:00:00:07,10.99.0.7\n"}}));
    // UNBIND still succeeds (the L2 guard stops the port); the reservation stays behind.
    EXPECT_EQ(c.call("UNBIND veth100i0"), "OK");
    EXPECT_EQ(c.call("BINDINGS"), "OK 0");
    EXPECT_NE(c.call("STATUS").find(" dhcp_hosts=error"), std::string::npos);
  }
  // Once the directory is writable again, the agent tidies it up by itself.
  for (int i = 0; i < 400 && !listing(hosts_).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(listing(hosts_).empty());
  EXPECT_NE(c.call("STATUS").find(" dhcp_hosts=ok"), std::string::npos);
  ASSERT_EQ(c.call("BIND veth101i0 bc:24:11:00:00:08 10.99.0.8"), "OK");
  EXPECT_EQ(read_text(hosts_ + "/veth101i0"), "bc:24:11:00:00:08,10.99.0.8\n");
  // The agent was running all along.
  EXPECT_TRUE(agent.running());
}

TEST_F(AgentDhcpTest, FailedNftCommitTakesTheNewReservationBack) {
  // port_ip4 holds at most one element: the second port's BIND passes every check, writes its
  // reservation, and then the kernel refuses the batch (set full).
  ns_.run(
      "nft delete set bridge sandbox_l2 port_ip4 && nft add set bridge sandbox_l2 port_ip4 "
      "\"{ type ifname . ipv4_addr; size 1; }\"");
  AgentProcess agent(ns_, dir_, yaml());
  LineClient c(agent.socket());
  ASSERT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:07 10.99.0.7"), "OK");
  std::string reply = c.call("BIND veth101i0 bc:24:11:00:00:08 10.99.0.8");
  EXPECT_TRUE(reply.starts_with("ERR 413 nftables")) << reply;  // ENFILE: the set is full
  EXPECT_EQ(c.call("BINDINGS"), "OK 1 veth100i0=bc:24:11:00:00:07/10.99.0.7");
  EXPECT_EQ(listing(hosts_),
            (std::map<std::string, std::string>{{"veth100i0", "bc:24:11:00:00:07,10.99.0.7\n"}}));
  EXPECT_NE(c.call("STATUS").find(" dhcp_hosts=ok"), std::string::npos);
}

// ---- the contract with dnsmasq, for real -------------------------------------------------------

// A process started inside a namespace, killed by pid.
class NsProcess {
 public:
  NsProcess(const NetNs& ns, std::vector<std::string> argv, const std::string& log) {
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      int fd = ::open(ns.path().c_str(), O_RDONLY);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) ::_exit(120);
      int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(out, 1);
      ::dup2(out, 2);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
  }
  ~NsProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  NsProcess(const NsProcess&) = delete;
  NsProcess& operator=(const NsProcess&) = delete;
  bool running() {
    int status = 0;
    return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
  }

 private:
  pid_t pid_ = -1;
};

bool wait_for(const std::function<bool()>& done, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms; waited += 50) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

TEST_F(AgentDhcpTest, DnsmasqHandsOutExactlyTheBoundAddress) {
  // The node: the agent and dnsmasq in ns_, a bridge with the gateway address. The container:
  // its own namespace, eth0 on a veth whose node end is a bridge port named like Proxmox's.
  NetNs ct;
  const std::string port = "veth100i0";  // interface names are per namespace
  ns_.run("ip link add br0 type bridge && ip addr add 10.99.0.1/16 dev br0 && ip link set br0 up");
  ns_.run("ip link add " + port + " type veth peer name eth0 && ip link set eth0 netns " +
          ct.name() + " && ip link set " + port + " master br0 up");
  ct.run("ip link set lo up && ip link set eth0 address bc:24:11:00:00:07 && ip link set eth0 up");

  AgentProcess agent(ns_, dir_, yaml());  // the directory exists before dnsmasq starts
  std::string dnsmasq_log = dir_.file("dnsmasq.log");
  NsProcess dnsmasq(
      ns_,
      {"dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--bind-interfaces",
       "--interface=br0", "--dhcp-range=10.99.0.0,static,255.255.0.0,1h",
       "--dhcp-ignore=tag:!known", "--dhcp-hostsdir=" + hosts_,
       "--dhcp-leasefile=" + dir_.file("leases"), "--user=root",
       "--pid-file=" + dir_.file("dnsmasq.pid"), "--log-facility=" + dnsmasq_log, "--log-dhcp"},
      dir_.file("dnsmasq.out"));
  ASSERT_TRUE(
      wait_for([&] { return read_text(dnsmasq_log).find("DHCP") != std::string::npos; }, 5000))
      << read_text(dnsmasq_log) << read_text(dir_.file("dnsmasq.out"));
  ASSERT_TRUE(dnsmasq.running()) << read_text(dir_.file("dnsmasq.out"));

  // The client's event script: configure the lease it got, and record it.
  std::string script = dir_.file("udhcpc.sh");
  std::string events = dir_.file("events");
  std::ofstream(script) << "#!/bin/sh\n"
                        << "echo \"$1 ${ip:-} ${mask:-}\" >> " << events << "\n"
                        << "case \"$1\" in\n"
                        << "bound|renew) ip addr add \"$ip/$mask\" dev \"$interface\" ;;\n"
                        << "esac\n";
  ::chmod(script.c_str(), 0755);
  auto udhcpc = [&](int* status) {
    return shell_output(
        "ip netns exec " + ct.name() + " busybox udhcpc -f -q -n -t 3 -T 1 -i eth0 -s " + script,
        status);
  };

  // Bound: the reservation appears through inotify and the client gets exactly its address.
  LineClient c(agent.socket());
  ASSERT_EQ(c.call("BIND " + port + " BC:24:11:00:00:07 10.99.0.7"), "OK");
  int status = 0;
  std::string out = udhcpc(&status);
  EXPECT_EQ(status, 0) << out << read_text(dnsmasq_log);
  EXPECT_NE(read_text(events).find("bound 10.99.0.7 16"), std::string::npos)
      << read_text(events) << out;
  EXPECT_NE(ct.output("ip -4 addr show dev eth0").find("inet 10.99.0.7/16"), std::string::npos);
  // dnsmasq read the file through inotify (it was started before the file existed).
  EXPECT_NE(read_text(dnsmasq_log).find("read " + hosts_ + "/" + port), std::string::npos)
      << read_text(dnsmasq_log);

  // A MAC that was never bound gets no lease at all.
  ct.run("ip addr flush dev eth0 && ip link set eth0 address 02:00:00:00:00:99");
  std::ofstream(events, std::ios::trunc).close();
  out = udhcpc(&status);
  EXPECT_NE(status, 0) << out;
  EXPECT_EQ(read_text(events).find("bound"), std::string::npos) << read_text(events);
  EXPECT_EQ(ct.output("ip -4 addr show dev eth0").find("inet "), std::string::npos);
  EXPECT_TRUE(dnsmasq.running());
}

}  // namespace
}  // namespace pvs::test
