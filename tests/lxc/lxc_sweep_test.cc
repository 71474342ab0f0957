// SIGKILL of the pvesim executable on the lxc backend: its containers keep running (LXC's
// monitors are not its children), and the sweep (`pvesim --lxc-sweep`, also done by the next
// lxc backend at its start) removes every container, cgroup, mount, loop image, bridge port and
// file the dead run left.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "lxc_support.h"

#ifndef PVESIM_BINARY
#error "PVESIM_BINARY must name the pvesim executable"
#endif
#ifndef PVS_LXC_ROOTFS
#error "PVS_LXC_ROOTFS must name the template's root file system"
#endif

namespace pvs {
namespace {

using lxctest::sh;

class LxcSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lxcsweep.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0711);  // the containers' root reaches its rootfs below it
    ns_ = "lxsw" + std::to_string(::getpid());
    ASSERT_EQ(sh("ip netns add " + ns_ + " && ip -n " + ns_ +
                 " link set lo up && ssh-keygen -q -t " + "ed25519 -N '' -f " + dir_ + "/key"),
              0);
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    sh(in_ns(PVESIM_BINARY " --token x=y --lxc-sweep --lxc-dir " + dir_));
    sh("ip netns del " + ns_);
    sh("rm -rf --one-file-system " + dir_);
  }
  std::string in_ns(const std::string& command) const {
    return "nsenter --net=/run/netns/" + ns_ + " " + command;
  }
  // An API request with curl (in the node's namespace): its output.
  std::string api(const std::string& path, const std::string& args = "") {
    std::string out;
    std::ifstream in(dir_ + "/info");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string port, cert;
    std::istringstream lines(ss.str());
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("port=", 0) == 0) port = line.substr(5);
      if (line.rfind("cert=", 0) == 0) cert = line.substr(5);
    }
    sh(in_ns("curl -s --cacert " + cert + " -H 'Authorization: PVEAPIToken=root@pam!t=s' " + args +
             " https://127.0.0.1:" + port + "/api2/json" + path),
       &out);
    return out;
  }

  std::string dir_, ns_;
  pid_t pid_ = -1;
};

TEST_F(LxcSweepTest, KilledSimulatorLeavesNothingAfterTheSweep) {
  // Killed below, the simulator cannot remove its TLS directory: it makes it in dir_ instead.
  std::string tmpdir = "TMPDIR=" + dir_, netns = "--net=/run/netns/" + ns_;
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execlp("env", "env", tmpdir.c_str(), "nsenter", netns.c_str(), PVESIM_BINARY, "--token",
             "root@pam!t=s", "--auth-delay-ms", "0", "--backend", "lxc", "--bridge", "lxswbr0",
             "--bridge-cidr", "10.97.0.1/16", "--dhcp-cidr", "10.97.0.0/16", "--authorized-keys",
             (dir_ + "/key.pub").c_str(), "--lxc-rootfs", PVS_LXC_ROOTFS, "--lxc-dir", dir_.c_str(),
             "--info-file", (dir_ + "/info").c_str(), "--log-level", "warn", nullptr);
    ::_exit(127);
  }
  for (int i = 0; i < 300 && ::access((dir_ + "/info").c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(::access((dir_ + "/info").c_str(), F_OK), 0);
  auto until = [&](const std::string& path, const std::string& args, auto done) {
    for (int i = 0; i < 300; ++i) {
      if (done(api(path, args))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  auto has = [](const std::string& text) {
    return [text](const std::string& out) { return out.find(text) != std::string::npos; };
  };
  for (int vmid : {100, 101}) {
    std::string ct = "/nodes/pve/lxc/" + std::to_string(vmid);
    // One clone of the template at a time (it is locked while one runs); start once unlocked.
    ASSERT_TRUE(until("/nodes/pve/lxc/9000/clone", "-X POST -d newid=" + std::to_string(vmid),
                      has("UPID")));
    ASSERT_TRUE(until(ct + "/config", "", [](const std::string& out) {
      return out.find("\"hostname\"") != std::string::npos &&
             out.find("\"lock\"") == std::string::npos;
    }));
    ASSERT_TRUE(until(ct + "/status/start", "-X POST", has("UPID")));
  }
  auto wait_status = [&](int vmid, const std::string& want) {
    return until("/nodes/pve/lxc/" + std::to_string(vmid) + "/status/current", "",
                 has("\"status\":\"" + want + "\""));
  };
  ASSERT_TRUE(wait_status(100, "running"));
  ASSERT_TRUE(wait_status(101, "running"));

  std::string base = dir_ + "/pvesim-lxc/", run;
  sh("ls " + base, &run);
  while (!run.empty() && run.back() == '\n') run.pop_back();
  ASSERT_FALSE(run.empty());
  std::string run_dir = base + run;

  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  // The containers outlive it.
  EXPECT_GT(lxctest::leftovers(run_dir).size(), 4u);
  EXPECT_GT(lxctest::init_pid(run_dir, 100), 0);

  std::string out;
  ASSERT_EQ(sh(in_ns(PVESIM_BINARY " --token x=y --lxc-sweep --lxc-dir " + dir_), &out), 0) << out;
  EXPECT_NE(out.find("swept 1"), std::string::npos) << out;
  EXPECT_EQ(lxctest::leftovers(run_dir), std::vector<std::string>{});
  std::string links;
  sh("ip -n " + ns_ + " -br link", &links);
  EXPECT_EQ(links.find("fwpr"), std::string::npos) << links;
  EXPECT_EQ(links.find("lx10"), std::string::npos) << links;
}

// Simulators start side by side (ctest runs them in parallel), and each one's start sweeps what
// dead ones left: a young run whose owner record is not there yet, or not yet whole, is another
// simulator's being set up and stays; a run whose owner is dead goes.
TEST_F(LxcSweepTest, ARunBeingSetUpIsLeftAlone) {
  std::string base = dir_ + "/pvesim-lxc/";
  ASSERT_EQ(sh("mkdir -p " + base + "a00001 " + base + "a00002 " + base + "a00003 && : > " + base +
               "a00002/owner && echo '999999999 1' > " + base + "a00003/owner"),
            0);
  std::string out;
  ASSERT_EQ(sh(PVESIM_BINARY " --token x=y --lxc-sweep --lxc-dir " + dir_, &out), 0) << out;
  EXPECT_NE(out.find("swept 1"), std::string::npos) << out;
  EXPECT_EQ(::access((base + "a00001").c_str(), F_OK), 0);
  EXPECT_EQ(::access((base + "a00002").c_str(), F_OK), 0);
  EXPECT_NE(::access((base + "a00003").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace pvs
