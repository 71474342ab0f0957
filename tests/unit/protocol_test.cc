#include "pvesandbox/common/protocol.h"

#include <gtest/gtest.h>

#include <string>

namespace pvs::proto {
namespace {

Ipv4Address ip4(std::string_view text) {
  return Ipv4Address::parse(text).value();
}
MacAddress mac(std::string_view text) {
  return MacAddress::parse(text).value();
}

Request parse_ok(std::string_view line) {
  auto r = parse_request(line);
  EXPECT_TRUE(r.has_value()) << line << ": " << (r ? "" : r.error().message);
  return r.value_or(Request{});
}

// Expects `line` to be rejected with `code` and a message containing `needle`.
void expect_rejected(std::string_view line, ErrorCode code, std::string_view needle) {
  auto r = parse_request(line);
  ASSERT_FALSE(r.has_value()) << "accepted: " << line;
  EXPECT_EQ(r.error().code, code) << line;
  EXPECT_NE(r.error().message.find(needle), std::string::npos)
      << "message for " << line << " was: " << r.error().message;
}

// ---- every verb, well-formed ----------------------------------------------------------------

TEST(ParseRequest, Hello) {
  EXPECT_EQ(parse_ok("HELLO 1"), Request(HelloRequest{1}));
  EXPECT_EQ(parse_ok("HELLO 2"), Request(HelloRequest{2}));
}

TEST(ParseRequest, Allow) {
  EXPECT_EQ(parse_ok("ALLOW 10.99.0.7"), Request(AllowRequest{Grant{ip4("10.99.0.7"), {}}}));
  EXPECT_EQ(parse_ok("ALLOW 10.99.0.7 ttl=3600"),
            Request(AllowRequest{Grant{ip4("10.99.0.7"), 3600}}));
  EXPECT_EQ(parse_ok("ALLOW 10.99.0.7 ttl=1"), Request(AllowRequest{Grant{ip4("10.99.0.7"), 1}}));
  EXPECT_EQ(parse_ok("ALLOW 10.99.0.7 ttl=2592000"),
            Request(AllowRequest{Grant{ip4("10.99.0.7"), kMaxTtlSeconds}}));
}

TEST(ParseRequest, Revoke) {
  EXPECT_EQ(parse_ok("REVOKE 10.99.0.7"), Request(RevokeRequest{ip4("10.99.0.7")}));
}

TEST(ParseRequest, Sync) {
  EXPECT_EQ(parse_ok("SYNC"), Request(SyncRequest{}));
  auto r = parse_ok("SYNC 10.99.0.7 10.99.0.8@60");
  const auto& sync = std::get<SyncRequest>(r);
  ASSERT_EQ(sync.grants.size(), 2u);
  EXPECT_EQ(sync.grants[0], (Grant{ip4("10.99.0.7"), {}}));
  EXPECT_EQ(sync.grants[1], (Grant{ip4("10.99.0.8"), 60}));
}

TEST(ParseRequest, SyncOfManyAddressesUpToTheLineLimit) {
  std::string line = "SYNC";
  int n = 0;
  const Cidr block = Cidr::parse("10.99.0.0/16").value();
  for (auto a : block) {
    std::string item = " " + a.to_string() + "@3600";
    if (line.size() + item.size() > kMaxRequestLine) break;
    line += item;
    ++n;
  }
  auto r = parse_request(line);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(std::get<SyncRequest>(*r).grants.size(), static_cast<std::size_t>(n));
  EXPECT_GT(n, 3000);
}

TEST(ParseRequest, ListBindingsStatus) {
  EXPECT_EQ(parse_ok("LIST"), Request(ListRequest{}));
  EXPECT_EQ(parse_ok("BINDINGS"), Request(BindingsRequest{}));
  EXPECT_EQ(parse_ok("STATUS"), Request(StatusRequest{}));
}

TEST(ParseRequest, Bind) {
  EXPECT_EQ(parse_ok("BIND veth101i0 BC:24:11:2A:3B:4C 10.99.0.7"),
            Request(BindRequest{Binding{"veth101i0", mac("bc:24:11:2a:3b:4c"), ip4("10.99.0.7")}}));
  EXPECT_EQ(
      parse_ok("BIND fwpr99999999p31 02:00:00:00:00:01 10.99.0.7"),
      Request(BindRequest{Binding{"fwpr99999999p31", mac("02:00:00:00:00:01"), ip4("10.99.0.7")}}));
}

TEST(ParseRequest, Unbind) {
  EXPECT_EQ(parse_ok("UNBIND veth100i3"), Request(UnbindRequest{"veth100i3"}));
}

// The port proxy's routes: a port 1-65535 and a life of 1-300 s, nothing else.
TEST(ParseRequest, RouteAndUnroute) {
  EXPECT_EQ(parse_ok("ROUTE 10.99.0.7 8000 60"), Request(RouteRequest{ip4("10.99.0.7"), 8000, 60}));
  EXPECT_EQ(parse_ok("ROUTE 10.99.0.7 65535 300"),
            Request(RouteRequest{ip4("10.99.0.7"), 65535, 300}));
  EXPECT_EQ(parse_ok("UNROUTE 10.99.0.7 1"), Request(UnrouteRequest{ip4("10.99.0.7"), 1}));
  expect_rejected("ROUTE 10.99.0.7 0 60", ErrorCode::kInvalidArgument, "invalid port \"0\"");
  expect_rejected("ROUTE 10.99.0.7 65536 60", ErrorCode::kInvalidArgument, "must be 1-65535");
  expect_rejected("ROUTE 10.99.0.7 080 60", ErrorCode::kInvalidArgument, "leading zeros");
  expect_rejected("ROUTE 10.99.0.7 8000 0", ErrorCode::kInvalidArgument, "must be 1-300");
  expect_rejected("ROUTE 10.99.0.7 8000 301", ErrorCode::kInvalidArgument, "must be 1-300");
  expect_rejected("ROUTE 10.99.0.7 8000", ErrorCode::kInvalidArgument,
                  "usage: ROUTE <ipv4> <port> <seconds>");
  expect_rejected("ROUTE 10.99.0 8000 60", ErrorCode::kInvalidArgument, "");
  expect_rejected("UNROUTE 10.99.0.7", ErrorCode::kInvalidArgument, "usage: UNROUTE <ipv4> <port>");
  expect_rejected("UNROUTE 10.99.0.7 80 60", ErrorCode::kInvalidArgument, "usage: UNROUTE");
  expect_rejected("UNROUTE 10.99.0.7 -1", ErrorCode::kInvalidArgument, "invalid port");
}

// ---- framing errors -------------------------------------------------------------------------

TEST(ParseRequest, RejectsEmptyAndSpacing) {
  expect_rejected("", ErrorCode::kInvalidArgument, "empty line");
  expect_rejected(" LIST", ErrorCode::kInvalidArgument, "leading or trailing space");
  expect_rejected("LIST ", ErrorCode::kInvalidArgument, "leading or trailing space");
  expect_rejected("ALLOW  10.99.0.7", ErrorCode::kInvalidArgument, "more than one space");
  expect_rejected(" ", ErrorCode::kInvalidArgument, "space");
}

TEST(ParseRequest, RejectsForbiddenBytes) {
  expect_rejected(std::string("ALLOW 10.99.0.7\0", 16), ErrorCode::kInvalidArgument,
                  "NUL byte at offset 15");
  expect_rejected("ALLOW 10.99.0.7\r", ErrorCode::kInvalidArgument, "carriage return");
  expect_rejected("ALLOW\t10.99.0.7", ErrorCode::kInvalidArgument, "tab");
  expect_rejected("ALLOW 10.99.0.7\n", ErrorCode::kInvalidArgument, "control byte");
  expect_rejected("ALLOW 10.99.0.7 ttl=\xc3\xa9", ErrorCode::kInvalidArgument, "non-ASCII");
  expect_rejected("LIST\x7f", ErrorCode::kInvalidArgument, "control byte");
  expect_rejected("\x1b[2JLIST", ErrorCode::kInvalidArgument, "control byte");
}

TEST(ParseRequest, RejectsOverlongLinesAsTooLarge) {
  std::string line = "SYNC";
  while (line.size() <= kMaxRequestLine) line += " 10.99.0.7";
  expect_rejected(line, ErrorCode::kTooLarge, "longer than 65536");
  std::string exact(kMaxRequestLine, 'A');
  expect_rejected(exact, ErrorCode::kInvalidArgument, "unknown verb");
  expect_rejected(exact + "A", ErrorCode::kTooLarge, "longer than");
}

// ---- verbs and arity ------------------------------------------------------------------------

TEST(ParseRequest, RejectsUnknownVerbs) {
  expect_rejected("FLUSH", ErrorCode::kInvalidArgument, "unknown verb \"FLUSH\"");
  expect_rejected("allow 10.99.0.7", ErrorCode::kInvalidArgument, "unknown verb");
  expect_rejected("Allow 10.99.0.7", ErrorCode::kInvalidArgument, "unknown verb");
  expect_rejected("LISTX", ErrorCode::kInvalidArgument, "unknown verb");
  expect_rejected(std::string(1000, 'X'), ErrorCode::kInvalidArgument, "unknown verb");
}

TEST(ParseRequest, RejectsWrongArity) {
  for (const char* line :
       {"HELLO", "HELLO 1 2", "ALLOW", "ALLOW 10.99.0.7 ttl=5 x", "REVOKE",
        "REVOKE 10.99.0.7 10.99.0.8", "LIST x", "BIND veth101i0 02:00:00:00:00:01", "BIND a b c d",
        "UNBIND", "UNBIND a b", "BINDINGS x", "STATUS all"}) {
    expect_rejected(line, ErrorCode::kInvalidArgument, "usage:");
  }
}

TEST(ParseRequest, RejectsBadVersion) {
  expect_rejected("HELLO 0", ErrorCode::kInvalidArgument, "protocol version");
  expect_rejected("HELLO 01", ErrorCode::kInvalidArgument, "leading zeros");
  expect_rejected("HELLO one", ErrorCode::kInvalidArgument, "protocol version");
  expect_rejected("HELLO -1", ErrorCode::kInvalidArgument, "protocol version");
}

// ---- addresses and ttl ----------------------------------------------------------------------

TEST(ParseRequest, RejectsBadAddresses) {
  for (const char* line : {"ALLOW 10.99.0", "ALLOW 010.99.0.7", "ALLOW 10.99.0.256", "REVOKE ::1",
                           "REVOKE 0x0a.99.0.7", "ALLOW 10.99.0.7/32", "SYNC 10.99.0.7 nope",
                           "BIND veth101i0 02:00:00:00:00:01 10.99.0", "ALLOW host.example"}) {
    expect_rejected(line, ErrorCode::kInvalidArgument, "invalid IPv4 address");
  }
}

TEST(ParseRequest, RejectsBadTtl) {
  expect_rejected("ALLOW 10.99.0.7 ttl=0", ErrorCode::kInvalidArgument, "must be 1-2592000");
  expect_rejected("ALLOW 10.99.0.7 ttl=2592001", ErrorCode::kInvalidArgument, "must be 1-2592000");
  expect_rejected("ALLOW 10.99.0.7 ttl=99999999999999999999999", ErrorCode::kInvalidArgument,
                  "ttl");
  expect_rejected("ALLOW 10.99.0.7 ttl=", ErrorCode::kInvalidArgument, "invalid ttl");
  expect_rejected("ALLOW 10.99.0.7 ttl=-5", ErrorCode::kInvalidArgument, "invalid ttl");
  expect_rejected("ALLOW 10.99.0.7 ttl=+5", ErrorCode::kInvalidArgument, "invalid ttl");
  expect_rejected("ALLOW 10.99.0.7 ttl=05", ErrorCode::kInvalidArgument, "leading zeros");
  expect_rejected("ALLOW 10.99.0.7 ttl=1h", ErrorCode::kInvalidArgument, "invalid ttl");
  expect_rejected("ALLOW 10.99.0.7 ttl=1.5", ErrorCode::kInvalidArgument, "invalid ttl");
  expect_rejected("ALLOW 10.99.0.7 TTL=5", ErrorCode::kInvalidArgument, "expected ttl=");
  expect_rejected("ALLOW 10.99.0.7 timeout=5", ErrorCode::kInvalidArgument, "expected ttl=");
  expect_rejected("ALLOW 10.99.0.7 5", ErrorCode::kInvalidArgument, "expected ttl=");
  expect_rejected("SYNC 10.99.0.7@0", ErrorCode::kInvalidArgument, "ttl");
  expect_rejected("SYNC 10.99.0.7@", ErrorCode::kInvalidArgument, "ttl");
  expect_rejected("SYNC 10.99.0.7@5@5", ErrorCode::kInvalidArgument, "ttl");
}

TEST(ParseRequest, RejectsDuplicateSyncAddresses) {
  expect_rejected("SYNC 10.99.0.7 10.99.0.8 10.99.0.7@5", ErrorCode::kInvalidArgument,
                  "duplicate address 10.99.0.7");
}

// ---- ports and MACs -------------------------------------------------------------------------

TEST(PortName, AcceptsProxmoxForms) {
  for (const char* port :
       {"veth100i0", "veth101i31", "veth999999999i9", "fwpr100p0", "fwpr5000p12"}) {
    EXPECT_TRUE(is_valid_port_name(port)) << port;
  }
}

TEST(PortName, RejectsEverythingElse) {
  for (const char* port : {"",
                           "veth",
                           "vethi0",
                           "veth100",
                           "veth100i",
                           "veth99i0",
                           "veth0100i0",
                           "veth100i32",
                           "veth100i01",
                           "veth100p0",
                           "fwpr100i0",
                           "fwln100i0",
                           "tap100i0",
                           "vmbr1",
                           "eth0",
                           "veth100i0 ",
                           "veth-100i0",
                           "veth100i-1",
                           "veth1000000000i0",
                           "veth999999999i10",
                           "VETH100i0",
                           "veth100I0",
                           "veth100i0x",
                           "fwpr100p0/",
                           "veth100i0\n",
                           "veth1e3i0"}) {
    EXPECT_FALSE(is_valid_port_name(port)) << port;
  }
}

TEST(ParseRequest, RejectsBadBindings) {
  expect_rejected("BIND vmbr1 02:00:00:00:00:01 10.99.0.7", ErrorCode::kInvalidArgument,
                  "invalid port");
  expect_rejected("UNBIND eth0", ErrorCode::kInvalidArgument, "invalid port");
  expect_rejected("BIND veth101i0 02:00:00:00:00 10.99.0.7", ErrorCode::kInvalidArgument,
                  "invalid MAC");
  expect_rejected("BIND veth101i0 00:00:00:00:00:00 10.99.0.7", ErrorCode::kInvalidArgument,
                  "unicast");
  expect_rejected("BIND veth101i0 ff:ff:ff:ff:ff:ff 10.99.0.7", ErrorCode::kInvalidArgument,
                  "unicast");
  expect_rejected("BIND veth101i0 01:00:5e:00:00:01 10.99.0.7", ErrorCode::kInvalidArgument,
                  "unicast");
}

// ---- round trips ----------------------------------------------------------------------------

TEST(FormatRequest, RoundTripsEveryVerb) {
  std::vector<Request> requests = {
      HelloRequest{1},
      AllowRequest{Grant{ip4("10.99.0.7"), {}}},
      AllowRequest{Grant{ip4("10.99.0.7"), 60}},
      RevokeRequest{ip4("10.99.3.4")},
      SyncRequest{},
      SyncRequest{{Grant{ip4("10.99.0.7"), {}}, Grant{ip4("10.99.0.9"), 30}}},
      ListRequest{},
      BindRequest{Binding{"veth120i1", mac("bc:24:11:00:00:01"), ip4("10.99.0.20")}},
      UnbindRequest{"fwpr120p1"},
      BindingsRequest{},
      StatusRequest{},
      RouteRequest{ip4("10.99.0.7"), 8000, 60},
      UnrouteRequest{ip4("10.99.0.7"), 8000},
  };
  for (const auto& request : requests) {
    std::string line = format_request(request);
    auto back = parse_request(line);
    ASSERT_TRUE(back.has_value()) << line << ": " << back.error().message;
    EXPECT_EQ(*back, request) << line;
    EXPECT_EQ(line.substr(0, verb_name(request).size()), verb_name(request));
  }
  EXPECT_EQ(format_request(AllowRequest{Grant{ip4("10.99.0.7"), 60}}), "ALLOW 10.99.0.7 ttl=60");
  EXPECT_EQ(format_request(SyncRequest{{Grant{ip4("10.99.0.7"), 30}}}), "SYNC 10.99.0.7@30");
}

// ---- replies --------------------------------------------------------------------------------

TEST(Reply, ParsesOkAndErr) {
  EXPECT_EQ(parse_reply("OK").value(), (Reply{true, 0, ""}));
  EXPECT_EQ(parse_reply("OK 3").value(), (Reply{true, 0, "3"}));
  EXPECT_EQ(parse_reply("ERR 403 address not allowed").value(),
            (Reply{false, 403, "address not allowed"}));
  EXPECT_EQ(parse_reply("ERR 500").value(), (Reply{false, 500, ""}));
}

TEST(Reply, RejectsMalformed) {
  for (std::string line :
       {std::string(""), std::string("OKAY"), std::string("ok"), std::string("ERR"),
        std::string("ERR x"), std::string("ERR 99 low"), std::string("ERR 600 high"),
        std::string("ERR 0403 x"), std::string("OK \x01"), std::string("WHAT 1"),
        std::string("OK 1\r"), std::string("OK  1")}) {
    EXPECT_FALSE(parse_reply(line).has_value()) << line;
  }
  EXPECT_EQ(parse_reply(std::string(kMaxReplyLine + 1, 'O')).error().code, ErrorCode::kTooLarge);
}

TEST(Reply, FormatsErrorsSafely) {
  EXPECT_EQ(format_error(ReplyCode::kForbidden, "not authorized"), "ERR 403 not authorized");
  EXPECT_EQ(format_error(ReplyCode::kBadRequest, "bad\nthing\0x"), "ERR 400 bad?thing");
  EXPECT_EQ(format_error(ReplyCode::kBadRequest, "  a   b  "), "ERR 400 a b");
  EXPECT_EQ(format_error(ReplyCode::kInternal, ""), "ERR 500");
  std::string huge(100000, 'x');
  EXPECT_LT(format_error(ReplyCode::kTooLarge, huge).size(), 600u);
  EXPECT_TRUE(parse_reply(format_error(ReplyCode::kBadRequest, "\r\n\t\x80 weird")).has_value());
}

TEST(Reply, MapsCodesBothWays) {
  EXPECT_EQ(reply_code_for(Error{ErrorCode::kInvalidArgument, ""}), ReplyCode::kBadRequest);
  EXPECT_EQ(reply_code_for(Error{ErrorCode::kPermissionDenied, ""}), ReplyCode::kForbidden);
  EXPECT_EQ(reply_code_for(Error{ErrorCode::kTooLarge, ""}), ReplyCode::kTooLarge);
  EXPECT_EQ(reply_code_for(Error{ErrorCode::kConflict, ""}), ReplyCode::kConflict);
  EXPECT_EQ(reply_code_for(Error{ErrorCode::kIo, ""}), ReplyCode::kInternal);
  EXPECT_EQ(error_from_reply(Reply{false, 403, "address not allowed"}).code,
            ErrorCode::kPermissionDenied);
  EXPECT_EQ(error_from_reply(Reply{false, 409, "ruleset missing"}).code, ErrorCode::kConflict);
  EXPECT_EQ(error_from_reply(Reply{false, 413, "x"}).code, ErrorCode::kTooLarge);
  EXPECT_EQ(error_from_reply(Reply{false, 400, "x"}).code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(error_from_reply(Reply{false, 500, "boom"}).message, "agent: 500 boom");
}

TEST(Payload, Hello) {
  std::string payload = format_hello_payload("0.1.0");
  EXPECT_EQ(payload, "pve-sandbox-agent 0.1.0 proto=1");
  EXPECT_EQ(parse_hello_payload(payload).value(), (HelloInfo{"0.1.0", 1}));
  EXPECT_FALSE(parse_hello_payload("other-agent 0.1.0 proto=1").has_value());
  EXPECT_FALSE(parse_hello_payload("pve-sandbox-agent 0.1.0").has_value());
  EXPECT_FALSE(parse_hello_payload("pve-sandbox-agent 0.1.0 proto=x").has_value());
}

TEST(Payload, Count) {
  EXPECT_EQ(parse_count_payload("0").value(), 0u);
  EXPECT_EQ(parse_count_payload("10000").value(), 10000u);
  EXPECT_FALSE(parse_count_payload("").has_value());
  EXPECT_FALSE(parse_count_payload("1 2").has_value());
  EXPECT_FALSE(parse_count_payload("-1").has_value());
}

TEST(Payload, List) {
  std::vector<Grant> grants = {
      {ip4("10.99.0.7"), {}}, {ip4("10.99.0.8"), 0}, {ip4("10.99.0.9"), 59}};
  std::string payload = format_list_payload(grants);
  EXPECT_EQ(payload, "3 10.99.0.7 10.99.0.8@0 10.99.0.9@59");
  EXPECT_EQ(parse_list_payload(payload).value(), grants);
  EXPECT_EQ(parse_list_payload("0").value(), std::vector<Grant>{});
  EXPECT_FALSE(parse_list_payload("").has_value());
  EXPECT_FALSE(parse_list_payload("2 10.99.0.7").has_value());
  EXPECT_FALSE(parse_list_payload("1 10.99.0.7 10.99.0.8").has_value());
  EXPECT_FALSE(parse_list_payload("1 10.99.0.300").has_value());
}

TEST(Payload, Bindings) {
  std::vector<Binding> bindings = {{"veth101i0", mac("bc:24:11:2a:3b:4c"), ip4("10.99.0.7")},
                                   {"fwpr102p1", mac("02:00:00:00:00:02"), ip4("10.99.0.8")}};
  std::string payload = format_bindings_payload(bindings);
  EXPECT_EQ(payload,
            "2 veth101i0=bc:24:11:2a:3b:4c/10.99.0.7 fwpr102p1=02:00:00:00:00:02/10.99.0.8");
  EXPECT_EQ(parse_bindings_payload(payload).value(), bindings);
  EXPECT_FALSE(parse_bindings_payload("1 veth101i0/10.99.0.7=bc:24:11:2a:3b:4c").has_value());
  EXPECT_FALSE(parse_bindings_payload("1 eth0=bc:24:11:2a:3b:4c/10.99.0.7").has_value());
  EXPECT_FALSE(parse_bindings_payload("1 veth101i0=bc:24:11:2a:3b/10.99.0.7").has_value());
}

TEST(Payload, Status) {
  StatusFields fields = {{"table", "present"}, {"set", "present"}, {"elements", "3"}};
  std::string payload = format_status_payload(fields);
  EXPECT_EQ(payload, "table=present set=present elements=3");
  auto parsed = parse_status_payload(payload);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, fields);
  EXPECT_EQ(find_field(*parsed, "elements"), "3");
  EXPECT_EQ(find_field(*parsed, "missing"), std::nullopt);
  EXPECT_TRUE(parse_status_payload("").value().empty());
  EXPECT_TRUE(parse_status_payload("last_reapply=").has_value());
  EXPECT_FALSE(parse_status_payload("table").has_value());
  EXPECT_FALSE(parse_status_payload("=x").has_value());
  EXPECT_FALSE(parse_status_payload("Table=x").has_value());
  EXPECT_FALSE(parse_status_payload("a=1 a=2").has_value());
}

}  // namespace
}  // namespace pvs::proto
