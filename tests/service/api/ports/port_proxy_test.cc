// The port proxy's pure parts (controller/service/api/ports/port_proxy.h): the route's port
// and target, the request head for the service, its response head and chunked body; and the
// listing of what listens (listening.h).
#include "api/ports/port_proxy.h"
#include "api/ports/listening.h"

#include <gtest/gtest.h>

namespace pvs::service::ports {
namespace {

TEST(PortProxy, PortNumbers) {
  EXPECT_EQ(*parse_port("1"), 1);
  EXPECT_EQ(*parse_port("8080"), 8080);
  EXPECT_EQ(*parse_port("65535"), 65535);
  for (const char* bad : {"", "0", "65536", "99999", "123456", "080", "-1", "+80", "8o", " 80",
                          "80 ", "0x50", "1e3", "８０"}) {
    auto r = parse_port(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().status, 400) << bad;
    EXPECT_NE(r.error().message.find("port"), std::string::npos) << bad;
  }
}

TEST(PortProxy, TargetIsTheRestOfTheRawPath) {
  const std::string p = "/v1/sandboxes/sb-0123456789ab/ports/8080";
  auto t = [&](const std::string& raw) { return upstream_target(raw, "sb-0123456789ab", "8080"); };
  EXPECT_EQ(*t(p), "/");
  EXPECT_EQ(*t(p + "/"), "/");
  EXPECT_EQ(*t(p + "?a=1"), "/?a=1");
  EXPECT_EQ(*t(p + "/index.html"), "/index.html");
  EXPECT_EQ(*t(p + "/a/b/?x=%20y&z=/"), "/a/b/?x=%20y&z=/");
  EXPECT_EQ(*t(p + "/a%2Fb//c"), "/a%2Fb//c");    // kept as the client wrote it
  EXPECT_EQ(*t(p + "/../../etc"), "/../../etc");  // the service's to judge, in the sandbox
}

TEST(PortProxy, BadTargetsAreClear400s) {
  auto t = [](const std::string& raw) { return upstream_target(raw, "sb-0123456789ab", "8080"); };
  const std::string p = "/v1/sandboxes/sb-0123456789ab/ports/8080";
  struct Case {
    std::string raw;
    std::string says;
  } cases[] = {
      {"http://h" + p + "/x", "origin form"},
      {"", "origin form"},
      {p + "/a b", "percent-encoded"},
      {p + "/a\tb", "percent-encoded"},
      {p + "/\x7f", "percent-encoded"},
      {p + "/\xc3\xa9", "percent-encoded"},
      {p + "/x#frag", "percent-encoded"},
      {p + "/" + std::string(9000, 'a'), "longer than"},
      {"/v1/sandboxes/sb-0123456789ab/ports/80%380/x", "without percent-encoding"},
      {"/v1/sandboxes/sb-0123456789ab/%70orts/8080/x", "without percent-encoding"},
      {p + "0/x", "without percent-encoding"},
  };
  for (const auto& c : cases) {
    auto r = t(c.raw);
    ASSERT_FALSE(r) << c.raw;
    EXPECT_EQ(r.error().status, 400) << c.raw;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
  }
}

TEST(PortProxy, Methods) {
  for (const char* m : {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
    EXPECT_TRUE(is_proxied_method(m)) << m;
  for (const char* m : {"CONNECT", "TRACE", "get", "", "PROPFIND"})
    EXPECT_FALSE(is_proxied_method(m)) << m;
}

TEST(PortProxy, RequestHeadDropsTheTokenAndHopByHopHeaders) {
  UpstreamRequest r;
  r.method = "POST";
  r.target = "/api?x=1";
  r.port = 3000;
  r.headers = {{"Host", "pvs.example.org:8787"},
               {"Authorization", "Bearer secret-token"},
               {"Connection", "keep-alive, X-Private"},
               {"X-Private", "hop"},
               {"Keep-Alive", "timeout=5"},
               {"Transfer-Encoding", "chunked"},
               {"Content-Length", "999"},
               {"Expect", "100-continue"},
               {"Upgrade", "websocket"},
               {"TE", "trailers"},
               {"X-Forwarded-Host", "spoofed"},
               {"Content-Type", "application/json"},
               {"Cookie", "a=b"},
               {"Accept", "*/*"}};
  r.body = {BodyFraming::Kind::kLength, 12};
  r.forwarded_host = "pvs.example.org:8787";
  r.forwarded_prefix = "/v1/sandboxes/sb-0123456789ab/ports/3000";
  std::string head = request_head(r);
  EXPECT_EQ(head,
            "POST /api?x=1 HTTP/1.1\r\n"
            "Content-Type: application/json\r\n"
            "Cookie: a=b\r\n"
            "Accept: */*\r\n"
            "Host: localhost:3000\r\n"
            "Content-Length: 12\r\n"
            "X-Forwarded-Host: pvs.example.org:8787\r\n"
            "X-Forwarded-Prefix: /v1/sandboxes/sb-0123456789ab/ports/3000\r\n"
            "Connection: close\r\n\r\n");
  EXPECT_EQ(head.find("secret-token"), std::string::npos);
  r.body = {BodyFraming::Kind::kChunked, 0};
  EXPECT_NE(request_head(r).find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  r.body = {};
  EXPECT_EQ(request_head(r).find("Content-Length"), std::string::npos);
}

TEST(PortProxy, UpgradesAreAskedByConnectionAndUpgradeTogether) {
  EXPECT_EQ(requested_upgrade({{"Connection", "keep-alive, Upgrade"}, {"Upgrade", " websocket "}}),
            "websocket");
  EXPECT_EQ(requested_upgrade({{"Upgrade", "websocket"}}), "");  // Connection does not name it
  EXPECT_EQ(requested_upgrade({{"Connection", "upgrade"}}), "");
  EXPECT_EQ(requested_upgrade({{"connection", "close"}, {"upgrade", "h2c"}}), "");
}

TEST(PortProxy, AnUpgradeGoesOnWithItsHeadersAndNoCredential) {
  UpstreamRequest r;
  r.method = "GET";
  r.target = "/ws";
  r.port = 8080;
  r.headers = {{"Connection", "Upgrade"},
               {"Upgrade", "websocket"},
               {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
               {"Sec-WebSocket-Version", "13"},
               {"Sec-WebSocket-Protocol", "bearer.secret-token, chat"},
               {"e2b-traffic-access-token", "secret-traffic"},
               {"Cookie", "pvs_preview=secret-preview; theme=dark"}};
  r.upgrade = requested_upgrade(r.headers);
  r.host = expand_host_mask("app.internal:${PORT}", 8080);
  std::string head = request_head(r);
  EXPECT_EQ(head,
            "GET /ws HTTP/1.1\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Protocol: chat\r\n"
            "Cookie: theme=dark\r\n"
            "Host: app.internal:8080\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
  // Only the controller's credentials: nothing else of the line goes.
  r.headers = {{"Sec-WebSocket-Protocol", "bearer.x"}, {"Cookie", "pvs_preview=p"}};
  head = request_head(r);
  EXPECT_EQ(head.find("Sec-WebSocket-Protocol"), std::string::npos) << head;
  EXPECT_EQ(head.find("Cookie"), std::string::npos) << head;
}

TEST(PortProxy, HostMasks) {
  for (const char* good : {"localhost:${PORT}", "${PORT}-app.example.org", "app_1.internal",
                           "10.0.0.1:80", "[::1]:${PORT}", "example.org"})
    EXPECT_TRUE(check_host_mask(good)) << good;
  for (const char* bad : {"", "exa mple.org", "a/b", "host:", "host:port", "[::1", "[zz]",
                          "host:123456", "h\r\nX: y", "${PORT}:${HOST}"})
    EXPECT_FALSE(check_host_mask(bad)) << bad;
  EXPECT_FALSE(check_host_mask(std::string(256, 'a')));
  EXPECT_EQ(expand_host_mask("${PORT}-x.test:${PORT}", 3000), "3000-x.test:3000");
  EXPECT_EQ(expand_host_mask("plain.test", 3000), "plain.test");
}

TEST(PortProxy, ASwitchKeepsTheServicesUpgrade) {
  auto head = parse_response_head(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
      "GET");
  ASSERT_TRUE(head) << head.error().message;
  EXPECT_EQ(head->status, 101);
  EXPECT_EQ(head->upgrade, "websocket");
  EXPECT_EQ(head->framing, ResponseHead::Framing::kNone);
  ASSERT_EQ(head->headers.size(), 1u);
  EXPECT_EQ(head->headers[0].first, "Sec-WebSocket-Accept");
}

TEST(PortProxy, ResponseHeads) {
  auto r = parse_response_head(
      "HTTP/1.1 201 Created Here\r\nContent-Type: text/html\r\nContent-Length: 5\r\n"
      "Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n"
      "Keep-Alive: timeout=5\r\nX-Empty:\r\n\r\n",
      "GET");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->reason, "Created Here");
  EXPECT_EQ(r->framing, ResponseHead::Framing::kLength);
  EXPECT_EQ(r->length, 5u);
  EXPECT_EQ(r->content_type, "text/html");
  std::vector<Header> want = {
      {"Content-Type", "text/html"}, {"Set-Cookie", "a=1"}, {"Set-Cookie", "b=2"}, {"X-Empty", ""}};
  EXPECT_EQ(r->headers, want);

  r = parse_response_head("HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", "GET");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->framing, ResponseHead::Framing::kChunked);
  r = parse_response_head("HTTP/1.0 200\r\nServer: x\r\n\r\n", "GET");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->framing, ResponseHead::Framing::kUntilClose);
  EXPECT_EQ(r->reason, "");
  r = parse_response_head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", "HEAD");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->framing, ResponseHead::Framing::kNone);
  EXPECT_EQ(r->length, 5u);
  for (int status : {204, 304, 100}) {
    r = parse_response_head("HTTP/1.1 " + std::to_string(status) + " X\r\n\r\n", "GET");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->framing, ResponseHead::Framing::kNone) << status;
  }
}

TEST(PortProxy, MalformedResponseHeadsAreRefused) {
  for (std::string head : {
           std::string("HTTP/2 200 OK\r\n\r\n"),
           std::string("HTTP/1.1 20 OK\r\n\r\n"),
           std::string("HTTP/1.1 2000 OK\r\n\r\n"),
           std::string("HTTP/1.1 099 Low\r\n\r\n"),
           std::string("ICY 200 OK\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nX: a\nY: b\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nX") + '\0' + ": a\r\n\r\n",
           std::string("HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\n: a\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nno colon\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\n"),
           std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
           std::string(
               "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"),
           std::string("HTTP/1.1 200 O\x01K\r\n\r\n"),
       }) {
    auto r = parse_response_head(head, "GET");
    EXPECT_FALSE(r) << head;
    if (!r) {
      EXPECT_NE(r.error().message.find("malformed response"), std::string::npos);
    }
  }
  EXPECT_FALSE(head_end("HTTP/1.1 200 OK\r\nX: y\r\n"));
  EXPECT_EQ(head_end("HTTP/1.1 200 OK\r\n\r\nbody"), 19u);
}

TEST(PortProxy, ChunkedBodiesDecodeByteByByteAndWhole) {
  const std::string body =
      "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: t\r\n\r\nNEXT";
  std::string whole;
  ChunkedDecoder a;
  auto n = a.feed(body, &whole);
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_TRUE(a.done());
  EXPECT_EQ(*n, body.size() - 4);  // stops before what follows the body
  EXPECT_EQ(whole, "helloabcdefghijklmnopqrstuvwxyz");
  std::string bytewise;
  ChunkedDecoder b;
  for (std::size_t i = 0; i < body.size() - 4; ++i) {
    auto one = b.feed(body.substr(i, 1), &bytewise);
    ASSERT_TRUE(one) << i;
    EXPECT_EQ(*one, 1u);
  }
  EXPECT_TRUE(b.done());
  EXPECT_EQ(bytewise, whole);
}

TEST(PortProxy, MalformedChunkedBodiesAreRefused) {
  for (const char* bad : {"\r\n", "x\r\n", "5\r\nhelloXX", "5\nhello\r\n", "5\r\nhello\r\n0\r\nX\n",
                          ";a\r\n", "fffffffffffffffff\r\n"}) {
    std::string out;
    ChunkedDecoder d;
    auto r = d.feed(bad, &out);
    EXPECT_FALSE(r) << bad;
  }
  std::string out;
  ChunkedDecoder d;
  ASSERT_TRUE(d.feed("5\r\nhel", &out));
  EXPECT_FALSE(d.done());  // cut short: the caller sees the service's EOF before done()
}

// /proc/net/tcp and /proc/net/tcp6 as a kernel prints them (little-endian words).
TEST(PortListing, ParsesTheKernelsListsOfListeningSockets) {
  constexpr std::string_view kTcp4 =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
      "timeout inode\n"
      "   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 1 1\n"
      "   1: 0263630A:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0  0 2 1\n"
      "   2: 0263630A:0016 0163630A:D2F0 01 00000000:00000000 02:000A7B8F 00000000     0  0 3 4\n"
      "   3: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000  0 4 1\n"
      "   4: 00000000:0000 00000000:0000 0A\n"  // port 0: skipped
      "   5: 0100007F:1F4 00000000:0000 0A\n";  // not four hex digits: skipped
  constexpr std::string_view kTcp6 =
      "  sl  local_address                         remote_address                        st\n"
      "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A\n"
      "   1: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A\n"
      "   2: 0000000000000000FFFF00000100007F:0050 00000000000000000000000000000000:0000 0A\n";
  auto ports = parse_listening(kTcp4, kTcp6);
  ASSERT_EQ(ports.size(), 4u);
  EXPECT_EQ(ports[0].port, 22);
  EXPECT_EQ(ports[0].addresses, std::vector<std::string>{"10.99.99.2"});
  EXPECT_EQ(ports[1].port, 80);
  EXPECT_EQ(ports[1].addresses, (std::vector<std::string>{"::1", "::ffff:127.0.0.1"}));
  EXPECT_EQ(ports[2].port, 8000);
  EXPECT_EQ(ports[2].addresses, (std::vector<std::string>{"0.0.0.0", "127.0.0.1"}));
  EXPECT_EQ(ports[3].port, 8080);
  EXPECT_EQ(ports[3].addresses, std::vector<std::string>{"::"});
  EXPECT_TRUE(parse_listening("", "").empty());
  EXPECT_TRUE(parse_listening("garbage\n\n   0: zz:yy 0 0A\n", "").empty());
  EXPECT_EQ(listening_json("sb-0123456789ab", {{8000, {"127.0.0.1"}}}),
            R"({"ports":[{"port":8000,"addresses":["127.0.0.1"],)"
            R"("url":"/v1/sandboxes/sb-0123456789ab/ports/8000/"}]})");
}

}  // namespace
}  // namespace pvs::service::ports
