// The sealed requestState of a tool call that waits for a person's approval.
#include <gtest/gtest.h>

#include "api/mcp/request_state.h"

namespace pvs::service::mcp {
namespace {

const std::string kKey = new_state_key();

PendingState state() {
  return {"ap-1a2b-7", "ci", "exec", arguments_digest(R"({"command":"pip install x"})"), 1000};
}

TEST(McpRequestState, RoundTrip) {
  std::string s = seal_state(state(), kKey);
  EXPECT_EQ(s.rfind("v1.", 0), 0u);
  EXPECT_EQ(s.find_first_of("+/= \""), std::string::npos) << s;
  auto o = open_state(s, kKey, 999);
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->approval_id, "ap-1a2b-7");
  EXPECT_EQ(o->token, "ci");
  EXPECT_EQ(o->tool, "exec");
  EXPECT_EQ(o->expires, 1000);
  EXPECT_TRUE(state_matches(*o, "ci", "exec", state().digest));
  EXPECT_FALSE(state_matches(*o, "other", "exec", state().digest));
  EXPECT_FALSE(state_matches(*o, "ci", "write_file", state().digest));
  EXPECT_FALSE(state_matches(*o, "ci", "exec", arguments_digest("{}")));
}

TEST(McpRequestState, TamperingAndOtherKeysAreRefused) {
  std::string s = seal_state(state(), kKey);
  EXPECT_FALSE(open_state(s, new_state_key(), 0));  // another process's key
  for (std::size_t i = 3; i < s.size(); i += 7) {
    std::string t = s;
    t[i] = t[i] == 'A' ? 'B' : 'A';
    EXPECT_FALSE(open_state(t, kKey, 0)) << i;
  }
  EXPECT_FALSE(open_state("", kKey, 0));
  EXPECT_FALSE(open_state("v1.", kKey, 0));
  EXPECT_FALSE(open_state("v1..", kKey, 0));
  EXPECT_FALSE(open_state("v2" + s.substr(2), kKey, 0));
  EXPECT_FALSE(open_state(s + std::string(kMaxStateBytes, 'A'), kKey, 0));
}

TEST(McpRequestState, ExpiredStateSaysSo) {
  auto o = open_state(seal_state(state(), kKey), kKey, 1001);
  ASSERT_FALSE(o);
  EXPECT_NE(o.error().find("expired"), std::string::npos);
}

TEST(McpRequestState, DigestIsSha256Hex) {
  EXPECT_EQ(arguments_digest(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(new_state_key().size(), 32u);
  EXPECT_NE(new_state_key(), new_state_key());
}

}  // namespace
}  // namespace pvs::service::mcp
