// The resolver's DNS codec: strict parsing, the CNAME chain, answers.
#include "dns_message.h"

#include <gtest/gtest.h>

#include "resolver_config.h"

namespace pvs::dns {
namespace {

void put16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}

std::vector<std::uint8_t> header(std::uint16_t id, std::uint16_t flags, std::uint16_t qd,
                                 std::uint16_t an, std::uint16_t ar = 0) {
  std::vector<std::uint8_t> out;
  for (auto v : {id, flags, qd, an, std::uint16_t{0}, ar}) put16(out, v);
  return out;
}

void append(std::vector<std::uint8_t>& out, const std::vector<std::uint8_t>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

void record(std::vector<std::uint8_t>& out, const std::string& owner, std::uint16_t type,
            std::uint32_t ttl, const std::vector<std::uint8_t>& rdata) {
  append(out, *encode_name(owner));
  put16(out, type);
  put16(out, kClassIn);
  put16(out, static_cast<std::uint16_t>(ttl >> 16));
  put16(out, static_cast<std::uint16_t>(ttl));
  put16(out, static_cast<std::uint16_t>(rdata.size()));
  append(out, rdata);
}

TEST(DnsMessage, ParsesAQueryLowerCasedAndRefusesOddOnes) {
  auto wire = header(0x1234, 0x0100, 1, 0);
  append(wire, *encode_name("A.Allowed.TEST"));
  put16(wire, kTypeA);
  put16(wire, kClassIn);
  std::optional<std::uint16_t> id;
  auto q = parse_query(wire, &id);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(q->name, "a.allowed.test");
  EXPECT_EQ(q->id, 0x1234);
  EXPECT_TRUE(q->recursion_desired);
  // Trailing bytes, two questions, a response, a label with a dot, a forward pointer.
  auto trailing = wire;
  trailing.push_back(0);
  EXPECT_FALSE(parse_query(trailing, nullptr));
  auto two = wire;
  two[5] = 2;
  EXPECT_FALSE(parse_query(two, nullptr));
  auto response = wire;
  response[2] |= 0x80;
  EXPECT_FALSE(parse_query(response, nullptr));
  auto dotted = header(1, 0, 1, 0);
  append(dotted, {3, 'a', '.', 'b', 0, 0, 1, 0, 1});
  EXPECT_FALSE(parse_query(dotted, nullptr));
  auto forward = header(1, 0, 1, 0);
  append(forward, {0xc0, 14, 0, 0, 1, 0, 1});
  id.reset();
  EXPECT_FALSE(parse_query(forward, &id));
  EXPECT_EQ(id, 1);  // still known: FORMERR can be sent
  EXPECT_FALSE(parse_query(std::vector<std::uint8_t>{1, 2, 3}, nullptr));
}

TEST(DnsMessage, FollowsTheCnameChainAndTakesTheSmallestTtl) {
  auto wire = header(7, 0x8180, 1, 4);
  append(wire, *encode_name("www.alias.test"));
  put16(wire, kTypeA);
  put16(wire, kClassIn);
  record(wire, "www.alias.test", kTypeCname, 300, *encode_name("mid.alias.test"));
  record(wire, "mid.alias.test", kTypeCname, 120, *encode_name("b.target.test"));
  record(wire, "b.target.test", kTypeA, 60, {203, 0, 113, 21});
  record(wire, "other.test", kTypeA, 5, {203, 0, 113, 99});  // not on the chain: ignored
  auto r = parse_response(wire);
  ASSERT_TRUE(r) << r.error().message;
  auto chain = follow_chain(*r, "www.alias.test");
  ASSERT_EQ(chain.addresses.size(), 1u);
  EXPECT_EQ(chain.addresses[0].to_string(), "203.0.113.21");
  EXPECT_EQ(chain.chain.size(), 3u);
  EXPECT_EQ(chain.min_ttl, 60u);
  // A CNAME loop yields nothing.
  auto loop = header(7, 0x8180, 1, 2);
  append(loop, *encode_name("a.test"));
  put16(loop, kTypeA);
  put16(loop, kClassIn);
  record(loop, "a.test", kTypeCname, 1, *encode_name("b.test"));
  record(loop, "b.test", kTypeCname, 1, *encode_name("a.test"));
  EXPECT_TRUE(follow_chain(*parse_response(loop), "a.test").addresses.empty());
  // An A record of 5 bytes is malformed.
  auto bad = header(7, 0x8180, 1, 1);
  append(bad, *encode_name("a.test"));
  put16(bad, kTypeA);
  put16(bad, kClassIn);
  record(bad, "a.test", kTypeA, 1, {1, 2, 3, 4, 5});
  EXPECT_FALSE(parse_response(bad));
}

TEST(DnsMessage, AnswersFitTheSizeAndReadBack) {
  auto wire = header(9, 0x0100, 1, 0);
  append(wire, *encode_name("a.test"));
  put16(wire, kTypeA);
  put16(wire, kClassIn);
  auto q = *parse_query(wire, nullptr);
  std::vector<Record> records;
  for (int i = 0; i < 100; ++i) {
    Record rec;
    rec.owner = "a.test";
    rec.type = kTypeA;
    rec.address = Ipv4Address(0xcb007100u + static_cast<std::uint32_t>(i));
    records.push_back(rec);
  }
  std::size_t written = 0;
  auto answer = build_answer(q, Rcode::kNoError, records, 42, 512, &written);
  EXPECT_LE(answer.size(), 512u);
  EXPECT_LT(written, 100u);
  auto back = parse_response(answer);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->id, 9);
  EXPECT_EQ(back->answers.size(), written);
  EXPECT_EQ(back->answers[0].ttl, 42u);
}

TEST(ResolverConfig, ParsesAndRefuses) {
  auto c = resolver::parse_config(
      "listen: 10.99.0.1\nsandbox_cidr: 10.99.0.0/16\nupstreams: [\"203.0.113.53\", "
      "\"203.0.113.54:5300\"]\n",
      "resolver.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->port, 5353);
  ASSERT_EQ(c->upstreams.size(), 2u);
  EXPECT_EQ(c->upstreams[1].second, 5300);
  EXPECT_FALSE(resolver::parse_config("listen: 10.99.0.1\nsandbox_cidr: 10.99.0.0/16\n", "r"));
  EXPECT_FALSE(resolver::parse_config(
      "listen: 10.99.0.1\nsandbox_cidr: 10.99.0.0/16\nupstreams: [\"1.2.3.4:0\"]\n", "r"));
  EXPECT_FALSE(resolver::parse_config(
      "listen: 10.99.0.1\nsandbox_cidr: 10.99.0.0/16\nupstreams: [\"1.2.3.4\"]\nbogus: 1\n", "r"));
}

TEST(ResolverConfig, ShippedConfigParses) {
  auto c = resolver::load_config(std::string(PVS_SOURCE_ROOT) + "/resolver/resolver.yaml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->listen.to_string(), "10.99.0.1");
  EXPECT_EQ(c->port, 5353);
}

}  // namespace
}  // namespace pvs::dns
