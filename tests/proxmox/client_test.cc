// ProxmoxClient against pvesim over real HTTPS: every endpoint, every error class the API
// answers, and the task waiter. The transport's tests are in client_transport_test.cc.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/log.h"
#include "sim_fixture.h"

namespace pvs::pve::testing {
namespace {

using std::chrono::milliseconds;

TEST_F(ClientTest, NextIdIsLowestFreeAndReservesNothing) {
  auto a = client_->next_id();
  ASSERT_TRUE(a) << a.error().to_string();
  EXPECT_EQ(*a, 100);
  auto b = client_->next_id();
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, 100);  // nothing was reserved
  clone_ok(100);
  EXPECT_EQ(*client_->next_id(), 101);
  auto taken = client_->next_id(100);
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error().proxmox->kind, ErrorKind::kAlreadyExists);
  EXPECT_EQ(taken.error().proxmox->http_status, 400);
  EXPECT_EQ(taken.error().proxmox->param_errors.at("vmid"), "VM 100 already exists");
  EXPECT_EQ(*client_->next_id(555), 555);
}

TEST_F(ClientTest, NextIdWireTypeIsAString) {
  auto raw = client_->call("GET", "/cluster/nextid");
  ASSERT_TRUE(raw);
  EXPECT_EQ(*raw, "\"100\"");
}

class NumericNextIdTest : public ClientTest {
 protected:
  void adjust(pvesim::Options& options) override { options.nextid_as_number = true; }
};

TEST_F(NumericNextIdTest, NextIdAcceptsANumberToo) {
  EXPECT_EQ(*client_->call("GET", "/cluster/nextid"), "100");
  auto id = client_->next_id();
  ASSERT_TRUE(id) << id.error().to_string();
  EXPECT_EQ(*id, 100);
}

TEST_F(ClientTest, CloneStartStopDestroyLifecycle) {
  clone_ok(120, "sandboxes");
  auto config = client_->config(kNode, 120);
  ASSERT_TRUE(config) << config.error().to_string();
  EXPECT_EQ(config->at("hostname"), "sb-120");
  EXPECT_EQ(config->count("lock"), 0u);
  EXPECT_EQ(config->count("template"), 0u);
  EXPECT_EQ(config->at("memory"), "512");
  EXPECT_FALSE(config->at("digest").empty());
  auto pool = client_->pool("sandboxes");
  ASSERT_TRUE(pool);
  ASSERT_EQ(pool->members.size(), 1u);
  EXPECT_EQ(pool->members[0].vmid, 120);
  EXPECT_EQ(pool->members[0].id, "lxc/120");

  auto stopped = client_->interfaces(kNode, 120);
  ASSERT_TRUE(stopped);
  EXPECT_FALSE(stopped->has_value());  // null while stopped

  task_ok(client_->start(kNode, 120));
  auto status = client_->status(kNode, 120);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->status, "running");
  EXPECT_EQ(status->vmid, 120);
  EXPECT_EQ(status->name, "sb-120");
  EXPECT_EQ(status->maxmem, 512LL * 1048576);
  EXPECT_GT(status->pid, 0);

  auto again = client_->start(kNode, 120);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().proxmox->kind, ErrorKind::kAlreadyRunning);
  EXPECT_EQ(again.error().message, "CT 120 already running");

  auto ifaces = client_->interfaces(kNode, 120);
  ASSERT_TRUE(ifaces) << ifaces.error().to_string();
  ASSERT_TRUE(ifaces->has_value());
  const auto& list = **ifaces;
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "lo");
  EXPECT_EQ(list[0].inet, "127.0.0.1/8");
  EXPECT_EQ(list[1].name, "eth0");
  auto eth0 = std::find_if(list[1].addresses.begin(), list[1].addresses.end(),
                           [](const InterfaceAddress& a) { return a.family == "inet"; });
  ASSERT_NE(eth0, list[1].addresses.end());
  auto addr = Ipv4Address::parse(eth0->address);
  ASSERT_TRUE(addr);
  EXPECT_TRUE(Cidr::parse("10.99.0.0/16")->contains(*addr));
  EXPECT_EQ(eth0->prefix, 16);
  EXPECT_EQ(list[1].inet6.substr(0, 6), "fe80::");

  auto busy = client_->destroy(kNode, 120);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().proxmox->kind, ErrorKind::kServer);
  EXPECT_EQ(busy.error().message, "unable to destroy CT 120 - container is running");

  task_ok(client_->stop(kNode, 120));
  auto not_running = client_->stop(kNode, 120);
  ASSERT_FALSE(not_running);
  EXPECT_EQ(not_running.error().proxmox->kind, ErrorKind::kNotRunning);
  auto shutdown = client_->shutdown(kNode, 120, 5, true);
  ASSERT_FALSE(shutdown);
  EXPECT_EQ(shutdown.error().proxmox->kind, ErrorKind::kNotRunning);

  task_ok(client_->destroy(kNode, 120, DestroyOptions{true, false, true}));
  auto gone = client_->config(kNode, 120);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().proxmox->kind, ErrorKind::kNotFound);
  EXPECT_EQ(gone.error().proxmox->http_status, 500);
  EXPECT_EQ(gone.error().message, "Configuration file 'nodes/pve/lxc/120.conf' does not exist");
  EXPECT_TRUE(client_->pool("sandboxes")->members.empty());
}

