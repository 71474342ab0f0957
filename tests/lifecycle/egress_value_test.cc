// The Egress value (egress.h): name rules, limits and normalisation; the EGRESS/EGRESSES wire
// format (egress_wire.h); an allowlist in the sandbox's description metadata.
#include <gtest/gtest.h>

#include "pvesandbox/common/protocol.h"
#include "pvesandbox/egress.h"
#include "pvesandbox/egress_wire.h"
#include "pvesandbox/sandbox_metadata.h"

namespace pvs {
namespace {

TEST(EgressNameTest, AcceptsLowerCaseNamesAndSubdomainWildcards) {
  for (const char* name :
       {"pypi.org", "files.pythonhosted.org", "*.github.com", "a-b.c0.io", "x.y.z.example", "0.a"})
    EXPECT_TRUE(validate_egress_name(name)) << name;
  std::string longest;
  for (int i = 0; i < 3; ++i) longest += std::string(63, 'a') + ".";
  longest += std::string(61, 'b');  // 253 bytes
  EXPECT_TRUE(validate_egress_name(longest));
  EXPECT_TRUE(validate_egress_name(std::string(63, 'a') + ".com"));
}

TEST(EgressNameTest, RefusesEverythingElse) {
  std::string too_long;
  for (int i = 0; i < 3; ++i) too_long += std::string(63, 'a') + ".";
  too_long += std::string(62, 'b');  // 254 bytes
  for (std::string name :
       {std::string(""), std::string("pypi"), std::string("PyPI.org"), std::string("*.com"),
        std::string("*"), std::string("*.*.github.com"), std::string("a.*.com"),
        std::string("-a.com"), std::string("a-.com"), std::string("a..com"), std::string(".a.com"),
        std::string("a.com."), std::string("a_b.com"), std::string("a b.com"),
        std::string("pypi.org,evil.com"), std::string("xn--\xc3\xa9.com"),
        std::string(64, 'a') + ".com", too_long}) {
    auto r = validate_egress_name(name);
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  }
}

// Issue #46: an address (an IPv4 literal, any entry whose last label is a number; an IPv6
// address or a CIDR block) is not a name, refused saying egress is by name. A list read back
// (set before the rule) still reads.
TEST(EgressNameTest, AnAddressIsNotAName) {
  for (std::string entry : {"203.0.113.11", "203.0.113.11.", "10.1", "1234", "1.0x7f", "a.0X1F",
                            "0x7f.0.0.1", "*.0.113.11", "2001:db8::1", "10.0.0.0/8"}) {
    EXPECT_TRUE(egress_entry_is_address(entry)) << entry;
    auto r = validate_egress_name(entry);
    ASSERT_FALSE(r) << entry;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("is an address: egress allowlists are by DNS name"),
              std::string::npos)
        << r.error().message;
  }
  for (std::string name : {"1.2.3.example", "0.a", "x.0xg", "a.b1", "pypi.org"}) {
    EXPECT_FALSE(egress_entry_is_address(name)) << name;
    EXPECT_TRUE(validate_egress_name(name)) << name;
  }
  auto literal = Egress::allow({"pypi.org", "203.0.113.11"});
  EXPECT_FALSE(validate_egress(literal));
  EXPECT_FALSE(validate_egress_list(literal.list));
  EXPECT_TRUE(validate_stored_egress_list(literal.list));
}

// #32, finding 5: a wildcard reaches one owner's names, never a public suffix's (libpsl, ICANN
// and private sections) nor a wildcard DNS service's; a list read back keeps what it had.
TEST(EgressNameTest, RefusesWildcardsAtAPublicSuffix) {
  for (std::string name : {"*.co.uk", "*.nip.io", "*.github.io", "*.com"}) {
    auto r = validate_egress_name(name);
    ASSERT_FALSE(r) << name;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    std::string base = name.substr(2);
    EXPECT_NE(r.error().message.find(
                  base + (base == "nip.io" ? " is a wildcard DNS service" : " is a public suffix")),
              std::string::npos)
        << r.error().message;
    auto list = Egress::allow({"pypi.org", name});
    EXPECT_FALSE(validate_egress(list)) << name;
    EXPECT_FALSE(validate_egress_list(list.list)) << name;
  }
  for (const char* name : {"*.example.com", "*.pythonhosted.org"})
    EXPECT_TRUE(validate_egress_name(name)) << name;
  auto old = Egress::allow({"*.github.io"});
  EXPECT_TRUE(validate_stored_egress_list(old.list));
  auto read = egress_wire::parse_egresses_payload("1 10.99.0.7=443/*.github.io");
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->begin()->second.names, (std::vector<std::string>{"*.github.io"}));
}

