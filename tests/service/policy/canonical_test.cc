// The canonical form of a guarded call (policy/canonical.h): every field counts, cuts are said.
#include <gtest/gtest.h>

#include "policy/canonical.h"

namespace pvs::service {
namespace {

TEST(Canonical, EveryExecFieldCounts) {
  ExecRequest a;
  a.command = "python3 build.py";
  std::string base = canonical_exec(a);
  EXPECT_EQ(base, R"({"command":"python3 build.py","cwd":"","env":[],"stdin":"",)"
                  R"("timeout_seconds":0})");
  for (auto change :
       {+[](ExecRequest& r) {
          r.env = {{"PATH", "/tmp"}};
        },
        +[](ExecRequest& r) { r.cwd = "/tmp"; }, +[](ExecRequest& r) { r.stdin_data = "x"; },
        +[](ExecRequest& r) { r.timeout_seconds = 5; }}) {
    ExecRequest b = a;
    change(b);
    EXPECT_NE(canonical_exec(b), base);
  }
  Egress on443 = Egress::allow({"a.org"}, {443});
  EXPECT_NE(canonical_internet(on443), canonical_internet(Egress::allow({"a.org"}, {8443})));
}

// E2B's create: REST's fields, the template and the envVars (names and values) all count, so
// an approval of one create is not spent on another (#46, finding 4).
TEST(Canonical, EveryE2bCreateFieldCounts) {
  CreateRequest r;
  r.ttl_seconds = 300;
  r.labels = {{"run", "a"}};
  Egress egress = Egress::allow({"pypi.org"});
  std::map<std::string, std::string> env{{"A", "1"}};
  std::string base = canonical_e2b_create(r, egress, "base", env);
  EXPECT_EQ(base, R"({"create":)" + canonical_create(r, egress) +
                      R"(,"env_vars":[["A","1"]],"template_id":"base"})");
  EXPECT_NE(canonical_e2b_create(r, egress, "web", env), base);
  EXPECT_NE(canonical_e2b_create(r, egress, "base", {{"A", "1"}, {"BASH_ENV", "/tmp/x"}}), base);
  EXPECT_NE(canonical_e2b_create(r, egress, "base", {{"A", "2"}}), base);
  EXPECT_NE(canonical_e2b_create(r, Egress::allow({"pypi.org", "b.org"}), "base", env), base);
  CreateRequest other = r;
  other.labels = {{"run", "b"}};
  EXPECT_NE(canonical_e2b_create(other, egress, "base", env), base);
  other = r;
  other.ttl_seconds = 3600;
  EXPECT_NE(canonical_e2b_create(other, egress, "base", env), base);
  // The mounts count: an approval of a create with one volume is not spent on another.
  other = r;
  other.volumes = {{"work", "/mnt/w", false}};
  const std::string with_volume = canonical_create(other, egress);
  EXPECT_NE(with_volume.find(R"("volumes":[{"path":"/mnt/w","read_only":false,"volume":"work"}])"),
            std::string::npos)
      << with_volume;
  other.volumes[0].read_only = true;
  EXPECT_NE(canonical_create(other, egress), with_volume);
  other.volumes[0].volume = "other";
  EXPECT_NE(canonical_e2b_create(other, egress, "base", env), base);
}

// A move binds both ends and what lands: another source, another destination or other content
// at the same source is another call (#46, finding 4).
TEST(Canonical, AMoveCoversBothEndsAndTheContentThatLands) {
  FileIdentity f{"file", 0100644, 5, 1795760000, std::string(64, 'a')};
  std::string base = canonical_move("/work/out.txt", "/etc/guarded/in.txt", f);
  EXPECT_EQ(base, R"({"destination":"/etc/guarded/in.txt","source":"/work/out.txt",)"
                  R"("source_file":{"content_sha256":")" +
                      std::string(64, 'a') +
                      R"(","kind":"file","mode":"0644","mtime":1795760000,"size":5}})");
  EXPECT_NE(canonical_move("/work/other.txt", "/etc/guarded/in.txt", f), base);
  EXPECT_NE(canonical_move("/work/out.txt", "/etc/guarded/in2.txt", f), base);
  EXPECT_NE(canonical_move("/etc/guarded/in.txt", "/work/out.txt", f), base);  // reversed
  for (auto change :
       {+[](FileIdentity& x) { x.content_sha256 = std::string(64, 'b'); },
        +[](FileIdentity& x) { x.size = 6; }, +[](FileIdentity& x) { x.mtime++; },
        +[](FileIdentity& x) { x.kind = "dir"; }, +[](FileIdentity& x) { x.mode = 0100755; }}) {
    FileIdentity g = f;
    change(g);
    EXPECT_NE(canonical_move("/work/out.txt", "/etc/guarded/in.txt", g), base);
  }
}

TEST(Canonical, CutsSayHowMuchIsLeftOut) {
  EXPECT_EQ(cut_for_display("short", 10), "short");
  EXPECT_EQ(cut_for_display(std::string(1030, 'a'), 1024),
            std::string(1024, 'a') + "…(cut, 6 bytes more)");
  EXPECT_EQ(cut_for_display("ab\xc3\xa9", 3), "ab…(cut, 2 bytes more)");  // not inside é
}

TEST(Canonical, ContentDigest) {
  EXPECT_EQ(content_digest_sha256("sha-256=:WJG1tSLV3whtD/CxEPvZ0hu0/HFjrzTQgoai6Eb2vgM=:"),
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
  EXPECT_EQ(content_digest_sha256(
                "sha-512=:abc:, sha-256=:WJG1tSLV3whtD/CxEPvZ0hu0/HFjrzTQgoai6Eb2vgM=:"),
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
  EXPECT_FALSE(content_digest_sha256("sha-256=:abc=:"));
  EXPECT_FALSE(content_digest_sha256("md5=:abc:"));
}

}  // namespace
}  // namespace pvs::service