TEST_F(ClientTest, ShutdownAndForcedDestroyOfRunningContainer) {
  clone_ok(121);
  task_ok(client_->start(kNode, 121));
  task_ok(client_->shutdown(kNode, 121, 10, false));
  EXPECT_EQ(client_->status(kNode, 121)->status, "stopped");
  task_ok(client_->start(kNode, 121));
  task_ok(client_->destroy(kNode, 121, DestroyOptions{false, true, std::nullopt}));
  EXPECT_EQ(client_->status(kNode, 121).error().proxmox->kind, ErrorKind::kNotFound);
}

TEST_F(ClientTest, ClonesFromOneTemplateAreSerialized) {
  sim_->set_task_ms("vzclone", 2000);  // long enough for the checks below on a busy machine
  CloneRequest first{kTemplate, 130, "a", "", "", "", "", std::nullopt, ""};
  auto upid = client_->clone(kNode, first);
  ASSERT_TRUE(upid);
  // The template holds lock 'disk', the new CT lock 'create', until the task ends.
  EXPECT_EQ(client_->config(kNode, kTemplate)->at("lock"), "disk");
  EXPECT_EQ(client_->status(kNode, 130)->lock, "create");
  CloneRequest second{kTemplate, 131, "b", "", "", "", "", std::nullopt, ""};
  auto refused = client_->clone(kNode, second);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().proxmox->kind, ErrorKind::kLocked);
  EXPECT_EQ(refused.error().message, "CT is locked (disk)");
  EXPECT_EQ(refused.error().proxmox->attempts, 1);  // a clone is never retried
  EXPECT_EQ(sim_->count("POST", "/nodes/{node}/lxc/{vmid}/clone"), 2u);
  // Starting the CT while it is still being created fails inside the task.
  auto early = client_->start(kNode, 130);
  ASSERT_TRUE(early);
  auto early_done = client_->wait_task(*early);
  ASSERT_FALSE(early_done);
  EXPECT_EQ(early_done.error().proxmox->kind, ErrorKind::kTaskFailed);
  EXPECT_EQ(early_done.error().message, "CT is locked (create)");
  ASSERT_TRUE(client_->wait_task(*upid));
  EXPECT_EQ(client_->config(kNode, kTemplate)->count("lock"), 0u);
  EXPECT_EQ(client_->status(kNode, 130)->lock, "");
  auto exists = client_->clone(kNode, CloneRequest{kTemplate, 130, "", "", "", "", "", {}, ""});
  ASSERT_FALSE(exists);
  EXPECT_EQ(exists.error().proxmox->kind, ErrorKind::kAlreadyExists);
  EXPECT_EQ(exists.error().message, "CT 130 already exists on node 'pve'");
}

TEST_F(ClientTest, CloneIntoMissingPoolIsPermissionDenied) {
  auto r = client_->clone(kNode, CloneRequest{kTemplate, 140, "", "", "nopool", "", "", {}, ""});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().proxmox->kind, ErrorKind::kPermissionDenied);
  EXPECT_EQ(r.error().proxmox->http_status, 403);
  auto missing = client_->clone(kNode, CloneRequest{555, 141, "", "", "", "", "", {}, ""});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().proxmox->kind, ErrorKind::kNotFound);
}