TEST(EgressListTest, NormalisesAndChecksTheLimits) {
  auto e = Egress::allow({"b.org", "a.org", "b.org"});
  EXPECT_EQ(e.list.names, (std::vector<std::string>{"a.org", "b.org"}));
  EXPECT_EQ(e.list.ports, (std::vector<std::uint16_t>{80, 443}));
  EXPECT_TRUE(validate_egress(e));
  EXPECT_TRUE(validate_egress(Egress::on()));
  EXPECT_TRUE(validate_egress(Egress::off()));
  EXPECT_FALSE(validate_egress(Egress::allow({})));  // an allowlist needs a name

  std::vector<std::string> names;
  for (std::size_t i = 0; i <= kMaxEgressNames; ++i)
    names.push_back("n" + std::to_string(i) + ".io");
  EXPECT_FALSE(validate_egress(Egress::allow(names)));
  names.pop_back();
  EXPECT_TRUE(validate_egress(Egress::allow(names)));

  std::vector<std::uint16_t> ports;
  for (std::uint16_t p = 1; p <= kMaxEgressPorts + 1; ++p) ports.push_back(p);
  EXPECT_FALSE(validate_egress(Egress::allow({"a.org"}, ports)));
  ports.pop_back();
  EXPECT_TRUE(validate_egress(Egress::allow({"a.org"}, ports)));
  EXPECT_FALSE(validate_egress(Egress::allow({"a.org"}, {0})));

  // 40 names of 60 bytes: within the count, beyond kMaxEgressNamesBytes.
  std::vector<std::string> long_names;
  for (int i = 0; i < 40; ++i)
    long_names.push_back(std::to_string(100 + i) + std::string(52, 'x') + ".org");
  auto big = validate_egress(Egress::allow(long_names));
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("2048 bytes"), std::string::npos);
}

TEST(EgressListTest, ListNames) {
  EXPECT_TRUE(valid_egress_list_name("python-packages"));
  EXPECT_TRUE(valid_egress_list_name("git_forges.v2"));
  EXPECT_FALSE(valid_egress_list_name(""));
  EXPECT_FALSE(valid_egress_list_name("-x"));
  EXPECT_FALSE(valid_egress_list_name("Python"));
  EXPECT_FALSE(valid_egress_list_name(std::string(65, 'a')));
}

TEST(EgressWireTest, FormatsTheRequests) {
  auto a = *Ipv4Address::parse("10.99.0.7");
  auto e = Egress::allow({"pypi.org", "*.github.com"});
  EXPECT_EQ(egress_wire::format_egress(a, e.list),
            "EGRESS 10.99.0.7 ports=80,443 names=*.github.com,pypi.org");
  EXPECT_EQ(egress_wire::format_egress_off(a), "EGRESS 10.99.0.7 off");
  EXPECT_EQ(egress_wire::kEgressesRequest, "EGRESSES");
}

TEST(EgressWireTest, OneCodecTheAgentParsesWhatTheControllerSends) {
  auto a = *Ipv4Address::parse("10.99.0.7");
  auto e = Egress::allow({"pypi.org", "*.github.com"}, {443, 80});
  auto request = proto::parse_request(egress_wire::format_egress(a, e.list));
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_EQ(std::get<proto::EgressRequest>(*request),
            (proto::EgressRequest{a, proto::EgressList{e.list.ports, e.list.names}}));
  auto off = proto::parse_request(egress_wire::format_egress_off(a));
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_EQ(std::get<proto::EgressRequest>(*off), (proto::EgressRequest{a, std::nullopt}));
  // What the agent's codec formats, the controller reads back as the same list.
  auto payload = proto::format_egresses_payload(
      {proto::EgressEntry{a, proto::EgressList{e.list.ports, e.list.names}}});
  auto lists = egress_wire::parse_egresses_payload(payload);
  ASSERT_TRUE(lists) << lists.error().message;
  EXPECT_EQ(lists->at(a), e.list);
}

