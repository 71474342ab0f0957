// Volume names, ids and mount paths (pvesandbox/volumes.h), and mounts in the description.
#include <gtest/gtest.h>

#include "pvesandbox/sandbox_metadata.h"
#include "pvesandbox/volumes.h"

namespace pvs {
namespace {

TEST(VolumeRules, Names) {
  for (const char* ok : {"data", "0cache", "a_b-c", "x"}) EXPECT_TRUE(valid_volume_name(ok)) << ok;
  for (const char* bad : {"", "-lead", "_lead", "Upper", "sp ace", "a/b", "a.b"})
    EXPECT_FALSE(valid_volume_name(bad)) << bad;
  EXPECT_TRUE(valid_volume_name(std::string(63, 'a')));
  EXPECT_FALSE(valid_volume_name(std::string(64, 'a')));
}

TEST(VolumeRules, Ids) {
  EXPECT_TRUE(valid_volume_id("vol-0123456789ab"));
  for (const char* bad : {"vol-0123456789aB", "vol-0123456789a", "sb-0123456789ab", "data"})
    EXPECT_FALSE(valid_volume_id(bad)) << bad;
}

TEST(VolumeRules, MountPaths) {
  for (const char* ok : {"/mnt/data", "/data", "/home/user/work", "/root/cache", "/srv/a.b_c+d@e",
                         "/var/lib/app", "/tmp/x", "/opt/x"})
    EXPECT_TRUE(check_mount_path(ok)) << ok;
  for (const char* bad :
       {"",         "mnt",      "/",     "/mnt/",    "/mnt//x",  "/mnt/./x", "/mnt/../etc",
        "/root",    "/home",    "/var",  "/tmp",     "/proc",    "/proc/x",  "/sys/fs",
        "/dev/shm", "/run/x",   "/etc",  "/etc/ssh", "/usr/x",   "/bin",     "/sbin",
        "/lib",     "/lib64/x", "/boot", "/mnt/a,b", "/mnt/a=b", "/mnt/a b", "/mnt/a;b"}) {
    auto r = check_mount_path(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
  EXPECT_TRUE(check_mount_path("/" + std::string(199, 'a')));
  EXPECT_FALSE(check_mount_path("/" + std::string(200, 'a')));
  EXPECT_TRUE(check_mount_path("/library"));  // not /lib
}

TEST(VolumeRules, Mounts) {
  EXPECT_TRUE(
      check_mounts({{"vol-000000000001", "/a", false}, {"vol-000000000002", "/ab", true}}, 8));
  auto nested = check_mounts({{"vol-000000000001", "/a"}, {"vol-000000000002", "/a/b"}}, 8);
  ASSERT_FALSE(nested);
  EXPECT_NE(nested.error().message.find("overlap"), std::string::npos);
  EXPECT_FALSE(check_mounts({{"vol-000000000001", "/a"}, {"vol-000000000001", "/b"}}, 8));
  EXPECT_FALSE(check_mounts({{"vol-000000000001", "/a"}, {"vol-000000000002", "/a"}}, 8));
  EXPECT_FALSE(check_mounts({{"vol-000000000001", "/a"}, {"vol-000000000002", "/b"}}, 1));
  EXPECT_FALSE(check_mounts({{"vol-000000000001", "/etc/x"}}, 8));
}

TEST(VolumeRules, DescriptionKeepsTheMounts) {
  SandboxMetadata m;
  m.id = "sb-0123456789ab";
  m.vmid = 10001;
  m.phase = SandboxMetadata::Phase::kReady;
  m.volumes = {{"vol-0123456789ab", "/mnt/data", false}, {"vol-0123456789ac", "/srv/ro", true}};
  auto back = decode_description(encode_description(m));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, m);
  for (const char* bad : {R"("volumes":{})", R"("volumes":[{"id":"x","path":"/mnt"}])",
                          R"("volumes":[{"id":"vol-0123456789ab","path":"/etc"}])"}) {
    std::string text = std::string(
                           "pve-sandbox:v1 {\"id\":\"x\",\"vmid\":120,\"phase\":\"ready\","
                           "\"created\":1,\"expires\":0,\"internet\":false,") +
                       bad + "}";
    auto r = decode_description(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << text;
  }
}

}  // namespace
}  // namespace pvs
