// Mount point volumes on pvesim's lxc backend (in-process, its node bridge in a namespace of
// its own): a holder CT (a never-started linked clone of a second template) gets a volume by a
// config write; other CTs mount it at /mnt/data. Owners on the node are 100000 + the uid inside,
// ro=1 is read-only, the size is the limit, one running CT mounts a volume at a time, resize
// grows it, destroy frees it only with its owner.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <Poco/URI.h>

#include "lxc_support.h"
#include "sim.h"
#include "test_https.h"

#ifndef PVS_LXC_ROOTFS
#error "PVS_LXC_ROOTFS must name the template's root file system"
#endif

namespace pvs {
namespace {

using lxctest::sh;

class LxcVolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lxcvol.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0711);  // the containers' root reaches its rootfs below it
    ns_ = "lxvol" + std::to_string(::getpid());
    ASSERT_EQ(sh("ip netns add " + ns_ + " && ip -n " + ns_ + " link set lo up && ssh-keygen -q " +
                 "-t ed25519 -N '' -f " + dir_ + "/key"),
              0);
    pvesim::Options o;
    o.tokens["root@pam!test"] = "secret";
    o.auth_delay_ms = 0;
    o.default_task_ms = 5;
    o.templates = {9000, 8999};
    o.template_disk = "1G";
    o.backend = "lxc";
    o.dhcp_cidr = "10.95.0.0/16";
    o.netns.bridge = "lxvolbr0";
    o.netns.bridge_cidr = "10.95.0.1/16";
    o.netns.node_netns = ns_;
    o.netns.authorized_keys = dir_ + "/key.pub";
    o.netns.lxc_rootfs = PVS_LXC_ROOTFS;
    o.netns.lxc_dir = dir_;
    auto sim = pvesim::Simulator::start(o);
    ASSERT_TRUE(sim) << sim.error().to_string();
    sim_ = std::move(*sim);
    run_ = sim_->lxc_run_dir();
    api_ =
        std::make_unique<pvesim::testing::Https>(sim_->port(), "PVEAPIToken=root@pam!test=secret");
  }
  void TearDown() override {
    sim_.reset();  // stops and removes its containers, mounts and volumes
    if (!run_.empty()) {
      EXPECT_EQ(lxctest::leftovers(run_), std::vector<std::string>{});
    }
    sh("ip netns del " + ns_);
    sh("rm -rf --one-file-system " + dir_);
  }

  // A task's exit status (the answer if the request made none); its log in log_.
  std::string run(const std::string& method, const std::string& path,
                  const std::string& body = "") {
    auto a = (*api_)(method, "/nodes/pve" + path, body);
    if (a.status != 200) return a.body;
    std::string upid = a.data().toString();
    std::string exit = api_->wait_task("pve", upid, 30000);
    log_.clear();
    auto lines = (*api_)("GET", "/nodes/pve/tasks/" + upid + "/log").array();
    for (unsigned i = 0; lines && i < lines->size(); ++i)
      log_.push_back(lines->getObject(i)->getValue<std::string>("t"));
    return exit;
  }
  int set(int vmid, const std::string& key, const std::string& value) {
    std::string encoded;
    Poco::URI::encode(value, "&=+,:/", encoded);
    auto a =
        (*api_)("PUT", "/nodes/pve/lxc/" + std::to_string(vmid) + "/config", key + "=" + encoded);
    EXPECT_EQ(a.status, 200) << a.body;
    return a.status;
  }
  std::string config(int vmid, const std::string& key) {
    auto o = (*api_)("GET", "/nodes/pve/lxc/" + std::to_string(vmid) + "/config").object();
    return o && o->has(key) ? o->getValue<std::string>(key) : "<none>";
  }
  // `script` (no single quotes) run by the running CT's sh in all its namespaces, as its root.
  std::string in_ct(int vmid, const std::string& script) {
    pid_t init = lxctest::init_pid(run_, vmid);
    if (init <= 0) return "<CT " + std::to_string(vmid) + " not running>";
    std::string out;
    int rc = sh("nsenter -t " + std::to_string(init) + " -a sh -c '" + script + "' 2>&1", &out);
    return rc == 0 ? out : out + "<exit " + std::to_string(rc) + ">";
  }
  std::string clone_with_volume(int vmid, const std::string& mp0) {
    std::string e = run("POST", "/lxc/9000/clone", "newid=" + std::to_string(vmid));
    if (e != "OK") return e;
    return set(vmid, "mp0", mp0) == 200 ? "OK" : "config";
  }

  // A process that holds a read-only mount of `image` in a mount namespace of its own (its pid,
  // or -1): one made on the node would be copied by any mount namespace a parallel test made
  // meanwhile, and kept past our unmount.
  pid_t hold_a_mount(const std::string& image) {
    const std::string at = dir_ + "/linger", up = dir_ + "/linger.up";
    std::string pid;
    int rc = sh("mkdir -p " + at + " && (unshare --mount --propagation private sh -c 'mount -o " +
                    "loop,ro " + image + " " + at + " && touch " + up + " && exec sleep 300' " +
                    "</dev/null >/dev/null 2>&1 & echo $!) && for i in $(seq 200); do [ -e " + up +
                    " ] && exit 0; sleep 0.05; done; exit 1",
                &pid);
    EXPECT_EQ(rc, 0) << pid;
    return rc == 0 ? std::atoi(pid.c_str()) : -1;
  }
  // Whether every loop device of `image` is gone within 10 s (the kernel runs a device down
  // after its last unmount, later under load).
  bool loops_gone(const std::string& image) {
    std::string out;
    return sh("for i in $(seq 200); do [ -z \"$(losetup -j " + image +
                  ")\" ] && exit 0; sleep 0.05; done; exit 1",
              &out) == 0;
  }

  // What the volume's image holds, seen from the node (mounted read-only): the owners of r and
  // u/f, and u/f's text.
  std::string owners_on_node(const std::string& image) {
    std::string out;
    // In a mount namespace of its own, which ends with the shell: a mount made on the node
    // would be copied by any mount namespace a parallel test made meanwhile (and its loop
    // device kept past our unmount).
    EXPECT_EQ(sh("mkdir " + dir_ +
                     "/look && unshare --mount --propagation private sh -c \"mount "
                     "-o loop,ro " +
                     image + " " + dir_ + "/look && stat -c '%u %n' " + dir_ + "/look/r " + dir_ +
                     "/look/u/f && cat " + dir_ + "/look/u/f\"",
                 &out),
              0)
        << out;
    return out;
  }

  std::string dir_, ns_, run_;
  std::unique_ptr<pvesim::Simulator> sim_;
  std::unique_ptr<pvesim::testing::Https> api_;
  std::vector<std::string> log_;
};