TEST(EgressWireTest, ParsesEgressesReplies) {
  auto none = egress_wire::parse_egresses_payload("0");
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());
  auto two = egress_wire::parse_egresses_payload(
      "2 10.99.0.7=443,80/pypi.org,*.github.com 10.99.0.9=8443/api.example.com");
  ASSERT_TRUE(two) << two.error().message;
  ASSERT_EQ(two->size(), 2u);
  auto& first = two->at(*Ipv4Address::parse("10.99.0.7"));
  EXPECT_EQ(first.names, (std::vector<std::string>{"*.github.com", "pypi.org"}));
  EXPECT_EQ(first.ports, (std::vector<std::uint16_t>{80, 443}));
  EXPECT_EQ(two->at(*Ipv4Address::parse("10.99.0.9")).ports, (std::vector<std::uint16_t>{8443}));
}

TEST(EgressWireTest, RefusesMalformedReplies) {
  for (const char* bad : {"", "x", "1", "0 10.99.0.7=80/a.org", "2 10.99.0.7=80/a.org",
                          "1 10.99.0.7", "1 10.99.0.7=80", "1 10.99.0.300=80/a.org",
                          "1 10.99.0.7=0/a.org", "1 10.99.0.7=99999/a.org", "1 10.99.0.7=80/A.org",
                          "1 10.99.0.7=80/", "1 10.99.0.7=/a.org", "1 10.99.0.7=80,/a.org",
                          "2 10.99.0.7=80/a.org 10.99.0.7=80/b.org", "1  10.99.0.7=80/a.org"}) {
    auto r = egress_wire::parse_egresses_payload(bad);
    EXPECT_FALSE(r) << bad;
  }
}

TEST(EgressMetadataTest, AnAllowlistRoundTripsThroughTheDescription) {
  SandboxMetadata m;
  m.id = "sb-0123456789ab";
  m.vmid = 120;
  m.address = *Ipv4Address::parse("10.99.0.7");
  set_egress(m, Egress::allow({"pypi.org", "files.pythonhosted.org"}, {443}, "python-packages"));
  EXPECT_FALSE(m.internet);
  auto text = encode_description(m);
  EXPECT_NE(text.find(R"("egress":{)"), std::string::npos) << text;
  auto back = decode_description(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, m);
  auto e = egress_of(*back);
  EXPECT_EQ(e.mode, Egress::Mode::kAllowlist);
  EXPECT_EQ(e.list_name, "python-packages");
  EXPECT_EQ(e.list.ports, (std::vector<std::uint16_t>{443}));

  set_egress(m, Egress::on());
  EXPECT_TRUE(m.internet);
  EXPECT_FALSE(m.allowlist);
  EXPECT_EQ(encode_description(m).find("egress"), std::string::npos);
}

TEST(EgressMetadataTest, ADamagedAllowlistIsDamagedMetadata) {
  for (const char* egress :
       {R"("x")", R"({"names":["pypi.org"]})", R"({"names":["PYPI"],"ports":[80]})",
        R"({"names":["pypi.org"],"ports":[0]})", R"({"names":[],"ports":[80]})",
        R"({"names":["pypi.org"],"ports":[80],"list":"Bad Name"})"}) {
    std::string text =
        "pve-sandbox:v1 {\"id\":\"sb-1\",\"vmid\":120,\"phase\":\"ready\",\"created\":1,"
        "\"expires\":0,\"internet\":false,\"egress\":" +
        std::string(egress) + "}";
    auto r = decode_description(text);
    ASSERT_FALSE(r) << egress;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << egress;
  }
}

}  // namespace
}  // namespace pvs