TEST_F(ClientTest, UpdateConfigNormalizesTagsAndChecksDigest) {
  clone_ok(150);
  auto before = client_->config(kNode, 150);
  ASSERT_TRUE(before);
  ASSERT_TRUE(client_->update_config(kNode, 150,
                                     {{"tags", "pve-sandbox,Owner_7;pve-sandbox b"},
                                      {"memory", "1024"},
                                      {"digest", before->at("digest")}}));
  auto after = client_->config(kNode, 150);
  EXPECT_EQ(after->at("tags"), "b;owner_7;pve-sandbox");
  EXPECT_EQ(after->at("memory"), "1024");
  auto stale =
      client_->update_config(kNode, 150, {{"memory", "768"}, {"digest", before->at("digest")}});
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().message,
            "detected modified configuration - file changed by other user? Try again.");
  ASSERT_TRUE(client_->update_config(kNode, 150, {{"delete", "description"}}));
  EXPECT_EQ(client_->config(kNode, 150)->count("description"), 0u);
  auto nothing = client_->update_config(kNode, 150, {});
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error().message, "no options specified");
  // Feature flags other than nesting: never for tokens (the raw call reaches the server).
  std::string path = "/nodes/" + std::string(kNode) + "/lxc/150/config";
  auto features = client_->call("PUT", path, {{"features", "nesting=1,keyctl=1"}});
  ASSERT_FALSE(features);
  EXPECT_EQ(features.error().proxmox->kind, ErrorKind::kPermissionDenied);
  ASSERT_TRUE(client_->call("PUT", path, {{"features", "nesting=0"}}));
}

// The typed call refuses every key that would widen a container (nesting included, which
// Proxmox lets the token toggle), before anything is sent.
TEST_F(ClientTest, UpdateConfigRefusesKeysThatWidenAContainer) {
  clone_ok(152);
  auto sent = client_->requests_sent();
  for (const Params& changes :
       {Params{{"features", "nesting=1"}}, Params{{"memory", "512"}, {"hookscript", "local:x"}},
        Params{{"mp0", "/srv,mp=/mnt"}}, Params{{"mp1", "local-lvm:/dev/sda,mp=/mnt"}},
        Params{{"mp0", "local-lvm:1,mp=/mnt,shared=1"}}, Params{{"mp0", "local-lvm:1"}},
        Params{{"mp0", "volume=/srv,mp=/mnt"}}, Params{{"delete", "mp0"}},
        Params{{"mp0", "local-lvm:1,mp=/mnt,mountoptions=nosuid"}}, Params{{"dev0", "/dev/kvm"}},
        Params{{"unprivileged", "0"}}, Params{{"lxc.apparmor.profile", "unconfined"}},
        Params{{"delete", "memory,features"}}}) {
    auto refused = client_->update_config(kNode, 152, changes);
    ASSERT_FALSE(refused) << changes.back().first;
    EXPECT_EQ(refused.error().proxmox->kind, ErrorKind::kInvalidParameters);
    EXPECT_EQ(refused.error().proxmox->http_status, 0);
    EXPECT_NE(refused.error().message.find("refused by the client"), std::string::npos);
  }
  EXPECT_EQ(client_->requests_sent(), sent);
  ASSERT_TRUE(client_->update_config(kNode, 152, {{"memory", "512"}, {"description", "mp0"}}));
  // A storage volume as a mount point (the controller's volumes) is the one mpN it writes.
  ASSERT_TRUE(client_->update_config(kNode, 152, {{"mp0", "local-lvm:1,mp=/mnt/v,backup=0,ro=1"}}));
  EXPECT_EQ(client_->config(kNode, 152)->at("mp0"),
            "local-lvm:vm-152-disk-1,mp=/mnt/v,backup=0,ro=1,size=1G");
}

