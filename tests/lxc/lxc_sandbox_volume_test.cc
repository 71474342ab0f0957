// Volumes on real containers (pvesandbox/volumes.h; pvesim's lxc backend, whose volumes are ext4
// images owned by their holder): a volume outlives the sandboxes that mount it, byte for byte
// and with its files' owners, across pause/resume cycles and a controller restart; one sandbox
// holds it at a time; snapshots, captures, deletes and resizes of what is held are refused; a
// read-only mount refuses writes; resize grows it; delete frees it.
#include <gtest/gtest.h>

#include "lxc_support.h"
#include "manager_testing.h"
#include "pvesandbox/manager.h"
#include "sandbox_run.h"
#include "support/stack_fixture.h"

namespace pvs {
namespace {

using lxctest::run;

constexpr const char* kChecksum =
    "cd /mnt/data && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum";

class LxcVolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StackOptions o;
    o.backend = "lxc";
    o.volume_holder = true;
    stack_ = std::make_unique<test::Stack>(o);
    run_dir_ = lxctest::own_run_dir();
    ASSERT_FALSE(run_dir_.empty());
  }
  void TearDown() override {
    stack_.reset();
    EXPECT_EQ(lxctest::leftovers(run_dir_), std::vector<std::string>{});
  }
  std::unique_ptr<Manager> open() {
    auto c = stack_->manager_config();
    c.volumes.holder_template_vmid = test::kVolumeHolderTemplate;
    auto m = lifecycle::open_manager(c, {});
    EXPECT_TRUE(m) << (m ? "" : m.error().message);
    return m ? std::move(*m) : nullptr;
  }
  static CreateOptions with(const std::string& volume, const std::string& path, bool ro) {
    CreateOptions o;
    o.owner = "alice";
    o.volumes = {{volume, path, ro}};
    return o;
  }

  std::unique_ptr<test::Stack> stack_;
  std::string run_dir_;
};

TEST_F(LxcVolumeTest, AVolumeOutlivesItsSandboxes) {
  auto m = open();
  ASSERT_TRUE(m);
  auto vol = m->create_volume({"data", 1, "alice", ""});
  ASSERT_TRUE(vol) << vol.error().message;
  EXPECT_EQ(vol->size_gb, 1);
  EXPECT_EQ(m->create_volume({"data", 1, "alice", ""}).error().code, ErrorCode::kConflict);
  const std::string id = vol->id;

  auto created = m->create(with(id, "/mnt/data", false));
  ASSERT_TRUE(created) << created.error().message;
  std::shared_ptr<Sandbox> sb = *created;
  const std::string sb_id = sb->id();
  EXPECT_EQ(sb->info().volumes, (std::vector<VolumeMount>{{id, "/mnt/data", false}}));
  ASSERT_EQ(run(*sb,
                "head -c 4194304 /dev/urandom > /mnt/data/blob && mkdir /mnt/data/u && "
                "echo mine > /mnt/data/u/f && chown -R 1000:1000 /mnt/data/u"),
            "");
  const long long kib = std::stoll(run(*sb, "df -k --output=size /mnt/data | tail -n1"));
  EXPECT_GT(kib, 900000);  // the volume's 1 GiB, not the root disk's
  EXPECT_LT(kib, 1100000);
  const std::string sum = run(*sb, kChecksum);
  ASSERT_EQ(sum.size(), 67u) << sum;

  // Held: by one sandbox at a time; not deleted, resized, snapshotted or captured.
  EXPECT_EQ(m->create(with(id, "/mnt/x", false)).error().code, ErrorCode::kConflict);
  CreateOptions bob = with(id, "/mnt/x", false);
  bob.owner = "bob";
  EXPECT_EQ(m->create(bob).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(m->delete_volume(id).error().code, ErrorCode::kConflict);
  EXPECT_EQ(m->resize_volume(id, 2).error().code, ErrorCode::kConflict);
  EXPECT_EQ(sb->snapshot("s1").error().code, ErrorCode::kConflict);
  EXPECT_EQ(m->capture_template(sb_id, "withvol", "alice").error().code, ErrorCode::kConflict);
  auto listed = m->volumes();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].mounted_by, sb_id);

  for (int cycle = 1; cycle <= 3; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    ASSERT_EQ(run(*sb, "echo " + std::to_string(cycle) + " >> /mnt/data/log"), "");
    std::string now = run(*sb, kChecksum);
    ASSERT_TRUE(sb->pause());
    if (cycle == 2) {  // a controller restart: Proxmox alone remembers the volume and the mount
      sb.reset();
      m.reset();
      m = open();
      ASSERT_TRUE(m);
      listed = m->volumes();
      ASSERT_EQ(listed.size(), 1u);
      EXPECT_EQ(listed[0].id, id);
      EXPECT_EQ(listed[0].name, "data");
      EXPECT_EQ(listed[0].owner, "alice");
      EXPECT_EQ(listed[0].mounted_by, sb_id);
      auto found = m->attach(sb_id);
      ASSERT_TRUE(found) << found.error().message;
      sb = *found;
    }
    EXPECT_EQ(m->delete_volume(id).error().code, ErrorCode::kConflict);  // paused holds it too
    ASSERT_TRUE(sb->resume());
    EXPECT_EQ(run(*sb, kChecksum), now);
  }
  ASSERT_TRUE(sb->destroy());
  sb.reset();

  // Free again: grown, then mounted read-only by another sandbox with every byte and owner.
  auto grown = m->resize_volume(id, 2);
  ASSERT_TRUE(grown) << grown.error().message;
  EXPECT_EQ(grown->size_gb, 2);
  auto ro = m->create(with(id, "/srv/ro", true));
  ASSERT_TRUE(ro) << ro.error().message;
  EXPECT_EQ(run(**ro, "cd /srv/ro && cat log | tr '\\n' ' '; stat -c %u:%g u/f; cat u/f"),
            "1 2 3 1000:1000\nmine");
  EXPECT_NE(run(**ro, "touch /srv/ro/new 2>&1").find("Read-only file system"), std::string::npos);
  EXPECT_GT(std::stoll(run(**ro, "df -k --output=size /srv/ro | tail -n1")), 1500000);
  ASSERT_TRUE((*ro)->destroy());

  ASSERT_TRUE(m->delete_volume(id));
  EXPECT_TRUE(m->volumes().empty());
  EXPECT_EQ(m->delete_volume(id).error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace pvs
