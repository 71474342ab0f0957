// The whole stack on real containers (pvs::test::Stack with pvesim's lxc backend): every
// sandbox is an unprivileged LXC container (root inside is uid 100000 on the node) with its own
// root file system (an overlay over the debootstrap template on a disk image of its size), its
// own sshd as init, the memory and cpuset limits of its config, the pids cap of a Proxmox
// sandbox.
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>
#include <mutex>
#include <thread>

#include "lxc_config.h"
#include "lxc_support.h"
#include "manager_testing.h"
#include "pvesandbox/manager.h"
#include "pvesandbox/ssh_pty.h"
#include "pvesandbox/ssh_session.h"
#include "sandbox_run.h"
#include "sim.h"
#include "support/stack_fixture.h"

namespace pvs {
namespace {

using std::chrono::milliseconds;

using lxctest::trim;

class LxcE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StackOptions o;
    o.backend = "lxc";
    stack_ = std::make_unique<test::Stack>(o);
    run_dir_ = lxctest::own_run_dir();
    ASSERT_FALSE(run_dir_.empty());
  }
  // Nothing of the run is left: no container, cgroup, mount (overlay, loop image) or file.
  void TearDown() override {
    stack_.reset();
    EXPECT_EQ(lxctest::leftovers(run_dir_), std::vector<std::string>{});
  }

  std::unique_ptr<Manager> open(ManagerConfig c) {
    auto m = lifecycle::open_manager(std::move(c), {});
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
  }
  std::unique_ptr<Manager> open() { return open(stack_->manager_config()); }

  static std::string run(Sandbox& sb, const std::string& command) {
    return lxctest::run(sb, command);
  }

  std::unique_ptr<test::Stack> stack_;
  std::string run_dir_;
};

TEST_F(LxcE2eTest, LifecycleAsRootInARealContainer) {
  auto m = open();
  ASSERT_TRUE(m);
  CreateOptions o;
  o.hostname = "box1";
  auto created = m->create(o);
  ASSERT_TRUE(created) << created.error().message;
  auto& sb = **created;
  auto info = sb.info();

  // Root inside, shifted on the node; its own hostname.
  EXPECT_EQ(run(sb, "id -u; id -un"), "0\nroot");
  EXPECT_EQ(run(sb, "tr -s ' ' < /proc/self/uid_map"), " 0 100000 65536");
  EXPECT_EQ(run(sb, "hostname"), "box1");
  pid_t init = lxctest::init_pid(run_dir_, info.vmid);
  ASSERT_GT(init, 0);
  EXPECT_EQ(lxctest::host_uid(init), 100000);

  // The sandbox's own host key replaced the template's in the container's real /etc/ssh.
  ASSERT_FALSE(info.host_key.empty());
  EXPECT_NE(info.host_key, stack_->sim().ssh_host_key_fingerprint());
  std::string listed = run(sb, "ssh-keygen -l -f /etc/ssh/ssh_host_ed25519_key.pub");
  EXPECT_NE(listed.find(info.host_key), std::string::npos) << listed;
  EXPECT_EQ(run(sb, "ls /etc/ssh | grep -c '^ssh_host_.*_key$'"), "1");

  // SFTP as root into the container's own file system (files of root are 100000 on the node).
  ASSERT_TRUE(sb.write_file("/root/file.txt", "hello container", 0600));
  auto back = sb.read_file("/root/file.txt");
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, "hello container");
  EXPECT_EQ(run(sb, "stat -c '%u %a' /root/file.txt"), "0 600");
  std::string out;
  lxctest::sh("stat -c %u /proc/" + std::to_string(init) + "/root/root/file.txt", &out);
  EXPECT_EQ(trim(out), "100000");

  // A terminal runs the container's bash as root.
  std::mutex mu;
  std::string screen;
  PtyOptions po;
  po.command = "bash --norc";
  po.on_output = [&](std::string_view bytes) {
    std::lock_guard lock(mu);
    screen.append(bytes);
  };
  auto pty = sb.open_pty(po);
  ASSERT_TRUE(pty) << pty.error().message;
  ASSERT_TRUE((*pty)->write("echo \"$((6 * 7))-$(id -u)-${BASH_VERSINFO[0]}\"; exit\n"));
  ASSERT_TRUE((*pty)->wait(milliseconds(10000)).has_value());
  {
    std::lock_guard lock(mu);
    EXPECT_NE(screen.find("42-0-5"), std::string::npos) << screen;
  }

  // Proxmox's status reports the container's real memory use.
  auto st = sb.status();
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->status, "running");
  EXPECT_GT(st->mem, 0);
  EXPECT_LT(st->mem, 48ull << 20);  // sshd and a session: a few MiB (the model says 48)

  ASSERT_TRUE(sb.destroy());
  EXPECT_TRUE(stack_->containers().empty());
  EXPECT_EQ(lxctest::host_uid(init), -1);
  EXPECT_TRUE(stack_->bound_ports().empty());
}

