// The egress verbs of the agent protocol: EGRESS, EGRESSES, ASK, PAIR and their payloads.
#include <gtest/gtest.h>

#include <string>

#include "pvesandbox/common/protocol.h"

namespace pvs::proto {
namespace {

Ipv4Address egress_ip(std::string_view text) {
  return Ipv4Address::parse(text).value();
}

Request parse_round_trip(std::string_view line) {
  auto r = parse_request(line);
  EXPECT_TRUE(r.has_value()) << line << ": " << (r ? "" : r.error().message);
  if (r) {
    EXPECT_EQ(format_request(*r), line);  // canonical lines round-trip unchanged
  }
  return r.value_or(Request{});
}

void expect_rejected(std::string_view line, std::string_view needle) {
  auto r = parse_request(line);
  ASSERT_FALSE(r.has_value()) << "accepted: " << line;
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << line;
  EXPECT_NE(r.error().message.find(needle), std::string::npos)
      << "message for " << line << " was: " << r.error().message;
}

TEST(EgressNames, Syntax) {
  EXPECT_TRUE(is_valid_egress_name("pypi.org", false));
  EXPECT_TRUE(is_valid_egress_name("files.pythonhosted.org", false));
  EXPECT_TRUE(is_valid_egress_name("a-b.c0.example", false));
  EXPECT_TRUE(is_valid_egress_name("*.github.com", true));
  EXPECT_FALSE(is_valid_egress_name("*.github.com", false));
  EXPECT_FALSE(is_valid_egress_name("*.com.", true));
  EXPECT_FALSE(is_valid_egress_name("*.com", true));  // one label after the wildcard
  EXPECT_FALSE(is_valid_egress_name("localhost", false));
  EXPECT_FALSE(is_valid_egress_name("PyPI.org", false));
  EXPECT_FALSE(is_valid_egress_name("pypi.org.", false));
  EXPECT_FALSE(is_valid_egress_name(".pypi.org", false));
  EXPECT_FALSE(is_valid_egress_name("py..org", false));
  EXPECT_FALSE(is_valid_egress_name("-a.org", false));
  EXPECT_FALSE(is_valid_egress_name("a-.org", false));
  EXPECT_FALSE(is_valid_egress_name("a_b.org", false));
  EXPECT_FALSE(is_valid_egress_name("a.*.org", true));
  EXPECT_FALSE(is_valid_egress_name("**.org", true));
  EXPECT_FALSE(is_valid_egress_name("", true));
  std::string label63(63, 'a'), label64(64, 'a');
  EXPECT_TRUE(is_valid_egress_name(label63 + ".org", false));
  EXPECT_FALSE(is_valid_egress_name(label64 + ".org", false));
  std::string long_name;
  while (long_name.size() < 250) long_name += label63.substr(0, 9) + ".";
  long_name += "org";  // 253 or more
  EXPECT_EQ(is_valid_egress_name(long_name, false), long_name.size() <= 253);
  EXPECT_FALSE(is_valid_egress_name(long_name + ".org", false));
}

TEST(EgressNames, WildcardsMatchSubdomainsOnly) {
  EXPECT_TRUE(egress_name_matches("pypi.org", "pypi.org"));
  EXPECT_FALSE(egress_name_matches("pypi.org", "www.pypi.org"));
  EXPECT_TRUE(egress_name_matches("*.github.com", "api.github.com"));
  EXPECT_TRUE(egress_name_matches("*.github.com", "a.b.github.com"));
  EXPECT_FALSE(egress_name_matches("*.github.com", "github.com"));
  EXPECT_FALSE(egress_name_matches("*.github.com", "evilgithub.com"));
  EXPECT_FALSE(egress_name_matches("*.github.com", "github.com.evil.org"));
}

TEST(ParseRequest, Egress) {
  EXPECT_EQ(parse_round_trip("EGRESS 10.99.0.7 ports=80,443 names=pypi.org,*.github.com"),
            Request(EgressRequest{egress_ip("10.99.0.7"),
                                  EgressList{{80, 443}, {"pypi.org", "*.github.com"}}}));
  EXPECT_EQ(parse_round_trip("EGRESS 10.99.0.7 off"),
            Request(EgressRequest{egress_ip("10.99.0.7"), std::nullopt}));
  EXPECT_EQ(parse_round_trip("EGRESS 10.99.0.7 ports=65535 names=a.b"),
            Request(EgressRequest{egress_ip("10.99.0.7"), EgressList{{65535}, {"a.b"}}}));
  EXPECT_EQ(parse_round_trip("EGRESSES"), Request(EgressesRequest{}));
  EXPECT_EQ(verb_name(parse_round_trip("EGRESSES")), "EGRESSES");
}

TEST(ParseRequest, EgressRejects) {
  expect_rejected("EGRESS 10.99.0.7", "usage");
  expect_rejected("EGRESS 10.99.0.7 on", "usage");
  expect_rejected("EGRESS 10.99.0.7 names=a.b ports=80", "usage");
  expect_rejected("EGRESS 10.99.0.7 ports=80 names=a.b extra", "usage");
  expect_rejected("EGRESS 10.99.0.7 ports= names=a.b", "empty port list");
  expect_rejected("EGRESS 10.99.0.7 ports=0 names=a.b", "1-65535");
  expect_rejected("EGRESS 10.99.0.7 ports=65536 names=a.b", "1-65535");
  expect_rejected("EGRESS 10.99.0.7 ports=080 names=a.b", "leading zeros");
  expect_rejected("EGRESS 10.99.0.7 ports=80,,443 names=a.b", "port");
  expect_rejected("EGRESS 10.99.0.7 ports=80,80 names=a.b", "twice");
  expect_rejected("EGRESS 10.99.0.7 ports=80 names=a.b,a.b", "twice");
  expect_rejected("EGRESS 10.99.0.7 ports=80 names=A.b", "invalid name");
  expect_rejected("EGRESS 10.99.0.7 ports=80 names=a.b,", "invalid name");
  expect_rejected("EGRESS 10.99.0.7 ports=80 names=", "empty name list");
  expect_rejected("EGRESS 10.99.0.300 ports=80 names=a.b", "10.99.0.300");
  expect_rejected("EGRESSES x", "usage");
  std::string ports = "ports=1";
  for (int p = 2; p <= 17; ++p) ports += "," + std::to_string(p);
  expect_rejected("EGRESS 10.99.0.7 " + ports + " names=a.b", "more than 16 ports");
  std::string names = "names=n0.org";
  for (int n = 1; n <= 64; ++n) names += ",n" + std::to_string(n) + ".org";
  expect_rejected("EGRESS 10.99.0.7 ports=80 " + names, "more than 64 names");
}

TEST(ParseRequest, AskAndPair) {
  EXPECT_EQ(parse_round_trip("ASK 10.99.0.7 api.github.com"),
            Request(AskRequest{egress_ip("10.99.0.7"), "api.github.com"}));
  EXPECT_EQ(parse_round_trip("PAIR 10.99.0.7 pypi.org 151.101.0.223,151.101.64.223 ttl=300"),
            Request(PairRequest{egress_ip("10.99.0.7"),
                                "pypi.org",
                                {egress_ip("151.101.0.223"), egress_ip("151.101.64.223")},
                                300}));
  EXPECT_EQ(parse_round_trip("PAIR 10.99.0.7 a.b 1.2.3.4 ttl=0"),
            Request(PairRequest{egress_ip("10.99.0.7"), "a.b", {egress_ip("1.2.3.4")}, 0}));
  expect_rejected("ASK 10.99.0.7 *.github.com", "invalid name");
  expect_rejected("ASK 10.99.0.7 localhost", "invalid name");
  expect_rejected("ASK 10.99.0.7", "usage");
  expect_rejected("PAIR 10.99.0.7 a.b 1.2.3.4", "usage");
  expect_rejected("PAIR 10.99.0.7 a.b 1.2.3.4 300", "ttl=");
  expect_rejected("PAIR 10.99.0.7 a.b 1.2.3.4,1.2.3.4 ttl=1", "twice");
  expect_rejected("PAIR 10.99.0.7 a.b 1.2.3.4, ttl=1", "");
  expect_rejected("PAIR 10.99.0.7 a.b 1.2.3.4 ttl=2592001", "ttl");
  expect_rejected("PAIR 10.99.0.7 *.b.c 1.2.3.4 ttl=1", "invalid name");
  std::string dsts = "1.0.0.0";
  for (int i = 1; i <= 64; ++i) dsts += ",1.0.0." + std::to_string(i);
  expect_rejected("PAIR 10.99.0.7 a.b " + dsts + " ttl=1", "more than 64 destinations");
}

TEST(EgressPayloads, RoundTrip) {
  std::vector<EgressEntry> entries{
      {egress_ip("10.99.0.7"), EgressList{{80, 443}, {"pypi.org", "*.github.com"}}},
      {egress_ip("10.99.0.8"), EgressList{{443}, {"example.org"}}}};
  std::string payload = format_egresses_payload(entries);
  EXPECT_EQ(payload, "2 10.99.0.7=80,443/pypi.org,*.github.com 10.99.0.8=443/example.org");
  EXPECT_EQ(parse_egresses_payload(payload).value(), entries);
  EXPECT_EQ(parse_egresses_payload("0").value(), std::vector<EgressEntry>{});
  EXPECT_FALSE(parse_egresses_payload("").has_value());
  EXPECT_FALSE(parse_egresses_payload("2 10.99.0.7=80/a.b").has_value());
  EXPECT_FALSE(parse_egresses_payload("1 10.99.0.7/80=a.b").has_value());
  EXPECT_FALSE(parse_egresses_payload("2 10.99.0.7=80/a.b 10.99.0.7=80/a.b").has_value());

  EXPECT_EQ(format_ask_payload(AskAnswer{true, {80, 443}, ""}), "allow ports=80,443");
  EXPECT_EQ(format_ask_payload(AskAnswer{false, {}, ""}), "deny");
  EXPECT_EQ(parse_ask_payload("allow ports=80,443").value(), (AskAnswer{true, {80, 443}, ""}));
  EXPECT_EQ(parse_ask_payload("deny").value(), (AskAnswer{false, {}, ""}));
  EXPECT_FALSE(parse_ask_payload("allow").has_value());
  EXPECT_FALSE(parse_ask_payload("allow ports=").has_value());
  EXPECT_FALSE(parse_ask_payload("maybe").has_value());
  // The entry that matched (the resolver's egress log).
  EXPECT_EQ(format_ask_payload(AskAnswer{true, {443}, "*.github.com"}),
            "allow ports=443 entry=*.github.com");
  EXPECT_EQ(parse_ask_payload("allow ports=443 entry=*.github.com").value(),
            (AskAnswer{true, {443}, "*.github.com"}));
  EXPECT_FALSE(parse_ask_payload("allow ports=443 entry=").has_value());
  EXPECT_FALSE(parse_ask_payload("allow ports=443 entry=Bad..name").has_value());
  EXPECT_FALSE(parse_ask_payload("allow ports=443 other=x").has_value());
}

TEST(ProtocolEgress, EgressLogLines) {
  EgressLogLine l{*Ipv4Address::parse("10.99.0.7"),
                  "files.pythonhosted.org",
                  false,
                  1234,
                  1795747781103,
                  "",
                  {}};
  std::string text = format_egress_log(l);
  EXPECT_EQ(text,
            "ELOG 10.99.0.7 files.pythonhosted.org refuse n=1234 at=1795747781103 entry=- to=-");
  EXPECT_EQ(parse_egress_log(text).value(), l);
  std::string allowed =
      "ELOG 10.99.0.7 api.github.com allow n=2 at=5 entry=*.github.com to=1.2.3.4,5.6.7.8";
  auto a = parse_egress_log(allowed);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->entry, "*.github.com");
  EXPECT_EQ(a->to.size(), 2u);
  EXPECT_EQ(format_egress_log(*a), allowed);
  EXPECT_TRUE(parse_egress_log("ELOG 10.99.0.7 * refuse n=3 at=5 entry=- to=-"));
  for (const char* bad : {"ELOG 10.99.0.7 a.b refuse n=0 at=5 entry=- to=-",
                          "ELOG 10.99.0.7 a.b maybe n=1 at=5 entry=- to=-",
                          "ELOG 10.99.0.7 A.b refuse n=1 at=5 entry=- to=-",
                          "ELOG 10.99.0.7 a.b refuse n=1 at=5 entry=- to=1.2.3",
                          "ELOG 10.99.0.7 a.b refuse n=1 at=-5 entry=- to=-",
                          "ELOG 10.99.0.7 a.b refuse m=1 at=5 entry=- to=-",
                          "ELOG 10.99.0.7 a.b refuse n=1 at=5 entry=-", "ASK 10.99.0.7 a.b"}) {
    EXPECT_FALSE(parse_egress_log(bad).has_value()) << bad;
  }
  // As agent requests, and EGRESSLOG's reply.
  auto request = parse_request(allowed);
  ASSERT_TRUE(request) << request.error().message;
  EXPECT_EQ(verb_name(*request), "ELOG");
  EXPECT_EQ(format_request(*request), allowed);
  auto query = parse_request("EGRESSLOG 10.99.0.7");
  ASSERT_TRUE(query);
  EXPECT_EQ(verb_name(*query), "EGRESSLOG");
  EXPECT_EQ(format_request(*query), "EGRESSLOG 10.99.0.7");
  EXPECT_FALSE(parse_request("EGRESSLOG").has_value());
  std::vector<EgressLogLine> lines{l, *a};
  std::string payload = format_egress_log_payload(lines);
  EXPECT_EQ(payload,
            "2 files.pythonhosted.org/refuse/1234/1795747781103/-/- "
            "api.github.com/allow/2/5/*.github.com/1.2.3.4,5.6.7.8");
  EXPECT_EQ(parse_egress_log_payload(l.source, payload).value(), lines);
  EXPECT_EQ(parse_egress_log_payload(l.source, "0").value(), std::vector<EgressLogLine>{});
  EXPECT_FALSE(parse_egress_log_payload(l.source, "1 a.b/refuse/1/5/-").has_value());
  EXPECT_FALSE(parse_egress_log_payload(l.source, "2 a.b/refuse/1/5/-/-").has_value());
}

TEST(ProtocolEgress, EgressRefused) {
  auto query = parse_round_trip("EGRESSREFUSED 10.99.0.7");
  EXPECT_EQ(verb_name(query), "EGRESSREFUSED");
  EXPECT_EQ(std::get<EgressRefusedQuery>(query).address, egress_ip("10.99.0.7"));
  expect_rejected("EGRESSREFUSED", "EGRESSREFUSED <ipv4>");
  expect_rejected("EGRESSREFUSED 10.99.0.7 x", "EGRESSREFUSED <ipv4>");

  std::vector<RefusedConnection> items{
      {egress_ip("203.0.113.9"), 8080, 6, false, 3, 1795747781103, 1795747782000},
      {egress_ip("198.51.100.1"), 5000, 17, false, 1, 7, 7},
      {egress_ip("198.51.100.2"), 0, 1, false, 2, 7, 9},
      {Ipv4Address(0), 0, 0, true, 40, 1, 9}};
  std::string payload = format_egress_refused_payload(items);
  EXPECT_EQ(payload,
            "4 203.0.113.9:8080/tcp/3/1795747781103/1795747782000 198.51.100.1:5000/udp/1/7/7 "
            "198.51.100.2:0/1/2/7/9 0.0.0.0:0/*/40/1/9");
  EXPECT_EQ(parse_egress_refused_payload(payload).value(), items);
  EXPECT_EQ(parse_egress_refused_payload("0").value(), std::vector<RefusedConnection>{});
  for (const char* bad :
       {"1 203.0.113.9:8080/tcp/0/1/2", "1 203.0.113.9:8080/tcp/1/3/2", "1 203.0.113.9/tcp/1/1/2",
        "1 203.0.113.9:70000/tcp/1/1/2", "1 203.0.113.9:1/sctp/1/1/2", "1 1.2.3.4:5/*/1/1/2",
        "1 203.0.113.9:1/tcp/1/1", "2 203.0.113.9:1/tcp/1/1/2"}) {
    EXPECT_FALSE(parse_egress_refused_payload(bad).has_value()) << bad;
  }
  std::string many = std::to_string(kMaxRefusedPerReply + 2);
  for (std::size_t i = 0; i < kMaxRefusedPerReply + 2; ++i) many += " 1.2.3.4:1/tcp/1/1/1";
  EXPECT_FALSE(parse_egress_refused_payload(many).has_value());
}

}  // namespace
}  // namespace pvs::proto
