// The port proxy end to end (ports_fixture.h): requests go through
// /v1/sandboxes/{id}/ports/{port}/... and the sandbox's SSH session to a real HTTP server in a
// netns sandbox.
#include <gtest/gtest.h>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/StreamCopier.h>

#include <fstream>
#include <sstream>

#include <chrono>
#include <random>
#include <thread>

#include "api/ports/port_proxy.h"
#include "http/seal.h"
#include "service/api/ports/ports_fixture.h"
#include "support/sshd_fixture.h"

namespace pvs::service {
namespace {

TEST_F(PortsApiTest, ServesAFileFromTheSandboxWithItsHeadersAndAnAuditRecord) {
  auto r = call("GET", url("/index.txt"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "hello from the sandbox");
  EXPECT_EQ(r.headers["Content-Type"], "text/plain");
  EXPECT_EQ(r.headers["Content-Length"], "22");
  EXPECT_EQ(r.headers["Content-Security-Policy"], std::string(ports::kSandboxCsp));
  EXPECT_FALSE(r.headers["X-Request-Id"].empty());
  auto a = last_audit();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->getValue<std::string>("action"), "sandbox.port");
  EXPECT_EQ(a->getValue<std::string>("sandbox"), sb_);
  EXPECT_EQ(a->getValue<std::string>("token"), "alice");
  EXPECT_EQ(a->getValue<int>("status"), 200);
  auto p = a->getObject("params");
  EXPECT_EQ(p->getValue<int>("port"), kPort);
  EXPECT_EQ(p->getValue<std::string>("method"), "GET");
  EXPECT_EQ(p->getValue<std::string>("path"), "/index.txt");
  EXPECT_EQ(p->getValue<int>("bytes_in"), 0);
  EXPECT_EQ(p->getValue<int>("bytes_out"), 22);

  // The service's own answers pass through: a 404, a directory listing, HEAD.
  EXPECT_EQ(call("GET", url("/nope.txt")).status, 404);
  auto listing = call("GET", url("/"));
  EXPECT_EQ(listing.status, 200);
  EXPECT_NE(listing.body.find("index.txt"), std::string::npos) << listing.body;
  EXPECT_EQ(call("GET", url("")).status, 200);  // no path at all is "/"
  auto head = call("HEAD", url("/index.txt"));
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers["Content-Length"], "22");
  EXPECT_EQ(head.body, "");
}

// GET .../ports: the server started in SetUp listens on 127.0.0.1:8000 in the sandbox (and
// its own sshd on its address's port 22), each with its preview path.
TEST_F(PortsApiTest, ListsWhatListensInTheSandbox) {
  auto r = call("GET", "/v1/sandboxes/" + sb_ + "/ports");
  ASSERT_EQ(r.status, 200) << r.body;
  auto ports = json(r.body)->getArray("ports");
  ASSERT_TRUE(ports);
  bool found = false;
  for (std::size_t i = 0; i < ports->size(); ++i) {
    auto p = ports->getObject(static_cast<unsigned>(i));
    if (p->getValue<int>("port") != kPort) continue;
    found = true;
    EXPECT_EQ(p->getArray("addresses")->getElement<std::string>(0), "127.0.0.1");
    EXPECT_EQ(p->getValue<std::string>("url"), url("/"));
  }
  EXPECT_TRUE(found) << r.body;
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + sb_ + "/ports", "", "tok-bob").status, 404);
}

TEST_F(PortsApiTest, StreamsALargeFileWhole) {
  std::string digest = in_sandbox(sb_, "sha256sum " + dir_ + "/www/big.bin | cut -d' ' -f1");
  auto r = call("GET", url("/big.bin"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), 3000000u);
  EXPECT_EQ(sha256_hex(r.body), digest);
  EXPECT_EQ(last_audit()->getObject("params")->getValue<int>("bytes_out"), 3000000);
}

TEST_F(PortsApiTest, RequestReachesTheServiceAsSentLessTheToken) {
  auto r = call("GET", url("/echo/a%20b/?x=1&y=%2F"), "", "tok-alice",
                {{"X-Custom", "yes"}, {"Cookie", "c=3"}});
  ASSERT_EQ(r.status, 200) << r.body;
  auto seen = json(r.body);
  EXPECT_EQ(seen->getValue<std::string>("path"), "/echo/a%20b/?x=1&y=%2F");
  auto h = seen->getObject("headers");
  EXPECT_FALSE(h->has("authorization")) << r.body;
  EXPECT_EQ(h->getValue<std::string>("x-custom"), "yes");
  EXPECT_EQ(h->getValue<std::string>("cookie"), "c=3");
  EXPECT_EQ(h->getValue<std::string>("host"), "localhost:" + std::to_string(kPort));
  EXPECT_EQ(h->getValue<std::string>("x-forwarded-prefix"), url(""));
  EXPECT_EQ(h->getValue<std::string>("x-forwarded-host"), "127.0.0.1:" + std::to_string(port_));
  EXPECT_EQ(h->getValue<std::string>("connection"), "close");
}

