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