TEST_F(ClientTest, InvalidParametersCarryTheErrorMap) {
  expect_rejections_ = true;
  clone_ok(151);
  auto bad = client_->update_config(
      kNode, 151,
      {{"onboot", "true"}, {"memory", "8"}, {"bogus", "1"}, {"net0", "name=eth0,ip=300.1.1.1/24"}});
  ASSERT_FALSE(bad);
  const Error& e = bad.error();
  EXPECT_EQ(e.proxmox->kind, ErrorKind::kInvalidParameters);
  EXPECT_EQ(e.proxmox->http_status, 400);
  EXPECT_EQ(e.message, "Parameter verification failed.");
  EXPECT_EQ(e.proxmox->param_errors.at("onboot"), "type check ('boolean') failed - got 'true'");
  EXPECT_EQ(e.proxmox->param_errors.at("memory"), "value must have a minimum value of 16");
  EXPECT_EQ(e.proxmox->param_errors.at("bogus"),
            "property is not defined in schema and the schema does not allow additional "
            "properties");
  EXPECT_NE(e.proxmox->param_errors.at("net0").find("invalid format"), std::string::npos);
  auto clone =
      client_->clone(kNode, CloneRequest{kTemplate, 99, "bad_name", "", "", "", "", {}, ""});
  ASSERT_FALSE(clone);
  EXPECT_EQ(clone.error().proxmox->param_errors.count("newid"), 1u);
  EXPECT_EQ(clone.error().proxmox->param_errors.count("hostname"), 1u);
  EXPECT_GE(sim_->schema_rejections(), 2u);
}

TEST_F(ClientTest, ResizeGrowsAndRefusesNoOps) {
  clone_ok(160);
  task_ok(client_->resize(kNode, 160, "rootfs", "+1G"));
  EXPECT_NE(client_->config(kNode, 160)->at("rootfs").find("size=9G"), std::string::npos);
  task_ok(client_->resize(kNode, 160, "rootfs", "10G"));
  auto same = client_->resize(kNode, 160, "rootfs", "10G");
  ASSERT_FALSE(same);
  EXPECT_EQ(same.error().message, "disk is already at specified size");
  auto shrink = client_->resize(kNode, 160, "rootfs", "2G");
  ASSERT_FALSE(shrink);
  EXPECT_EQ(shrink.error().message, "unable to shrink disk size");
  EXPECT_EQ(client_->status(kNode, 160)->maxdisk, 10LL << 30);
}

TEST_F(ClientTest, SnapshotsCreateListRollbackDelete) {
  clone_ok(170);
  task_ok(client_->create_snapshot(kNode, 170, "clean", "fresh clone"));
  ASSERT_TRUE(client_->update_config(kNode, 170, {{"memory", "2048"}}));
  auto list = client_->snapshots(kNode, 170);
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "clean");
  EXPECT_EQ((*list)[0].description, "fresh clone");
  EXPECT_GT((*list)[0].snaptime, 0);
  EXPECT_TRUE((*list)[1].is_current);
  EXPECT_EQ((*list)[1].parent, "clean");
  task_ok(client_->rollback_snapshot(kNode, 170, "clean", true));
  EXPECT_EQ(client_->config(kNode, 170)->at("memory"), "512");
  EXPECT_EQ(client_->status(kNode, 170)->status, "running");
  auto dup = client_->create_snapshot(kNode, 170, "clean");
  ASSERT_TRUE(dup);
  auto dup_done = client_->wait_task(*dup);
  ASSERT_FALSE(dup_done);
  EXPECT_EQ(dup_done.error().message, "snapshot name 'clean' already used");
  auto reserved = client_->create_snapshot(kNode, 170, "current");
  ASSERT_FALSE(reserved);
  EXPECT_EQ(reserved.error().message, "unable to use snapshot name 'current' (reserved name)");
  task_ok(client_->delete_snapshot(kNode, 170, "clean"));
  EXPECT_EQ(client_->snapshots(kNode, 170)->size(), 1u);
  auto missing = client_->delete_snapshot(kNode, 170, "clean", true);
  ASSERT_TRUE(missing);  // all checks happen in the task
  auto missing_done = client_->wait_task(*missing);
  ASSERT_FALSE(missing_done);
  EXPECT_EQ(missing_done.error().proxmox->kind, ErrorKind::kTaskFailed);
  EXPECT_EQ(missing_done.error().message, "snapshot 'clean' does not exist");
  ASSERT_FALSE(missing_done.error().proxmox->task_log.empty());
  EXPECT_EQ(missing_done.error().proxmox->task_log.back(),
            "TASK ERROR: snapshot 'clean' does not exist");
}

