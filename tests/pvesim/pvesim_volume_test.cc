// Mount point volumes (volumes.h) on the model backend, as a plain HTTPS client sees them:
// allocation by a config write, an existing volume on another CT, a token's bind mount, a
// removed mount point becoming unusedN, the owner rule at destroy and at resize, the refusals
// of clone, snapshot and template.
#include <gtest/gtest.h>

#include <Poco/URI.h>

#include <chrono>
#include <thread>

#include "sim.h"
#include "test_https.h"
#include "volumes.h"

namespace {

using pvesim::testing::Answer;
using pvesim::testing::Https;

class VolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pvesim::Options options;
    options.tokens["root@pam!test"] = "secret";
    options.auth_delay_ms = 10;
    options.default_task_ms = 5;
    options.templates = {9000, 8999};
    auto sim = pvesim::Simulator::start(options);
    ASSERT_TRUE(sim) << sim.error().to_string();
    sim_ = std::move(*sim);
    api_ = std::make_unique<Https>(sim_->port(), "PVEAPIToken=root@pam!test=secret");
    for (int vmid : {100, 101})
      ASSERT_EQ(run("POST", "/lxc/9000/clone", "newid=" + id(vmid)), "OK");
  }

  static std::string id(int vmid) { return std::to_string(vmid); }
  static std::string form(const std::string& key, const std::string& value) {
    std::string out;
    Poco::URI::encode(value, "&=+,:/", out);
    return key + "=" + out;
  }
  Answer call(const std::string& method, const std::string& path, const std::string& body = "") {
    return (*api_)(method, "/nodes/pve" + path, body);
  }
  // A task's exit status (the request's message if it made none).
  std::string run(const std::string& method, const std::string& path,
                  const std::string& body = "") {
    auto a = call(method, path, body);
    if (a.status != 200) return a.body;
    last_upid_ = a.data().toString();
    return api_->wait_task("pve", last_upid_);
  }
  std::vector<std::string> task_log() {
    std::vector<std::string> out;
    auto lines = call("GET", "/tasks/" + last_upid_ + "/log").array();
    for (unsigned i = 0; lines && i < lines->size(); ++i)
      out.push_back(lines->getObject(i)->getValue<std::string>("t"));
    return out;
  }
  Answer set(int vmid, const std::string& key, const std::string& value) {
    return call("PUT", "/lxc/" + id(vmid) + "/config", form(key, value));
  }
  std::string config(int vmid, const std::string& key) {
    auto o = call("GET", "/lxc/" + id(vmid) + "/config").object();
    return o && o->has(key) ? o->getValue<std::string>(key) : "<none>";
  }
  static std::string message(const Answer& a) { return std::to_string(a.status) + " " + a.reason; }

  std::unique_ptr<pvesim::Simulator> sim_;
  std::unique_ptr<Https> api_;
  std::string last_upid_;
};

// STORAGE:SIZE allocates vm-<vmid>-disk-<lowest free k> (the rootfs is disk-0) and the config
// gets it in pve-container's format, size= added; an unknown storage is refused.
TEST_F(VolumeTest, AllocationFormMakesANewVolumeOfTheCt) {
  ASSERT_EQ(set(100, "mp0", "local-lvm:2,mp=/mnt/data,backup=1").status, 200);
  EXPECT_EQ(config(100, "mp0"), "local-lvm:vm-100-disk-1,mp=/mnt/data,backup=1,size=2G");
  ASSERT_EQ(set(100, "mp3", "local-lvm:0.5,ro=1,mp=/b").status, 200);
  EXPECT_EQ(config(100, "mp3"), "local-lvm:vm-100-disk-2,mp=/b,ro=1,size=512M");
  auto a = set(100, "mp1", "nope:1,mp=/c");
  EXPECT_EQ(message(a), "500 storage 'nope' does not exist") << a.body;
  EXPECT_EQ(config(100, "mp1"), "<none>");
  // A removed mount point's volume is still on the storage (unused0): the next one is disk-3.
  ASSERT_EQ(call("PUT", "/lxc/100/config", "delete=mp0").status, 200);
  EXPECT_EQ(config(100, "unused0"), "local-lvm:vm-100-disk-1");
  ASSERT_EQ(set(100, "mp0", "local-lvm:1,mp=/d").status, 200);
  EXPECT_EQ(config(100, "mp0"), "local-lvm:vm-100-disk-3,mp=/d,size=1G");
  // Deleting unused0 frees the CT's own volume: its number is free again.
  ASSERT_EQ(call("PUT", "/lxc/100/config", "delete=unused0").status, 200);
  EXPECT_EQ(config(100, "unused0"), "<none>");
  ASSERT_EQ(set(100, "mp1", "local-lvm:1,mp=/e").status, 200);
  EXPECT_EQ(config(100, "mp1"), "local-lvm:vm-100-disk-1,mp=/e,size=1G");
}

