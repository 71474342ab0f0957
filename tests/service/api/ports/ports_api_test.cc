// The port proxy end to end: the REST API in-process on the real Manager and the netns stack
// (each sandbox a network namespace with its own sshd and its own /tmp), a real HTTP server
// (python3's http.server, plus a few paths of its own) started in the sandbox on its loopback,
// serving only a temporary directory the test made there; requests go through
// /v1/sandboxes/{id}/ports/{port}/... and the sandbox's SSH session.
#include <gtest/gtest.h>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>

#include <chrono>
#include <random>
#include <thread>

#include "api/ports/port_proxy.h"
#include "service/support/api_fixture.h"

namespace pvs::service {
namespace {

// The service: the directory's files as http.server serves them, and a few paths of its own.
constexpr const char* kServer = R"PY(
import hashlib, http.server, json, sys
root = sys.argv[2]
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def __init__(self, *a, **k):
        super().__init__(*a, directory=root, **k)
    def log_message(self, *a):
        pass
    def reply(self, code, body, extra=()):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path.startswith("/echo"):
            seen = {"method": self.command, "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()}}
            return self.reply(200, json.dumps(seen).encode(),
                              [("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")])
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"one ", b"two ", b"three"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/until-close":
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"read until the end")
            return
        if self.path == "/cut":
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"0123456789")
            return
        return super().do_GET()
    def do_POST(self):
        data = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        elif self.headers.get("Content-Length"):
            data = self.rfile.read(int(self.headers["Content-Length"]))
        seen = {"length": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "te": self.headers.get("Transfer-Encoding", ""), "path": self.path}
        self.reply(201, json.dumps(seen).encode())
    do_PUT = do_POST
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
)PY";

// Returns once something accepts connections on 127.0.0.1:<port> (at most 20 s).
constexpr const char* kWait = R"PY(
import socket, sys, time
for _ in range(400):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
)PY";

constexpr int kPort = 8000;

class PortsApiTest : public ApiTest {
 protected:
  test::StackOptions stack_options() override {
    test::StackOptions o;
    o.backend = "netns";
    return o;
  }
  void adjust_service(ServiceConfig& c) override { c.max_body_bytes = 64 << 10; }  // the scripts
  void SetUp() override {
    ApiTest::SetUp();
    sb_ = create();
    ASSERT_FALSE(sb_.empty());
    // A directory of its own in the sandbox's /tmp; only www/ is served.
    dir_ = in_sandbox(sb_, "mktemp -d /tmp/pvs-ports-XXXXXX");
    ASSERT_EQ(dir_.rfind("/tmp/pvs-ports-", 0), 0u) << dir_;
    ASSERT_EQ(in_sandbox(sb_, "mkdir " + dir_ + "/www && printf 'hello from the sandbox' > " +
                                  dir_ + "/www/index.txt && head -c 3000000 /dev/urandom > " +
                                  dir_ + "/www/big.bin && echo ok"),
              "ok");
    ASSERT_EQ(
        in_sandbox(sb_, "cat > " + dir_ + "/server.py <<'EOF'\n" + std::string(kServer) +
                            "EOF\ncat > " + dir_ + "/wait.py <<'EOF'\n" + kWait + "EOF\necho ok"),
        "ok");
    ASSERT_EQ(in_sandbox(sb_, "cd " + dir_ + " && (setsid python3 server.py " +
                                  std::to_string(kPort) + " " + dir_ + "/www > server.log 2>&1 " +
                                  "< /dev/null &) && python3 wait.py " + std::to_string(kPort) +
                                  " && echo up"),
              "up");
  }
  std::string url(const std::string& rest, int port = kPort) {
    return "/v1/sandboxes/" + sb_ + "/ports/" + std::to_string(port) + rest;
  }
  // The newest `sandbox.port` record, once there is one. The proxy writes it when the proxied
  // exchange has ended, which may be just after the client has read the whole reply: waited for,
  // up to 10 s. (Each test reads the record of its first proxied request.)
  Poco::JSON::Object::Ptr last_audit() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      auto lines = audit_lines();
      for (auto it = lines.rbegin(); it != lines.rend(); ++it)
        if ((*it)->getValue<std::string>("action") == "sandbox.port") return *it;
      if (std::chrono::steady_clock::now() >= deadline) return nullptr;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  std::string sb_;
  std::string dir_;
};

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
