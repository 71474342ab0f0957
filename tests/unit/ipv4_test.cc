#include "pvesandbox/common/ipv4.h"

#include <gtest/gtest.h>

#include <set>
#include <unordered_set>
#include <vector>

namespace pvs {
namespace {

Ipv4Address ip(std::string_view text) {
  auto r = Ipv4Address::parse(text);
  EXPECT_TRUE(r.has_value()) << text;
  return r.value_or(Ipv4Address());
}

Cidr cidr(std::string_view text) {
  auto r = Cidr::parse(text);
  EXPECT_TRUE(r.has_value()) << text;
  return r.value_or(Cidr());
}

TEST(Ipv4Address, ParsesCanonicalForms) {
  EXPECT_EQ(ip("0.0.0.0").to_uint(), 0u);
  EXPECT_EQ(ip("255.255.255.255").to_uint(), 0xffffffffu);
  EXPECT_EQ(ip("10.99.0.1").to_uint(), 0x0a630001u);
  EXPECT_EQ(ip("1.2.3.4").to_uint(), 0x01020304u);
  EXPECT_EQ(ip("192.168.100.200").to_uint(), 0xc0a864c8u);
}

TEST(Ipv4Address, FormatsBack) {
  for (const char* text : {"0.0.0.0", "255.255.255.255", "10.99.0.1", "1.22.133.4", "100.0.10.0"}) {
    EXPECT_EQ(ip(text).to_string(), text);
  }
  EXPECT_EQ(Ipv4Address(0x7f000001).to_string(), "127.0.0.1");
}

TEST(Ipv4Address, RoundTripsSampledValues) {
  for (std::uint64_t v = 0; v <= 0xffffffffull; v += 0x01010101ull * 7 + 13) {
    Ipv4Address a(static_cast<std::uint32_t>(v));
    auto back = Ipv4Address::parse(a.to_string());
    ASSERT_TRUE(back.has_value()) << a.to_string();
    EXPECT_EQ(*back, a);
  }
}

class Ipv4Malformed : public ::testing::TestWithParam<std::string> {};

TEST_P(Ipv4Malformed, IsRejectedWithAClearError) {
  auto r = Ipv4Address::parse(GetParam());
  ASSERT_FALSE(r.has_value()) << "accepted " << GetParam();
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("invalid IPv4 address"), std::string::npos) << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    All, Ipv4Malformed,
    ::testing::Values("", " ", "1", "1.2", "1.2.3", "1.2.3.4.", ".1.2.3.4", "1..2.3", "1.2.3.4.5",
                      "256.0.0.1", "1.2.3.256", "999.1.1.1", "1000.1.1.1", "01.2.3.4", "1.02.3.4",
                      "1.2.3.04", "00.0.0.0", "0x1.2.3.4", "0x7f.0.0.1", "1.2.3.0x4", "012.1.1.1",
                      "-1.2.3.4", "+1.2.3.4", "1.2.3.-4", " 1.2.3.4", "1.2.3.4 ", "1.2.3.4\n",
                      "1.2.3.4\r", "1. 2.3.4", "1.2.3.4/24", "1.2.3.4:80", "a.b.c.d", "1.2.3.a",
                      "1.2.3.4a", "127.1", "2130706433", "::1", "::ffff:1.2.3.4", "1,2,3,4",
                      "1.2.3.4\t", "１.2.3.4", std::string("1.2.3.4\0", 8),
                      std::string("1.2\0.3.4", 8), "1.2.3.00", "10.99.0.1.", "4294967296.0.0.0",
                      "1e2.0.0.1"));

TEST(Ipv4Address, ErrorMessageQuotesUntrustedBytes) {
  auto r = Ipv4Address::parse(std::string("1.2\x01\xff", 5));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("\\x01"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("\\xff"), std::string::npos) << r.error().message;
}

TEST(Ipv4Address, ErrorMessageIsBoundedForHugeInput) {
  auto r = Ipv4Address::parse(std::string(100000, '1'));
  ASSERT_FALSE(r.has_value());
  EXPECT_LT(r.error().message.size(), 200u);
}

TEST(Ipv4Address, OrdersAndHashes) {
  EXPECT_LT(ip("10.0.0.9"), ip("10.0.0.10"));
  EXPECT_LT(ip("9.255.255.255"), ip("10.0.0.0"));
  EXPECT_EQ(ip("10.0.0.1"), Ipv4Address(0x0a000001));
  std::unordered_set<Ipv4Address> set{ip("10.0.0.1"), ip("10.0.0.1"), ip("10.0.0.2")};
  EXPECT_EQ(set.size(), 2u);
  std::set<Ipv4Address> ordered{ip("10.0.0.3"), ip("10.0.0.1"), ip("10.0.0.2")};
  EXPECT_EQ(ordered.begin()->to_string(), "10.0.0.1");
}

TEST(Cidr, ParsesAndReports) {
  Cidr c = cidr("10.99.0.0/16");
  EXPECT_EQ(c.prefix(), 16);
  EXPECT_EQ(c.network().to_string(), "10.99.0.0");
  EXPECT_EQ(c.netmask().to_string(), "255.255.0.0");
  EXPECT_EQ(c.broadcast().to_string(), "10.99.255.255");
  EXPECT_EQ(c.size(), 65536u);
  EXPECT_EQ(c.to_string(), "10.99.0.0/16");
}

TEST(Cidr, EdgePrefixes) {
  Cidr all = cidr("0.0.0.0/0");
  EXPECT_EQ(all.size(), 1ull << 32);
  EXPECT_EQ(all.netmask().to_string(), "0.0.0.0");
  EXPECT_EQ(all.broadcast().to_string(), "255.255.255.255");
  EXPECT_TRUE(all.contains(ip("1.2.3.4")));
  Cidr one = cidr("10.0.0.7/32");
  EXPECT_EQ(one.size(), 1u);
  EXPECT_TRUE(one.contains(ip("10.0.0.7")));
  EXPECT_FALSE(one.contains(ip("10.0.0.8")));
  EXPECT_TRUE(one.is_host(ip("10.0.0.7")));
  Cidr p2p = cidr("10.0.0.6/31");
  EXPECT_TRUE(p2p.is_host(ip("10.0.0.6")));
  EXPECT_TRUE(p2p.is_host(ip("10.0.0.7")));
  Cidr top = cidr("255.255.255.255/32");
  EXPECT_EQ(std::distance(top.begin(), top.end()), 1);
}

TEST(Cidr, ContainsAndHosts) {
  Cidr c = cidr("10.99.0.0/16");
  EXPECT_TRUE(c.contains(ip("10.99.0.0")));
  EXPECT_TRUE(c.contains(ip("10.99.255.255")));
  EXPECT_TRUE(c.contains(ip("10.99.12.34")));
  EXPECT_FALSE(c.contains(ip("10.98.255.255")));
  EXPECT_FALSE(c.contains(ip("10.100.0.0")));
  EXPECT_FALSE(c.is_host(ip("10.99.0.0")));
  EXPECT_FALSE(c.is_host(ip("10.99.255.255")));
  EXPECT_TRUE(c.is_host(ip("10.99.0.1")));
  EXPECT_FALSE(c.is_host(ip("10.100.0.1")));
  EXPECT_TRUE(c.contains(cidr("10.99.4.0/24")));
  EXPECT_TRUE(c.contains(c));
  EXPECT_FALSE(c.contains(cidr("10.0.0.0/8")));
  EXPECT_FALSE(c.contains(cidr("10.98.0.0/24")));
}

TEST(Cidr, IteratesEveryAddressInOrder) {
  Cidr c = cidr("192.168.1.0/29");
  std::vector<std::string> seen;
  for (Ipv4Address a : c) seen.push_back(a.to_string());
  ASSERT_EQ(seen.size(), 8u);
  EXPECT_EQ(seen.front(), "192.168.1.0");
  EXPECT_EQ(seen.back(), "192.168.1.7");
  EXPECT_EQ(c.at(3).to_string(), "192.168.1.3");
  std::uint64_t n = 0;
  for (auto a : cidr("10.99.0.0/16")) {
    ASSERT_EQ(a.to_uint(), 0x0a630000u + n);
    ++n;
  }
  EXPECT_EQ(n, 65536u);
}

TEST(Cidr, MakeChecksHostBits) {
  EXPECT_TRUE(Cidr::make(ip("10.0.0.0"), 8).has_value());
  EXPECT_FALSE(Cidr::make(ip("10.0.0.1"), 8).has_value());
  EXPECT_FALSE(Cidr::make(ip("10.0.0.0"), 33).has_value());
  EXPECT_FALSE(Cidr::make(ip("10.0.0.0"), -1).has_value());
}

class CidrMalformed : public ::testing::TestWithParam<std::string> {};

TEST_P(CidrMalformed, IsRejected) {
  auto r = Cidr::parse(GetParam());
  ASSERT_FALSE(r.has_value()) << "accepted " << GetParam();
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("invalid CIDR"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(All, CidrMalformed,
                         ::testing::Values("", "10.99.0.0", "10.99.0.0/", "/16", "10.99.0.0/33",
                                           "10.99.0.0/016", "10.99.0.0/-1", "10.99.0.0/+16",
                                           "10.99.0.0/16/16", "10.99.0.0/1 6", "10.99.0.0 /16",
                                           "10.99.0.0/16 ", "10.99.0.5/16", "10.99.0.0/0x10",
                                           "010.99.0.0/16", "10.99.0.0/100",
                                           "10.99.0.0/255.255.0.0", "10.99.1.0/16"));

TEST(Cidr, HostBitsErrorNamesTheNetwork) {
  auto r = Cidr::parse("10.99.0.5/16");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("10.99.0.0/16"), std::string::npos) << r.error().message;
}

TEST(Cidr, Hashes) {
  std::unordered_set<Cidr> set{cidr("10.0.0.0/8"), cidr("10.0.0.0/16"), cidr("10.0.0.0/8")};
  EXPECT_EQ(set.size(), 2u);
}

}  // namespace
}  // namespace pvs