// Snapshots keep the container's files (a copy of its writable layer); a container whose init
// dies is stopped, as Proxmox reports it.
TEST_F(LxcE2eTest, SnapshotsRollBackFilesAndADeadInitIsStopped) {
  auto m = open();
  ASSERT_TRUE(m);
  auto created = m->create({});
  ASSERT_TRUE(created) << created.error().message;
  auto& sb = **created;
  ASSERT_TRUE(sb.write_file("/root/v.txt", "one", 0644));
  ASSERT_TRUE(sb.snapshot("s1"));
  ASSERT_TRUE(sb.write_file("/root/v.txt", "two", 0644));
  ASSERT_TRUE(sb.write_file("/root/later.txt", "x", 0644));
  auto rolled = sb.rollback("s1");
  ASSERT_TRUE(rolled) << rolled.error().message;
  EXPECT_EQ(run(sb, "cat /root/v.txt; test -e /root/later.txt || echo gone"),
            "onegone");  // the file has no newline

  pid_t init = lxctest::init_pid(run_dir_, sb.info().vmid);
  ASSERT_GT(init, 0);
  ASSERT_EQ(::kill(init, SIGKILL), 0);
  std::string state;
  for (int i = 0; i < 100 && state != "stopped"; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    auto st = sb.status();
    state = st ? st->status : "";
  }
  EXPECT_EQ(state, "stopped");
  ASSERT_TRUE(sb.destroy());
}

TEST_F(LxcE2eTest, MemoryCpusAndDiskAreEnforced) {
  auto m = open();
  ASSERT_TRUE(m);
  CreateOptions o;
  o.cpus = 1;
  o.memory_mb = 128;
  o.disk_gb = 2;  // the template has 1 GiB: the disk is grown
  auto created = m->create(o);
  ASSERT_TRUE(created) << created.error().message;
  auto& sb = **created;

  // More than memory_mb: the allocating process is killed, the sandbox lives on.
  EXPECT_EQ(run(sb, "python3 -c 'b = bytearray(256 << 20)' 2>/dev/null; echo rc=$?"), "rc=137");
  EXPECT_EQ(run(sb, "echo alive"), "alive");
  EXPECT_EQ(run(sb, "nproc"), "1");
  // Its one CPU is the vmid's (mod the node's), so CTs spread over the node as Proxmox's
  // balancing spreads them, not all on CPU 0.
  EXPECT_EQ(run(sb, "grep Cpus_allowed_list /proc/self/status | cut -f2"),
            std::to_string(sb.info().vmid % pvesim::lxc::node_cpus()));

  // The root file system is the size asked for; writing past it fails with ENOSPC, which an
  // upload reports as disk_full (the REST API's 507 insufficient_storage).
  long long size = std::atoll(run(sb, "df -B1 --output=size / | tail -1").c_str());
  EXPECT_GT(size, 1800ll << 20);
  EXPECT_LE(size, 2048ll << 20);
  EXPECT_NE(run(sb, "fallocate -l 3G /root/big 2>&1; rm -f /root/big").find("No space left"),
            std::string::npos);
  // Nearly full at once (fallocate), then full (dd stops at ENOSPC).
  EXPECT_EQ(run(sb,
                "fallocate -l $(( $(df -B1 --output=avail / | tail -1) - (16 << 20) )) /root/fill "
                "&& { dd if=/dev/zero of=/root/fill2 bs=1M 2>/dev/null; test $? = 1; } && "
                "test $(df -B1 --output=avail / | tail -1) -lt 1048576 && echo full"),
            "full");
  auto up = sb.write_file("/root/upload.bin", std::string(4 << 20, 'x'), 0644);
  ASSERT_FALSE(up);
  EXPECT_TRUE(up.error().is(SshErrc::kDiskFull)) << up.error().message;
  EXPECT_EQ(run(sb, "rm /root/fill2 && echo freed"), "freed");
  EXPECT_TRUE(sb.write_file("/root/upload.bin", std::string(4 << 20, 'x'), 0644));
  ASSERT_TRUE(sb.destroy());
}

