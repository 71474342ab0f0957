#include "pvesandbox/common/mac_address.h"

#include <gtest/gtest.h>

namespace pvs {
namespace {

TEST(MacAddress, ParsesEitherCaseAndPrintsLower) {
  auto m = MacAddress::parse("BC:24:11:2A:3b:4c");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->to_string(), "bc:24:11:2a:3b:4c");
  EXPECT_EQ(m->bytes()[0], 0xbc);
  EXPECT_EQ(m->bytes()[5], 0x4c);
}

TEST(MacAddress, Classifies) {
  EXPECT_TRUE(MacAddress::parse("02:00:00:00:00:01")->is_unicast());
  EXPECT_TRUE(MacAddress::parse("00:00:00:00:00:00")->is_zero());
  EXPECT_FALSE(MacAddress::parse("00:00:00:00:00:00")->is_unicast());
  EXPECT_TRUE(MacAddress::parse("ff:ff:ff:ff:ff:ff")->is_multicast());
  EXPECT_TRUE(MacAddress::parse("01:00:5e:00:00:01")->is_multicast());
  EXPECT_TRUE(MacAddress::parse("33:33:00:00:00:01")->is_multicast());
  EXPECT_FALSE(MacAddress::parse("33:33:00:00:00:01")->is_unicast());
}

TEST(MacAddress, RejectsMalformed) {
  for (const char* text :
       {"", "bc:24:11:2a:3b", "bc:24:11:2a:3b:4c:5d", "bc-24-11-2a-3b-4c", "bc24.112a.3b4c",
        "bc:24:11:2a:3b:4g", "bc:24:11:2a:3b:4", "b:24:11:2a:3b:4c0", " bc:24:11:2a:3b:4c",
        "bc:24:11:2a:3b:4c ", "bc:24:11:2a:3b:4c\n", "bc:24:11:2a:3b::4", "bc;24:11:2a:3b:4c"}) {
    auto m = MacAddress::parse(text);
    EXPECT_FALSE(m.has_value()) << text;
    if (!m) {
      EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST(MacAddress, Compares) {
  EXPECT_EQ(*MacAddress::parse("02:00:00:00:00:01"), *MacAddress::parse("02:00:00:00:00:01"));
  EXPECT_LT(*MacAddress::parse("02:00:00:00:00:01"), *MacAddress::parse("02:00:00:00:00:02"));
}

}  // namespace
}  // namespace pvs