// An existing volume on another CT gets the volume's size; a volume that does not exist is
// accepted as Proxmox does (rescan_volume only warns), without size=, and the start fails at
// the storage activation. A name the storage cannot parse is refused for a token.
TEST_F(VolumeTest, ExistingVolumeOnAnotherCt) {
  ASSERT_EQ(set(100, "mp0", "local-lvm:2,mp=/volume,backup=1").status, 200);
  ASSERT_EQ(set(101, "mp0", "local-lvm:vm-100-disk-1,mp=/mnt/data,backup=0,ro=1").status, 200);
  EXPECT_EQ(config(101, "mp0"), "local-lvm:vm-100-disk-1,mp=/mnt/data,backup=0,ro=1,size=2G");
  ASSERT_EQ(set(101, "mp1", "local-lvm:vm-100-disk-7,mp=/x").status, 200);
  EXPECT_EQ(config(101, "mp1"), "local-lvm:vm-100-disk-7,mp=/x");
  EXPECT_EQ(run("POST", "/lxc/101/status/start"), "no such logical volume pve/vm-100-disk-7");
  auto a = set(101, "mp2", "local-lvm:foo,mp=/y");
  EXPECT_EQ(message(a), "500 unable to parse lvm volume name 'foo'") << a.body;
  a = set(101, "mp2", "shared-rbd:vm-100-disk-1,mp=/y");  // no shared storage in this cluster
  EXPECT_EQ(message(a), "500 storage 'shared-rbd' does not exist") << a.body;
}

// check_ct_modify_config_perm: non-volume mount points are root@pam's alone, and an API token
// (root@pam!test included) is a user of its own.
TEST_F(VolumeTest, BindOrDeviceMountPointByATokenIsForbidden) {
  auto a = set(100, "mp0", "/srv/data,mp=/mnt/data");
  EXPECT_EQ(a.status, 403);
  EXPECT_NE(a.body.find("Permission check failed (mount point type bind is only allowed for "
                        "root@pam)"),
            std::string::npos)
      << a.body;
  a = set(100, "mp0", "/dev/sdb,mp=/mnt/data");
  EXPECT_NE(a.body.find("mount point type device is only allowed"), std::string::npos) << a.body;
  EXPECT_EQ(config(100, "mp0"), "<none>");
  a = set(100, "mp0", "local-lvm:1,mp=/mnt/../etc");  // verify_lxc_mp_string
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.body.find("/mnt/../etc contains illegal character sequences"), std::string::npos)
      << a.body;
}

// Every removed volume mount point becomes unusedN, another CT's volume too; deleting that
// unusedN on the non-owner leaves the volume alone.
TEST_F(VolumeTest, RemovedMountPointBecomesUnused) {
  ASSERT_EQ(set(100, "mp0", "local-lvm:2,mp=/volume").status, 200);
  ASSERT_EQ(set(101, "mp4", "local-lvm:vm-100-disk-1,mp=/mnt/data").status, 200);
  ASSERT_EQ(set(101, "unused0", "local-lvm:vm-100-disk-9").status, 200);
  ASSERT_EQ(call("PUT", "/lxc/101/config", "delete=mp4").status, 200);
  EXPECT_EQ(config(101, "mp4"), "<none>");
  EXPECT_EQ(config(101, "unused1"), "local-lvm:vm-100-disk-1");
  ASSERT_EQ(call("PUT", "/lxc/101/config", "delete=unused1").status, 200);
  EXPECT_EQ(config(101, "unused1"), "<none>");
  ASSERT_EQ(set(101, "mp4", "local-lvm:vm-100-disk-1,mp=/mnt/data").status, 200);
  EXPECT_EQ(config(101, "mp4"), "local-lvm:vm-100-disk-1,mp=/mnt/data,size=2G");  // still there
  // Replacing a volume mount point makes the old volume unused too.
  ASSERT_EQ(set(100, "mp0", "local-lvm:1,mp=/volume").status, 200);
  EXPECT_EQ(config(100, "mp0"), "local-lvm:vm-100-disk-2,mp=/volume,size=1G");
  EXPECT_EQ(config(100, "unused0"), "local-lvm:vm-100-disk-1");
}