TEST_F(LxcVolumeTest, AHoldersVolumeOutlivesTheContainersThatMountIt) {
  // The holder: a linked clone of the second template, never started, its volume made by the
  // config write (int(0.1 * 1024) MiB: filling it is quick).
  ASSERT_EQ(run("POST", "/lxc/8999/clone", "newid=300&hostname=holder"), "OK");
  ASSERT_EQ(set(300, "mp0", "local-lvm:0.1,mp=/volume,backup=1"), 200);
  EXPECT_EQ(config(300, "mp0"), "local-lvm:vm-300-disk-1,mp=/volume,backup=1,size=102M");
  const std::string image = run_ + "/volumes/local-lvm_vm-300-disk-1.img";
  struct stat st {};
  ASSERT_EQ(::stat(image.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 102 << 20);

  // A CT writes as root and as uid 1000; past the size is ENOSPC.
  const std::string volume = "local-lvm:vm-300-disk-1,mp=/mnt/data,backup=0";
  ASSERT_EQ(clone_with_volume(100, volume), "OK");
  ASSERT_EQ(run("POST", "/lxc/100/status/start"), "OK");
  EXPECT_EQ(in_ct(100,
                  "echo root > /mnt/data/r && mkdir /mnt/data/u && chown 1000:1000 "
                  "/mnt/data/u && setpriv --reuid=1000 --regid=1000 --clear-groups "
                  "sh -c \"echo user > /mnt/data/u/f\" && stat -c %u:%U /mnt/data/r"),
            "0:root\n");
  // A mount namespace made meanwhile (as `ip netns exec` makes one for each program it runs,
  // an LXC monitor among them) holds a copy of the volume's mount; the CT's stop must still
  // free the volume while that process lives.
  std::string holder;
  ASSERT_EQ(sh("unshare --mount --propagation slave sleep 300 </dev/null >/dev/null 2>&1 & "
               "echo $!",
               &holder),
            0)
      << holder;
  std::string full = in_ct(100, "dd if=/dev/zero of=/mnt/data/big bs=1M count=200");
  EXPECT_NE(full.find("No space left on device"), std::string::npos) << full;
  EXPECT_EQ(in_ct(100, "rm /mnt/data/big"), "");
  ASSERT_EQ(run("POST", "/lxc/100/status/stop"), "OK");
  std::string loops;
  EXPECT_EQ(sh("losetup -j " + image, &loops), 0);
  EXPECT_EQ(loops, "") << "the copy in the other namespace kept the volume";
  ::kill(std::atoi(holder.c_str()), SIGKILL);
  ASSERT_EQ(run("DELETE", "/lxc/100"), "OK");
  EXPECT_EQ(log_, (std::vector<std::string>{
                      "ignore deletion of 'local-lvm:vm-300-disk-1', CT 100 isn't the owner!",
                      "TASK OK"}));

  // The bytes and their owners on the node (100000 + the uid inside).
  ASSERT_EQ(::access(image.c_str(), F_OK), 0);
  EXPECT_EQ(owners_on_node(image),
            "100000 " + dir_ + "/look/r\n101000 " + dir_ + "/look/u/f\nuser\n");
  std::string out;

  // ro=1: read-only inside; meanwhile no other CT mounts the volume.
  ASSERT_EQ(clone_with_volume(101, volume + ",ro=1"), "OK");
  ASSERT_EQ(run("POST", "/lxc/101/status/start"), "OK");
  EXPECT_EQ(in_ct(101, "cat /mnt/data/r"), "root\n");
  std::string ro = in_ct(101, "echo x > /mnt/data/new");
  EXPECT_NE(ro.find("Read-only file system"), std::string::npos) << ro;
  ASSERT_EQ(clone_with_volume(102, volume), "OK");
  std::string twice = run("POST", "/lxc/102/status/start");
  EXPECT_NE(twice.find("volume 'local-lvm:vm-300-disk-1' is already mounted by CT 101"),
            std::string::npos)
      << twice;
  // Nor is it resized while mounted; once stopped, it grows with its file system.
  EXPECT_NE(run("PUT", "/lxc/300/resize", "disk=mp0&size=%2B100M").find("is in use"),
            std::string::npos);
  ASSERT_EQ(run("POST", "/lxc/101/status/stop"), "OK");
  // A mount of the image that outlives its CT keeps its loop device, which `mount -o loop`
  // would reuse at the old size (read-only, even, after ro=1): the resize and the next CT's
  // start are refused instead, and go through once it is gone.
  pid_t linger = hold_a_mount(image);
  ASSERT_GT(linger, 0);
  EXPECT_NE(run("PUT", "/lxc/300/resize", "disk=mp0&size=%2B100M").find("is still attached"),
            std::string::npos);
  EXPECT_NE(run("POST", "/lxc/102/status/start").find("is still attached"), std::string::npos);
  // Gone once its loop device is (after the holder's namespace ends), as a CT's stop waits for it.
  ::kill(linger, SIGKILL);
  ASSERT_TRUE(loops_gone(image));
  ASSERT_EQ(run("PUT", "/lxc/300/resize", "disk=mp0&size=%2B100M"), "OK");
  EXPECT_EQ(config(300, "mp0"), "local-lvm:vm-300-disk-1,mp=/volume,backup=1,size=202M");
  ASSERT_EQ(run("POST", "/lxc/102/status/start"), "OK");
  std::string df = in_ct(102,
                         "df -m --output=size /mnt/data | tail -n1 && cat /mnt/data/u/f && "
                         "touch /mnt/data/rw && echo writable");
  EXPECT_GT(std::atoi(df.c_str()), 150) << df;
  EXPECT_NE(df.find("user\nwritable"), std::string::npos) << df;
  ASSERT_EQ(run("POST", "/lxc/102/status/stop"), "OK");

  // Destroying the holder frees the volume.
  ASSERT_EQ(run("DELETE", "/lxc/300"), "OK");
  EXPECT_NE(::access(image.c_str(), F_OK), 0);
  EXPECT_NE(run("POST", "/lxc/102/status/start").find("no such logical volume pve/vm-300-disk-1"),
            std::string::npos);
}

}  // namespace
}  // namespace pvs