TEST_F(ClientTest, FirewallOptions) {
  clone_ok(180);
  ASSERT_TRUE(client_->set_firewall_options(
      kNode, 180,
      {{"enable", "1"}, {"ipfilter", "1"}, {"policy_in", "DROP"}, {"policy_out", "ACCEPT"}}));
  auto options = client_->firewall_options(kNode, 180);
  ASSERT_TRUE(options);
  EXPECT_EQ(options->at("enable"), "1");
  EXPECT_EQ(options->at("policy_in"), "DROP");
  ASSERT_TRUE(client_->set_firewall_options(kNode, 180, {{"delete", "ipfilter"}}));
  EXPECT_EQ(client_->firewall_options(kNode, 180)->count("ipfilter"), 0u);
}

TEST_F(ClientTest, Pools) {
  ASSERT_TRUE(client_->create_pool("agents", "sandboxes of agents"));
  auto dup = client_->create_pool("agents");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().proxmox->kind, ErrorKind::kAlreadyExists);
  clone_ok(190);
  clone_ok(191);
  ASSERT_TRUE(client_->add_to_pool("agents", {190, 191}));
  auto twice = client_->add_to_pool("agents", {190});
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().message, "VM 190 is already a pool member");
  auto move = client_->add_to_pool("sandboxes", {191});
  ASSERT_FALSE(move);
  ASSERT_TRUE(client_->add_to_pool("sandboxes", {191}, true));
  auto busy = client_->delete_pool("agents");
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().message, "pool 'agents' is not empty (contains VM 190)");
  ASSERT_TRUE(client_->remove_from_pool("agents", {190}));
  auto pools = client_->pools();
  ASSERT_TRUE(pools);
  EXPECT_EQ(pools->size(), 2u);
  ASSERT_TRUE(client_->delete_pool("agents"));
  auto gone = client_->pool("agents");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().proxmox->kind, ErrorKind::kNotFound);
  auto resources = client_->resources("vm");
  ASSERT_TRUE(resources);
  auto r191 = std::find_if(resources->begin(), resources->end(),
                           [](const ClusterResource& r) { return r.vmid == 191; });
  ASSERT_NE(r191, resources->end());
  EXPECT_EQ(r191->pool, "sandboxes");
  EXPECT_EQ(r191->id, "lxc/191");
  EXPECT_EQ(r191->type, "lxc");
  auto tmpl = std::find_if(resources->begin(), resources->end(),
                           [](const ClusterResource& r) { return r.vmid == kTemplate; });
  ASSERT_NE(tmpl, resources->end());
  EXPECT_TRUE(tmpl->is_template);
  auto cts = client_->list_containers(kNode);
  ASSERT_TRUE(cts);
  EXPECT_EQ(cts->size(), 3u);
}

TEST_F(ClientTest, TaskStatusLogAndList) {
  clone_ok(200);
  auto upid = client_->start(kNode, 200);
  ASSERT_TRUE(upid);
  auto parsed = Upid::parse(*upid);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->type, "vzstart");
  EXPECT_EQ(parsed->id, "200");
  EXPECT_EQ(parsed->user, kTokenId);
  auto done = client_->wait_task(*upid);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->exitstatus, "OK");
  EXPECT_EQ(done->user, "sandbox@pve");
  int total = 0;
  auto log = client_->task_log(*upid, 0, 50, &total);
  ASSERT_TRUE(log);
  EXPECT_EQ(total, static_cast<int>(log->size()));
  EXPECT_EQ(log->back().t, "TASK OK");
  auto bad = client_->task_status("UPID:pve:nothex:");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().proxmox->kind, ErrorKind::kInvalidParameters);
  auto unknown = client_->task_status("UPID:pve:0000FFFF:0000FFFF:00000001:vzstart:1:root@pam:");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().proxmox->kind, ErrorKind::kInvalidParameters);
  EXPECT_EQ(unknown.error().proxmox->param_errors.at("upid"), "no such task");
}

TEST_F(ClientTest, StopTaskKillsARunningTask) {
  clone_ok(210);
  sim_->set_task_ms("vzstart", 5000);
  auto upid = client_->start(kNode, 210);
  ASSERT_TRUE(upid);
  ASSERT_TRUE(client_->stop_task(*upid));
  auto status = client_->task_status(*upid);
  ASSERT_TRUE(status);
  EXPECT_EQ(status->status, "stopped");
  EXPECT_FALSE(status->succeeded());
}