// destroy_lxc_container frees only the volumes the CT owns; the task log names the others.
TEST_F(VolumeTest, DestroyFreesOnlyOwnedVolumes) {
  ASSERT_EQ(set(100, "mp0", "local-lvm:2,mp=/volume").status, 200);
  ASSERT_EQ(set(101, "mp0", "local-lvm:vm-100-disk-1,mp=/mnt/data").status, 200);
  ASSERT_EQ(set(101, "mp1", "local-lvm:1,mp=/own").status, 200);
  ASSERT_EQ(run("DELETE", "/lxc/101"), "OK");
  auto log = task_log();
  EXPECT_EQ(log, (std::vector<std::string>{
                     "ignore deletion of 'local-lvm:vm-100-disk-1', CT 101 isn't the owner!",
                     "TASK OK"}));
  ASSERT_EQ(run("POST", "/lxc/9000/clone", "newid=102"), "OK");
  ASSERT_EQ(set(102, "mp0", "local-lvm:vm-100-disk-1,mp=/a").status, 200);
  EXPECT_EQ(config(102, "mp0"), "local-lvm:vm-100-disk-1,mp=/a,size=2G");  // kept
  ASSERT_EQ(set(102, "mp1", "local-lvm:vm-101-disk-1,mp=/b").status, 200);
  EXPECT_EQ(config(102, "mp1"), "local-lvm:vm-101-disk-1,mp=/b");  // freed with 101
  ASSERT_EQ(run("DELETE", "/lxc/100"), "OK");
  EXPECT_EQ(task_log(), std::vector<std::string>{"TASK OK"});
  ASSERT_EQ(set(102, "mp2", "local-lvm:vm-100-disk-1,mp=/c").status, 200);
  EXPECT_EQ(config(102, "mp2"), "local-lvm:vm-100-disk-1,mp=/c");  // freed with its owner
}

// PUT resize of an mpN sizes that mount point's volume: the owner only, never smaller.
TEST_F(VolumeTest, ResizeSizesTheNamedMountPoint) {
  ASSERT_EQ(set(100, "mp0", "local-lvm:2,mp=/volume,backup=1").status, 200);
  ASSERT_EQ(set(101, "mp0", "local-lvm:vm-100-disk-1,mp=/mnt/data").status, 200);
  std::string rootfs = config(100, "rootfs");
  EXPECT_EQ(run("PUT", "/lxc/100/resize", "disk=mp0&size=%2B1G"), "OK");
  EXPECT_EQ(config(100, "mp0"), "local-lvm:vm-100-disk-1,mp=/volume,backup=1,size=3G");
  EXPECT_EQ(config(100, "rootfs"), rootfs);
  EXPECT_EQ(run("PUT", "/lxc/100/resize", "disk=mp0&size=4G"), "OK");
  EXPECT_EQ(config(100, "mp0"), "local-lvm:vm-100-disk-1,mp=/volume,backup=1,size=4G");
  auto a = call("PUT", "/lxc/100/resize", "disk=mp0&size=4G");
  EXPECT_EQ(message(a), "500 disk is already at specified size") << a.body;
  a = call("PUT", "/lxc/100/resize", "disk=mp0&size=1G");
  EXPECT_EQ(message(a), "500 unable to shrink disk size") << a.body;
  a = call("PUT", "/lxc/101/resize", "disk=mp0&size=%2B1G");
  EXPECT_EQ(a.status, 500);
  EXPECT_EQ(a.reason.rfind("can't resize mount point owned by another container (100)", 0), 0u)
      << a.reason;
  a = call("PUT", "/lxc/101/resize", "disk=mp5&size=%2B1G");
  EXPECT_EQ(message(a), "500 no such mount point 'mp5'") << a.body;
  EXPECT_EQ(run("PUT", "/lxc/100/resize", "disk=rootfs&size=%2B1G"), "OK");
  EXPECT_NE(config(100, "rootfs"), rootfs);
  EXPECT_EQ(config(100, "mp0"), "local-lvm:vm-100-disk-1,mp=/volume,backup=1,size=4G");
}