// A file of the cgroup the node's process `pid` is in (pvesim's lookup: the v1 hierarchy that
// has `controller`, else the unified one), "" when there is none.
std::string host_cgroup(pid_t pid, const std::string& controller, const std::string& v1_file,
                        const std::string& v2_file) {
  std::ifstream file(pvesim::lxc::cgroup_file(pid, controller, v1_file, v2_file));
  std::string value;
  return file && std::getline(file, value) ? value : "";
}

// As on Proxmox, where the template's config carries lxc.cgroup2.pids.max (setup's
// TEMPLATE_PIDS_MAX, 1024) and every clone inherits it: a fork bomb ends at the container's
// cap, and the sandbox lives on (#46).
TEST_F(LxcE2eTest, ProcessesAreCappedAsOnProxmox) {
  auto m = open();
  ASSERT_TRUE(m);
  CreateOptions o;
  o.memory_mb = 1024;  // room for the processes: the cap must be what stops them
  auto created = m->create(o);
  ASSERT_TRUE(created) << created.error().message;
  auto& sb = **created;
  pid_t init = lxctest::init_pid(run_dir_, sb.info().vmid);
  ASSERT_GT(init, 0);
  EXPECT_EQ(host_cgroup(init, "pids", "pids.max", "pids.max"), "1024");
  // Processes until the kernel refuses one (EAGAIN), well before 1100.
  EXPECT_EQ(run(sb,
                "python3 -c '\n"
                "import errno, os\n"
                "n = 0\n"
                "try:\n"
                "    while n < 1100:\n"
                "        os.posix_spawn(\"/bin/sleep\", [\"sleep\", \"300\"], os.environ)\n"
                "        n += 1\n"
                "    print(\"no cap\")\n"
                "except OSError as e:\n"
                "    print(\"capped\" if e.errno == errno.EAGAIN and 1000 < n < 1024 else e)\n"
                "'; pkill -x sleep; true"),
            "capped");
  EXPECT_EQ(run(sb, "echo alive"), "alive");
  ASSERT_TRUE(sb.destroy());
}