TEST_F(ClientTest, TaskFailureSurfacesTheLog) {
  clone_ok(220);
  sim_->set_fail_task("vzstart", "startup for container '220' failed");
  auto upid = client_->start(kNode, 220);
  ASSERT_TRUE(upid);
  auto done = client_->wait_task(*upid);
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().proxmox->kind, ErrorKind::kTaskFailed);
  EXPECT_EQ(done.error().message, "startup for container '220' failed");
  EXPECT_EQ(done.error().proxmox->upid, *upid);
  ASSERT_FALSE(done.error().proxmox->task_log.empty());
  EXPECT_EQ(done.error().proxmox->task_log.back(),
            "TASK ERROR: startup for container '220' failed");
  EXPECT_EQ(done.error().code, ErrorCode::kInternal);
}

TEST_F(ClientTest, FailedCloneLeavesNothingBehind) {
  sim_->set_fail_task("vzclone", "storage error");
  auto upid =
      client_->clone(kNode, CloneRequest{kTemplate, 230, "", "", "sandboxes", "", "", {}, ""});
  ASSERT_TRUE(upid);
  auto done = client_->wait_task(*upid);
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().message, "clone failed: storage error");
  EXPECT_EQ(client_->config(kNode, 230).error().proxmox->kind, ErrorKind::kNotFound);
  EXPECT_EQ(client_->config(kNode, kTemplate)->count("lock"), 0u);
  EXPECT_TRUE(client_->pool("sandboxes")->members.empty());
}

TEST_F(ClientTest, WaitTaskDeadline) {
  sim_->set_task_ms("vzclone", 3000);
  auto upid = client_->clone(kNode, CloneRequest{kTemplate, 240, "", "", "", "", "", {}, ""});
  ASSERT_TRUE(upid);
  WaitOptions wait;
  wait.timeout = milliseconds(150);
  auto done = client_->wait_task(*upid, wait);
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().proxmox->kind, ErrorKind::kTimeout);
  EXPECT_EQ(done.error().proxmox->upid, *upid);
}

TEST_F(ClientTest, StuckLockIsReportedAsLocked) {
  clone_ok(250);
  ASSERT_TRUE(sim_->set_lock(250, "backup"));
  auto destroy = client_->destroy(kNode, 250);
  ASSERT_FALSE(destroy);
  EXPECT_EQ(destroy.error().proxmox->kind, ErrorKind::kLocked);
  EXPECT_EQ(destroy.error().message, "CT is locked (backup)");
  EXPECT_EQ(destroy.error().code, ErrorCode::kConflict);
  auto update = client_->update_config(kNode, 250, {{"memory", "1024"}});
  ASSERT_FALSE(update);
  EXPECT_EQ(update.error().proxmox->kind, ErrorKind::kLocked);
  auto start = client_->start(kNode, 250);
  ASSERT_TRUE(start);
  auto started = client_->wait_task(*start);
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().message, "CT is locked (backup)");
}

TEST_F(ClientTest, SlowInterfacesHaveNoIpv4AtFirst) {
  clone_ok(260);
  sim_->set_interfaces_delay_ms(600000);  // "at first" lasts until the test ends it
  task_ok(client_->start(kNode, 260));
  auto early = client_->interfaces(kNode, 260);
  ASSERT_TRUE(early && early->has_value());
  EXPECT_EQ((**early)[1].inet, "");
  sim_->set_interfaces_delay_ms(0);
  auto later = client_->interfaces(kNode, 260);
  ASSERT_TRUE(later && later->has_value());
  EXPECT_NE((**later)[1].inet, "");
}

TEST_F(ClientTest, ResourcesAreStaleForNewGuests) {
  sim_->set_rrd_delay_ms(60000);
  clone_ok(280);
  auto resources = client_->resources("vm");
  ASSERT_TRUE(resources);
  auto fresh = std::find_if(resources->begin(), resources->end(),
                            [](const ClusterResource& r) { return r.vmid == 280; });
  ASSERT_NE(fresh, resources->end());
  EXPECT_EQ(fresh->status, "unknown");  // pvestatd has not seen it yet
  EXPECT_EQ(fresh->name, "");
  EXPECT_EQ(client_->status(kNode, 280)->status, "stopped");  // status/current is live
}

