// SIGKILL of the pvesim executable on the lxc backend: its containers keep running (LXC's
// monitors are not its children), and the sweep (`pvesim --lxc-sweep`, also done by the next
// lxc backend at its start) removes every container, cgroup, mount, loop image (mount point
// volumes too), bridge port and file the dead run left. The same executable's clones from a
// snapshot (LxcCloneTest).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "lxc_disk.h"
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
  // pvesim on the lxc backend in the namespace ns_, answering once its info file is there.
  void start_sim() {
    // Killed below, the simulator cannot remove its TLS directory: it makes it in dir_ instead.
    std::string tmpdir = "TMPDIR=" + dir_, netns = "--net=/run/netns/" + ns_;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execlp("env", "env", tmpdir.c_str(), "nsenter", netns.c_str(), PVESIM_BINARY, "--token",
               "root@pam!t=s", "--auth-delay-ms", "0", "--backend", "lxc", "--bridge", "lxswbr0",
               "--bridge-cidr", "10.97.0.1/16", "--dhcp-cidr", "10.97.0.0/16", "--authorized-keys",
               (dir_ + "/key.pub").c_str(), "--lxc-rootfs", PVS_LXC_ROOTFS, "--lxc-dir",
               dir_.c_str(), "--info-file", (dir_ + "/info").c_str(), "--log-level", "warn",
               nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 300 && ::access((dir_ + "/info").c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(::access((dir_ + "/info").c_str(), F_OK), 0);
  }
  // Polls `path` (curl `args`) until done(answer).
  template <typename Done>
  bool until(const std::string& path, const std::string& args, Done done) {
    for (int i = 0; i < 300; ++i) {
      if (done(api(path, args))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  static auto has(const std::string& text) {
    return [text](const std::string& out) { return out.find(text) != std::string::npos; };
  }
  // The simulator's run directory (<dir_>/pvesim-lxc/<run>), "" before it made one.
  std::string run_dir() const {
    std::string base = dir_ + "/pvesim-lxc/", run;
    sh("ls " + base, &run);
    while (!run.empty() && run.back() == '\n') run.pop_back();
    return run.empty() ? "" : base + run;
  }

  std::string dir_, ns_;
  pid_t pid_ = -1;
};

TEST_F(LxcSweepTest, KilledSimulatorLeavesNothingAfterTheSweep) {
  start_sim();
  if (HasFatalFailure()) return;
  for (int vmid : {100, 101}) {
    std::string ct = "/nodes/pve/lxc/" + std::to_string(vmid);
    // One clone of the template at a time (it is locked while one runs); start once unlocked.
    ASSERT_TRUE(until("/nodes/pve/lxc/9000/clone", "-X POST -d newid=" + std::to_string(vmid),
                      has("UPID")));
    ASSERT_TRUE(until(ct + "/config", "", [](const std::string& out) {
      return out.find("\"hostname\"") != std::string::npos &&
             out.find("\"lock\"") == std::string::npos;
    }));
    if (vmid == 100) {  // a mount point volume: an image loop-mounted inside its rootfs
      ASSERT_TRUE(until(ct + "/config", "-X PUT --data-urlencode mp0=local-lvm:0.1,mp=/data",
                        has("\"data\":null")));
    }
    ASSERT_TRUE(until(ct + "/status/start", "-X POST", has("UPID")));
  }
  auto wait_status = [&](int vmid, const std::string& want) {
    return until("/nodes/pve/lxc/" + std::to_string(vmid) + "/status/current", "",
                 has("\"status\":\"" + want + "\""));
  };
  ASSERT_TRUE(wait_status(100, "running"));
  ASSERT_TRUE(wait_status(101, "running"));

  std::string run = run_dir();
  ASSERT_FALSE(run.empty());

  auto mounts = pvesim::lxc::mounts_under(run);
  EXPECT_TRUE(std::any_of(mounts.begin(), mounts.end(),
                          [](const std::string& m) { return m.ends_with("/rootfs/data"); }));
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  // The containers outlive it.
  EXPECT_GT(lxctest::leftovers(run).size(), 4u);
  EXPECT_GT(lxctest::init_pid(run, 100), 0);

  std::string out;
  ASSERT_EQ(sh(in_ns(PVESIM_BINARY " --token x=y --lxc-sweep --lxc-dir " + dir_), &out), 0) << out;
  EXPECT_NE(out.find("swept 1"), std::string::npos) << out;
  EXPECT_EQ(lxctest::leftovers(run), std::vector<std::string>{});
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

// pvesim started in SetUp, stopped in TearDown by SIGTERM (it removes its containers itself;
// the sweep of LxcSweepTest::TearDown finds nothing then).
class LxcCloneTest : public LxcSweepTest {
 protected:
  void SetUp() override {
    LxcSweepTest::SetUp();
    if (!HasFatalFailure()) start_sim();
  }
  void TearDown() override {
    std::string run = run_dir();
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (!run.empty()) {
      EXPECT_EQ(lxctest::leftovers(run), std::vector<std::string>{});
    }
    LxcSweepTest::TearDown();
  }

  static std::string ct(int vmid) { return "/nodes/pve/lxc/" + std::to_string(vmid); }
  // Waits for the task whose UPID the API answer `started` holds: its exit status ("OK"), or
  // what went wrong.
  std::string task_exit(const std::string& started) {
    auto at = started.find("UPID:");
    if (at == std::string::npos) return "no task: " + started;
    std::string path = "/nodes/pve/tasks/" + started.substr(at, started.find('"', at) - at);
    if (!until(path + "/status", "", has("\"status\":\"stopped\""))) return "still running";
    std::string out = api(path + "/status");
    at = out.find("\"exitstatus\":\"");
    if (at == std::string::npos) return "no exit status: " + out;
    at += 14;
    return out.substr(at, out.find('"', at) - at);
  }
  // `script` (no single quotes) run by the running CT's sh, in all its namespaces (as its root).
  std::string in_ct(int vmid, const std::string& script) {
    pid_t init = lxctest::init_pid(run_dir(), vmid);
    if (init <= 0) return "<CT " + std::to_string(vmid) + " not running>";
    std::string out;
    int rc = sh("nsenter -t " + std::to_string(init) + " -a sh -c '" + script + "'", &out);
    return rc == 0 ? out : out + "<exit " + std::to_string(rc) + ">";
  }
  // What the running CT has at the paths the tests write and delete.
  std::string files(int vmid) {
    return in_ct(vmid,
                 "for f in /root/a.txt /root/b.txt /etc/motd /etc/issue.net; do "
                 "if [ -f $f ]; then echo $f file; elif [ -e $f ]; then echo $f other; "
                 "else echo $f absent; fi; done");
  }
};

// pve-container's full clone with `snapname` copies the snapshot's volume, also of a running CT:
// the clone has what the CT had then (a file written before it, a template file deleted before
// it stays deleted: no whiteout copied as a file), not what it has now (a file written after
// it, a template file deleted after it). A snapshot taken before the CT's first start (no disk
// yet) is the template's tree.
TEST_F(LxcCloneTest, FullCloneOfARunningCtIsTheSnapshotsTree) {
  ASSERT_EQ(task_exit(api(ct(9000) + "/clone", "-X POST -d newid=100")), "OK");
  ASSERT_EQ(task_exit(api(ct(100) + "/snapshot", "-X POST -d snapname=s0")), "OK");
  ASSERT_EQ(task_exit(api(ct(100) + "/status/start", "-X POST")), "OK");
  ASSERT_EQ(in_ct(100, "echo a > /root/a.txt && rm /etc/issue.net"), "");
  ASSERT_EQ(task_exit(api(ct(100) + "/snapshot", "-X POST -d snapname=s1")), "OK");
  ASSERT_EQ(in_ct(100, "echo b > /root/b.txt && rm /etc/motd"), "");

  ASSERT_EQ(task_exit(api(ct(100) + "/clone", "-X POST -d newid=101 -d full=1 -d snapname=s1")),
            "OK");
  for (const auto& m : pvesim::lxc::mounts_under(run_dir()))  // the snapshot's view is gone
    EXPECT_EQ(m.find("snapview"), std::string::npos) << m;
  ASSERT_EQ(task_exit(api(ct(101) + "/status/start", "-X POST")), "OK");
  EXPECT_EQ(files(101),
            "/root/a.txt file\n/root/b.txt absent\n/etc/motd file\n/etc/issue.net absent\n");
  EXPECT_EQ(in_ct(101, "cat /root/a.txt"), "a\n");

  ASSERT_EQ(task_exit(api(ct(100) + "/clone", "-X POST -d newid=102 -d full=1 -d snapname=s0")),
            "OK");
  ASSERT_EQ(task_exit(api(ct(102) + "/status/start", "-X POST")), "OK");
  EXPECT_EQ(files(102),
            "/root/a.txt absent\n/root/b.txt absent\n/etc/motd file\n/etc/issue.net file\n");
  // The source is as it was.
  EXPECT_EQ(files(100),
            "/root/a.txt file\n/root/b.txt file\n/etc/motd absent\n/etc/issue.net absent\n");
}

// A snapshot the CT does not have: the request fails at once (HTTP 500, no task) with
// pve-container's message, linked or full; no clone is made and the source stays unlocked.
TEST_F(LxcCloneTest, CloneFromAMissingSnapshotFails) {
  ASSERT_EQ(task_exit(api(ct(9000) + "/clone", "-X POST -d newid=100")), "OK");
  ASSERT_EQ(task_exit(api(ct(100) + "/status/start", "-X POST")), "OK");
  for (const char* full : {"1", "0"}) {
    std::string out = api(ct(100) + "/clone", "-X POST -d newid=101 -d snapname=nope -d full=" +
                                                  std::string(full) + " -w ' %{http_code}'");
    EXPECT_NE(out.find("\"message\":\"snapshot 'nope' does not exist\\n\""), std::string::npos)
        << out;
    EXPECT_TRUE(out.ends_with(" 500")) << out;
  }
  std::string out = api(ct(100) + "/clone", "-X POST -d newid=101 -d full=1 -w ' %{http_code}'");
  EXPECT_NE(out.find("Full clone of a running container is only possible from a snapshot"),
            std::string::npos)
      << out;
  EXPECT_TRUE(out.ends_with(" 500")) << out;
  EXPECT_NE(api(ct(101) + "/config").find("does not exist"), std::string::npos);
  EXPECT_EQ(api(ct(100) + "/config").find("\"lock\""), std::string::npos);
  std::string tasks = api("/nodes/pve/tasks");
  EXPECT_NE(tasks.find("vzstart:100"), std::string::npos) << tasks;  // the list has tasks
  EXPECT_EQ(tasks.find("vzclone:100"), std::string::npos) << tasks;
}

}  // namespace
}  // namespace pvs