TEST_F(LxcE2eTest, IsolatedFromTheNodeAndFromOtherSandboxes) {
  auto m = open();
  ASSERT_TRUE(m);
  auto a = m->create({});
  ASSERT_TRUE(a) << a.error().message;
  auto b = m->create({});
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_EQ(run(**a, "echo secret > /root/secret-a; (setsid sleep 301 >/dev/null 2>&1 &); echo ok"),
            "ok");

  for (auto* sb : {a->get(), b->get()}) {
    // No device to mount the node's disks from, and none to be made.
    EXPECT_NE(run(*sb, "mknod /root/blk b 7 0 2>/dev/null"), "");
    EXPECT_NE(run(*sb, "mount -o ro /dev/loop0 /mnt 2>/dev/null"), "");
    // The node's paths are not in its file system at all.
    EXPECT_EQ(run(*sb, "test -e " + stack_->dir() + " || test -e " + run_dir_ + " || echo none"),
              "none");
    // Loading a kernel module is refused (seccomp/capabilities of the user namespace).
    EXPECT_EQ(run(*sb,
                  "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); "
                  "print(l.syscall(175, None, 0, b\"\"), ctypes.get_errno())'"),
              "-1 1");
    // The bridge is not there to put raw frames on; the node's processes are not visible.
    EXPECT_NE(run(*sb,
                  "python3 -c 'import socket; s = socket.socket(socket.AF_PACKET, "
                  "socket.SOCK_RAW); s.bind((\"vmbr1\", 0))' 2>/dev/null"),
              "");
    EXPECT_EQ(run(*sb, "ip -br link | cut -d@ -f1 | cut -d' ' -f1 | sort | tr '\\n' ' '"),
              "eth0 lo");
    EXPECT_EQ(run(*sb, "ps -e -o comm= | grep -c -e pve-sandbox -e lxc -e dnsmasq"), "0<exit 1: >");
  }
  // Another sandbox's files and processes are not reachable.
  EXPECT_EQ(run(**b, "cat /root/secret-a 2>/dev/null || echo absent"), "absent");
  EXPECT_EQ(run(**b, "pgrep -f 'slee[p] 301' || echo none"), "none");
  EXPECT_EQ(run(**a, "cat /root/secret-a"), "secret");
  ASSERT_TRUE((*a)->destroy());
  ASSERT_TRUE((*b)->destroy());
}

TEST_F(LxcE2eTest, HotPoolMembersArePristine) {
  auto c = stack_->manager_config();
  HotPoolProfile p;
  p.name = "small";
  p.size = 1;
  p.cpus = 1;
  p.memory_mb = 256;
  c.hot_pools = {p};
  c.hot_pool_check_interval = milliseconds(200);
  // Any weight shows the plumbing; a high one keeps the member's boot clear of whatever else
  // runs on the machine (a low one is for production, where it is the point).
  c.hot_pool_member_cpuunits = 5000;
  auto m = open(c);
  ASSERT_TRUE(m);
  auto settled = [&] {
    for (int i = 0; i < 600; ++i) {
      auto pools = m->pools();
      if (!pools.empty() && pools[0].ready == 1 && pools[0].filling == 0) return true;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return false;
  };
  ASSERT_TRUE(settled());
  // The member runs at its own CPU weight (cpuunits, in its container's cgroup from the start);
  // the claim gives the sandbox the default, in its running container's cgroup.
  auto cpu_weight = [&](int vmid) {
    pid_t init = lxctest::init_pid(run_dir_, vmid);
    return init > 0 ? host_cgroup(init, "cpu", "cpu.shares", "cpu.weight") : "no init";
  };
  auto cts = stack_->containers();
  ASSERT_EQ(cts.size(), 1U);
  EXPECT_EQ(cpu_weight(cts[0]), "5000");
  CreateOptions o;
  o.profile = "small";
  auto first = m->create(o);
  ASSERT_TRUE(first) << first.error().message;
  int first_vmid = (*first)->info().vmid;
  EXPECT_EQ(first_vmid, cts[0]);
  const std::string claimed = cpu_weight(first_vmid);
  EXPECT_TRUE(claimed == "1024" || claimed == "100") << claimed;
  ASSERT_EQ(
      run(**first, "echo dirty > /root/marker; (setsid sleep 302 >/dev/null 2>&1 &); echo ok"),
      "ok");
  ASSERT_TRUE((*first)->destroy());

  ASSERT_TRUE(settled());
  auto second = m->create(o);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_NE((*second)->info().vmid, first_vmid);
  EXPECT_EQ(run(**second, "test -e /root/marker || echo clean"), "clean");
  EXPECT_EQ(run(**second, "pgrep -f 'slee[p] 302' || echo none"), "none");
  ASSERT_TRUE((*second)->destroy());
  m.reset();  // the pool's member goes with the manager's stack
}

}  // namespace
}  // namespace pvs