TEST_F(PortsApiTest, BodiesGoBothWaysInEveryFraming) {
  std::string body(2 << 20, '\0');
  std::mt19937 rng(48);
  for (auto& c : body) c = static_cast<char>(rng());
  auto posted = call("POST", url("/upload?n=1"), body, "tok-alice",
                     {{"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(posted.status, 201) << posted.body;
  EXPECT_EQ(json(posted.body)->getValue<int>("length"), 2 << 20);
  EXPECT_EQ(json(posted.body)->getValue<std::string>("sha256"), sha256_hex(body));
  EXPECT_EQ(json(posted.body)->getValue<std::string>("path"), "/upload?n=1");
  EXPECT_EQ(last_audit()->getObject("params")->getValue<int>("bytes_in"), 2 << 20);
  EXPECT_EQ(last_audit()->getObject("params")->getValue<std::string>("path"), "/upload");

  // A chunked request body is re-chunked to the service.
  Poco::Net::HTTPClientSession s("127.0.0.1", port_);
  Poco::Net::HTTPRequest req("PUT", url("/chunked-upload"), Poco::Net::HTTPMessage::HTTP_1_1);
  req.set("Authorization", "Bearer tok-alice");
  req.setChunkedTransferEncoding(true);
  std::ostream& out = s.sendRequest(req);
  out << body.substr(0, 100000) << std::flush << body.substr(100000, 5);
  Poco::Net::HTTPResponse resp;
  std::string text;
  Poco::StreamCopier::copyToString(s.receiveResponse(resp), text);
  ASSERT_EQ(resp.getStatus(), 201) << text;
  EXPECT_EQ(json(text)->getValue<int>("length"), 100005);
  EXPECT_EQ(json(text)->getValue<std::string>("te"), "chunked");
  EXPECT_EQ(json(text)->getValue<std::string>("sha256"), sha256_hex(body.substr(0, 100005)));

  // A chunked reply is decoded and sent on chunked; one ended by closing, chunked too.
  auto chunked = call("GET", url("/chunked"));
  EXPECT_EQ(chunked.status, 200);
  EXPECT_EQ(chunked.body, "one two three");
  EXPECT_EQ(chunked.headers["Transfer-Encoding"], "chunked");
  auto until_close = call("GET", url("/until-close"));
  EXPECT_EQ(until_close.status, 200);
  EXPECT_EQ(until_close.body, "read until the end");
}

// A reply the service cuts short is not handed on as whole: the client's connection is reset
// before it has the promised 100 bytes, and the audit record says so.
TEST_F(PortsApiTest, AReplyCutShortResetsTheClient) {
  std::string got;
  bool failed = false;
  try {
    auto r = call("GET", url("/cut"));
    got = r.body;
  } catch (const Poco::Exception&) {
    failed = true;
  }
  EXPECT_TRUE(failed || got.size() < 100) << got.size();
  auto a = last_audit();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->getValue<std::string>("result"), "error");
  EXPECT_NE(a->getObject("error")->getValue<std::string>("message").find("broke off"),
            std::string::npos);
  // The controller and the sandbox go on.
  EXPECT_EQ(call("GET", url("/index.txt")).body, "hello from the sandbox");
}

// A client that hangs up while the service is silent ends the proxied request: the service
// sees its connection end too (within the proxy's 1 s look at the client), not at the idle
// timeout (60 s). E2B's code interpreter interrupts a cell that way.
TEST_F(PortsApiTest, AClientThatHangsUpEndsTheServicesConnection) {
  auto has = [&](const std::string& file) {
    for (int i = 0; i < 200; ++i) {
      if (in_sandbox(sb_, "test -f " + dir_ + "/" + file + " && echo yes") == "yes") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  {
    Poco::Net::StreamSocket s(Poco::Net::SocketAddress("127.0.0.1", port_));
    std::string req = "GET " + url("/silent") +
                      " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-alice\r\n\r\n";
    s.sendBytes(req.data(), static_cast<int>(req.size()));
    ASSERT_TRUE(has("asked"));  // the service has the request and waits
    s.close();
  }
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(has("hung-up"));
  std::printf("[ figure ] the service saw the client's hang-up after %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  // The controller's record of it (written once its handler ended).
  auto a = last_audit();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->getObject("params")->getValue<std::string>("path"), "/silent");
  EXPECT_NE(a->getObject("error")->getValue<std::string>("message").find("the client went away"),
            std::string::npos);
  EXPECT_EQ(call("GET", url("/index.txt")).body, "hello from the sandbox");
}

TEST_F(PortsApiTest, ClearErrors) {
  auto nothing = call("GET", url("/", 8001));
  EXPECT_EQ(nothing.status, 502) << nothing.body;
  EXPECT_EQ(error_code(nothing), "bad_gateway");
  EXPECT_NE(nothing.body.find("nothing listens on port 8001 in " + sb_), std::string::npos)
      << nothing.body;
  for (const char* port : {"0", "65536", "http", "080", "-1"}) {
    auto r = call("GET", "/v1/sandboxes/" + sb_ + "/ports/" + port + "/");
    EXPECT_EQ(r.status, 400) << port;
    EXPECT_NE(r.body.find("port"), std::string::npos) << r.body;
  }
  auto bad_id = call("GET", "/v1/sandboxes/sb-xyz/ports/8000/");
  EXPECT_EQ(bad_id.status, 400) << bad_id.body;
  EXPECT_EQ(call("GET", "/v1/sandboxes/sb-0123456789ab/ports/8000/").status, 404);
  auto encoded = call("GET", "/v1/sandboxes/" + sb_ + "/ports/80%300/index.txt");
  EXPECT_EQ(encoded.status, 400) << encoded.body;
  EXPECT_NE(encoded.body.find("percent-encoding"), std::string::npos) << encoded.body;
  // Another token's sandbox does not exist for bob; no token is a 401; TRACE is not proxied.
  EXPECT_EQ(call("GET", url("/index.txt"), "", "tok-bob").status, 404);
  EXPECT_EQ(call("GET", url("/index.txt"), "", "").status, 401);
  EXPECT_EQ(call("TRACE", url("/index.txt")).status, 405);
  EXPECT_EQ(call("GET", url("/index.txt"), "", "tok-root").status, 200);  // an admin may
}

}  // namespace
}  // namespace pvs::service

namespace pvs::service {
namespace {

// A WebSocket through the proxy, with a client nobody here wrote (python3-websockets) and the
// token as a browser sends it: both ways whole, the service sees neither the token nor the
// controller's host, and one audit record counts the bytes.
TEST_F(PortsApiTest, AWebSocketGoesThroughBothWays) {
  start_ws_server();
  std::string out;
  ASSERT_EQ(ws_client("/ws?room=1", &out), 0) << out;
  auto r = json(out);
  EXPECT_EQ(r->getValue<std::string>("subprotocol"), "echo");
  auto seen = r->getObject("seen");
  EXPECT_EQ(seen->getValue<std::string>("path"), "/ws?room=1");
  auto h = seen->getObject("headers");
  EXPECT_EQ(h->getValue<std::string>("sec-websocket-protocol"), "echo") << out;
  EXPECT_FALSE(h->has("authorization")) << out;
  EXPECT_EQ(h->getValue<std::string>("host"), "localhost:" + std::to_string(kWsPort));
  EXPECT_EQ(out.find("tok-alice"), std::string::npos) << out;
  auto audit = last_audit();
  ASSERT_TRUE(audit);
  EXPECT_EQ(audit->getValue<int>("status"), 101);
  auto params = audit->getObject("params");
  EXPECT_EQ(params->getValue<int>("port"), kWsPort);
  EXPECT_GT(params->getValue<std::uint64_t>("bytes_in"), 1u << 20);
  EXPECT_GT(params->getValue<std::uint64_t>("bytes_out"), 1u << 20);
  EXPECT_EQ(metrics_->value("pvs_port_requests_total", {{"kind", "upgrade"}}), 1);
}

// Upgraded connections count against ports.max_upgrades_per_token (2 here): the third is a 429
// before anything is switched, and a place comes back when a connection ends.
TEST_F(PortsApiTest, UpgradesAreCappedPerToken) {
  start_ws_server();
  Poco::Net::HTTPResponse r1, r2, r3;
  auto a = open_ws(r1);
  auto b = open_ws(r2);
  EXPECT_THROW(open_ws(r3), Poco::Net::WebSocketException);
  EXPECT_EQ(r3.getStatus(), 429);
  std::vector<char> buffer(64 << 10);
  char* buf = buffer.data();
  const int size = static_cast<int>(buffer.size());
  int flags = 0;
  ASSERT_GT(a->receiveFrame(buf, size, flags), 0);  // what the service received
  a->shutdown();
  while (a->receiveFrame(buf, size, flags) > 0 &&
         (flags & Poco::Net::WebSocket::FRAME_OP_BITMASK) != Poco::Net::WebSocket::FRAME_OP_CLOSE) {
  }
  a.reset();
  // The place is free once the proxy's thread for `a` ended: soon, not at once.
  std::unique_ptr<Poco::Net::WebSocket> c;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (!c && std::chrono::steady_clock::now() < deadline) {
    Poco::Net::HTTPResponse r;
    try {
      c = open_ws(r);
    } catch (const Poco::Net::WebSocketException&) {
      ASSERT_EQ(r.getStatus(), 429);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ASSERT_TRUE(c);
  std::string hi = "still echoing";
  c->receiveFrame(buf, size, flags);
  c->sendFrame(hi.data(), static_cast<int>(hi.size()));
  int n = c->receiveFrame(buf, size, flags);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), hi);
}

// An upgrade the service does not take is its ordinary reply (http.server ignores Upgrade);
// an upgrade is a GET without a body. (Raw requests: an HTTP client library sets Connection.)
TEST_F(PortsApiTest, AnUpgradeTheServiceIgnoresIsItsReply) {
  auto raw = [&](const std::string& method, const std::string& body) {
    Poco::Net::StreamSocket s(Poco::Net::SocketAddress("127.0.0.1", port_));
    s.setReceiveTimeout(Poco::Timespan(20, 0));
    std::string req = method + " " + url("/index.txt") + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                      "Authorization: Bearer tok-alice\r\nConnection: Upgrade\r\n" +
                      "Upgrade: websocket\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n" + body;
    s.sendBytes(req.data(), static_cast<int>(req.size()));
    std::string reply;
    char buf[4096];
    int n;
    while (reply.find("hello from the sandbox") == std::string::npos &&
           reply.find("without a body") == std::string::npos &&
           (n = s.receiveBytes(buf, sizeof buf)) > 0)
      reply.append(buf, static_cast<std::size_t>(n));
    return reply;
  };
  std::string got = raw("GET", "");
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find("hello from the sandbox"), std::string::npos) << got;
  got = raw("POST", "{}");
  EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << got;
  EXPECT_NE(got.find("a GET without a body"), std::string::npos) << got;
}

// A preview link serves the port without the bearer token, in an opaque origin, for the token
// that made it; a link that is not the controller's, or has expired, serves nothing.
TEST_F(PortsApiTest, APreviewLinkServesThePortWithoutTheToken) {
  auto made = call("POST", "/v1/sandboxes/" + sb_ + "/previews",
                   R"({"port":8000,"expires_in_seconds":600})");
  ASSERT_EQ(made.status, 201) << made.body;
  auto link = json(made.body);
  const std::string path = link->getValue<std::string>("path");
  ASSERT_EQ(path.rfind("/v1/previews/pv1.", 0), 0u) << path;
  EXPECT_EQ(link->getValue<std::string>("url"), "http://127.0.0.1:" + std::to_string(port_) + path);
  auto r = call("GET", path + "index.txt", "", "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "hello from the sandbox");
  EXPECT_EQ(r.headers["Content-Security-Policy"], std::string(ports::kSandboxCsp));
  auto audit = last_audit();
  ASSERT_TRUE(audit);
  EXPECT_EQ(audit->getValue<std::string>("token"), "alice");
  EXPECT_EQ(audit->getValue<std::string>("sandbox"), sb_);
  // What the service sees as the prefix is the link's.
  auto echo = call("GET", path + "echo", "", "");
  ASSERT_EQ(echo.status, 200) << echo.body;
  EXPECT_EQ(json(echo.body)->getObject("headers")->getValue<std::string>("x-forwarded-prefix"),
            path.substr(0, path.size() - 1));
  // Tampered, expired, someone else's sandbox, out of range: nothing served.
  std::string tampered = path;
  tampered[20] = tampered[20] == 'A' ? 'B' : 'A';
  EXPECT_EQ(call("GET", tampered + "index.txt", "", "").status, 404);
  std::string expired =
      seal("pv1.", R"({"s":")" + sb_ + R"(","p":8000,"t":"alice","e":1000})", kPreviewKey);
  auto old = call("GET", "/v1/previews/" + expired + "/index.txt", "", "");
  EXPECT_EQ(old.status, 403);
  EXPECT_NE(old.body.find("expired"), std::string::npos) << old.body;
  EXPECT_EQ(
      call("POST", "/v1/sandboxes/" + sb_ + "/previews", R"({"port":8000})", "tok-bob").status,
      404);
  EXPECT_EQ(
      call("POST", "/v1/sandboxes/" + sb_ + "/previews", R"({"port":8000,"expires_in_seconds":5})")
          .status,
      400);
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + sb_ + "/previews", "{}").status, 400);
}

}  // namespace
}  // namespace pvs::service