// rrddata: 70 AVERAGE rows a step apart, oldest first; the template never ran, so none holds
// values (the lifecycle's usage tests cover rows with values).
TEST_F(ClientTest, RrdDataRowsOldestFirst) {
  expect_rejections_ = true;
  auto rows = client_->rrddata(kNode, 9000, "hour");
  ASSERT_TRUE(rows) << rows.error().to_string();
  ASSERT_EQ(rows->size(), 70u);
  for (std::size_t i = 1; i < rows->size(); ++i) {
    EXPECT_EQ((*rows)[i].time - (*rows)[i - 1].time, 60);
    EXPECT_FALSE((*rows)[i].has_data);
  }
  auto week = client_->rrddata(kNode, 9000, "week");
  ASSERT_TRUE(week);
  EXPECT_EQ((*week)[1].time - (*week)[0].time, 10800);
  auto bad = client_->rrddata(kNode, 9000, "minute");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().proxmox->kind, ErrorKind::kInvalidParameters);
  EXPECT_EQ(sim_->schema_rejections(), 1u);
}

TEST_F(ClientTest, TaskListByVmid) {
  clone_ok(290);
  task_ok(client_->start(kNode, 290));
  auto raw = client_->call("GET", "/nodes/pve/tasks", {{"vmid", "290"}, {"source", "all"}});
  ASSERT_TRUE(raw) << raw.error().to_string();
  EXPECT_NE(raw->find("\"type\":\"vzstart\""), std::string::npos) << *raw;
  EXPECT_NE(raw->find("\"status\":\"OK\""), std::string::npos) << *raw;
}

TEST_F(ClientTest, ErrorRatePerEndpoint) {
  sim_->set_faults({pvesim::FaultRule{"GET", "/nodes/{node}/lxc/{vmid}/status/current", 500,
                                      "simulated failure", 0.3, -1}});
  int failed = 0;
  for (int i = 0; i < 100; ++i)
    if (!client_->status(kNode, kTemplate)) ++failed;
  EXPECT_GT(failed, 10);
  EXPECT_LT(failed, 55);
  EXPECT_EQ(sim_->count("GET", "/nodes/{node}/lxc/{vmid}/status/current"), 100u);  // 500: no retry
  EXPECT_TRUE(client_->next_id());  // other endpoints unaffected
}

TEST_F(ClientTest, WarningsAreSuccess) {
  clone_ok(310);
  sim_->set_fail_task("vzstart", "WARNINGS: 2");
  auto upid = client_->start(kNode, 310);
  ASSERT_TRUE(upid);
  auto done = client_->wait_task(*upid);
  ASSERT_TRUE(done) << done.error().to_string();
  EXPECT_EQ(done->exitstatus, "WARNINGS: 2");
  EXPECT_TRUE(done->succeeded());
  EXPECT_EQ(client_->status(kNode, 310)->status, "running");
}

TEST_F(ClientTest, CloneTaskLogNamesTheVolume) {
  auto upid = client_->clone(kNode, CloneRequest{kTemplate, 320, "", "", "", "", "", {}, ""});
  ASSERT_TRUE(upid);
  ASSERT_TRUE(client_->wait_task(*upid));
  auto log = client_->task_log(*upid);
  ASSERT_TRUE(log);
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].n, 1);
  EXPECT_EQ((*log)[0].t, "create linked clone of mount point rootfs (local-lvm:base-9000-disk-0)");
  EXPECT_EQ((*log)[1].t, "TASK OK");
}

TEST_F(ClientTest, SecretIsNeverLogged) {
  // Capture everything the client logs (stderr), at debug level, through retries, failures
  // and a bad-token answer.
  char path[] = "/tmp/pvs-log-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  int saved = ::dup(2);
  ::dup2(fd, 2);
  auto level = pvs::log::level();
  pvs::log::set_level(pvs::log::Level::kDebug);
  sim_->set_faults({pvesim::FaultRule{"GET", "*", 596, "Connection timed out", 1.0, 2}});
  EXPECT_TRUE(client_->next_id());
  auto o = client_options();
  o.token_secret = "another-secret-4711";
  o.insecure_skip_verify = true;
  o.fingerprint.clear();
  EXPECT_FALSE(make_client(o)->next_id());
  pvs::log::set_level(level);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::close(fd);
  ::unlink(path);
  EXPECT_NE(text.find("retry"), std::string::npos) << text;  // something was logged
  EXPECT_EQ(text.find(kSecret), std::string::npos) << text;
  EXPECT_EQ(text.find("another-secret-4711"), std::string::npos) << text;
}

}  // namespace
}  // namespace pvs::pve::testing