// Clones, snapshots and templates of a CT with volume mount points are not modelled (Proxmox
// includes the volumes); with a bind mount point they fail as in pve-container.
TEST_F(VolumeTest, CloneSnapshotAndTemplateRefuseMountPoints) {
  ASSERT_EQ(set(100, "mp0", "local-lvm:1,mp=/volume").status, 200);
  const std::string note = "pvesim: snapshots/clones of mount point volumes are not modelled";
  auto a = call("POST", "/lxc/100/clone", "newid=110&full=1");
  EXPECT_EQ(message(a), "500 " + note) << a.body;
  EXPECT_EQ(config(100, "lock"), "<none>");
  EXPECT_EQ(run("POST", "/lxc/100/snapshot", "snapname=s1"), note);
  ASSERT_EQ(call("POST", "/lxc/100/template").status, 200);  // null: the task is in the list
  std::string status;
  for (int i = 0; i < 200 && status.empty(); ++i) {
    auto tasks = call("GET", "/tasks?typefilter=vztemplate").array();
    if (tasks && tasks->size() > 0) status = tasks->getObject(0)->getValue<std::string>("status");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, note);
  EXPECT_EQ(config(100, "template"), "<none>");

  pvesim::Config bind{{"rootfs", "local-lvm:vm-100-disk-0,size=8G"},
                      {"mp1", "/srv/x,mp=/x"},
                      {"mp0", "local-lvm:vm-100-disk-1,mp=/v"}};
  using pvesim::Volumes;
  EXPECT_EQ(Volumes::refusal("clone", bind), "unable to clone mountpoint 'mp1' (type bind)");
  EXPECT_EQ(Volumes::refusal("snapshot", bind), "snapshot feature is not available");
  EXPECT_EQ(Volumes::refusal("template", bind), "Template feature is not available for '/srv/x'");
  EXPECT_EQ(Volumes::refusal("clone", {{"rootfs", "local-lvm:vm-100-disk-0"}}), "");
}

// The holder of the controller's design: a never-started linked clone of a second template,
// its volume allocated by a config write; destroying it frees the volume.
TEST_F(VolumeTest, HolderOfASecondTemplate) {
  ASSERT_EQ(run("POST", "/lxc/8999/clone", "newid=300&hostname=holder"), "OK");
  ASSERT_EQ(set(300, "mp0", "local-lvm:1,mp=/volume,backup=1").status, 200);
  EXPECT_EQ(config(300, "mp0"), "local-lvm:vm-300-disk-1,mp=/volume,backup=1,size=1G");
  ASSERT_EQ(set(100, "mp0", "local-lvm:vm-300-disk-1,mp=/mnt/data,backup=0").status, 200);
  EXPECT_EQ(run("POST", "/lxc/100/status/start"), "OK");
  EXPECT_EQ(run("POST", "/lxc/100/status/stop"), "OK");
  ASSERT_EQ(run("DELETE", "/lxc/300"), "OK");
  EXPECT_EQ(run("POST", "/lxc/100/status/start"), "no such logical volume pve/vm-300-disk-1");
}

TEST(VolumeStrings, PrintedAsPveContainerPrintsThem) {
  pvesim::MountPoint mp;
  ASSERT_TRUE(
      pvesim::parse_mount_point("local-lvm:vm-1-disk-1,ro=1,size=1073741824,mp=/a,backup=0", &mp));
  EXPECT_EQ(pvesim::print_mount_point(mp), "local-lvm:vm-1-disk-1,mp=/a,backup=0,ro=1,size=1G");
  EXPECT_EQ(pvesim::format_disk_size(3ull << 40), "3T");
  EXPECT_EQ(pvesim::format_disk_size(1536ull << 20), "1536M");
  EXPECT_EQ(pvesim::volume_owner("local-lvm:vm-105-disk-1"), 105);
  EXPECT_EQ(pvesim::volume_owner("shared-rbd:base-9000-disk-0/vm-120-disk-0"), 120);
  EXPECT_EQ(pvesim::volume_owner("local-lvm:foo"), -1);
}

}  // namespace
