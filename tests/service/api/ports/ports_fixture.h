// The fixture of the port proxy's end-to-end tests (ports_api_test.cc, ports_policy_test.cc):
// the REST API in-process on the real Manager and the netns stack (each sandbox a network
// namespace with its own sshd and its own /tmp), a real HTTP server (python3's http.server, plus
// a few paths of its own) started in the sandbox on its loopback (or on all its addresses, for
// the route transport), serving only a temporary directory the test made there; the sandbox
// known to the E2B API too (Sandbox.connect), with its traffic token, for E2B's routing.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/Net/WebSocket.h>

#include "service/support/api_fixture.h"
#include "support/sshd_fixture.h"

namespace pvs::service {

// The service: the directory's files as http.server serves them, and a few paths of its own.
inline constexpr const char* kServer = R"PY(
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
            seen = {"method": self.command, "path": self.path, "client": self.client_address[0],
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
        if self.path == "/silent":  # no reply: waits for the connection's end, then says so
            open(root + "/../asked", "w").close()
            self.rfile.read(1)
            open(root + "/../hung-up", "w").close()
            self.close_connection = True
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
address = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
http.server.ThreadingHTTPServer((address, int(sys.argv[1])), H).serve_forever()
)PY";

// Returns once something accepts connections on 127.0.0.1:<port> (at most 20 s).
inline constexpr const char* kWait = R"PY(
import socket, sys, time
for _ in range(400):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(1)
)PY";

inline constexpr int kPort = 8000;
inline constexpr int kWsPort = 8001;
inline constexpr const char* kPreviewKey = "a preview key of thirty-two bytes, at least";
inline constexpr const char* kE2bKey = "e2b_0123456789abcdef";  // alice's E2B API key

class PortsApiTest : public ApiTest {
 protected:
  test::StackOptions stack_options() override {
    test::StackOptions o;
    o.backend = "netns";
    return o;
  }
  void adjust_service(ServiceConfig& c) override {
    c.max_body_bytes = 64 << 10;  // the scripts
    c.ports_max_upgrades_per_token = 2;
    c.ports_preview_secret = kPreviewKey;
    c.tokens[0].e2b_key_sha256 = sha256_hex(kE2bKey);
    c.e2b_domain = "e2b.test";
  }
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
    start_service(kPort);
  }
  // server.py serving www/ on `port` of `address` in the sandbox (its loopback by default),
  // once it accepts connections.
  void start_service(int port, const std::string& address = "127.0.0.1") {
    const std::string p = std::to_string(port);
    ASSERT_EQ(
        in_sandbox(sb_, "cd " + dir_ + " && (setsid python3 server.py " + p + " " + dir_ + "/www " +
                            address + " > server-" + p + ".log 2>&1 < /dev/null &) && " +
                            "python3 wait.py " + p + " && echo up"),
        "up");
  }
  // The sandbox known to the E2B API (Sandbox.connect): its traffic token in traffic_.
  void connect_e2b() {
    auto r = http(port_, "POST", "/e2b/sandboxes/" + sb_ + "/connect", R"({"timeout":300})", "",
                  {{"X-API-Key", kE2bKey}});
    ASSERT_EQ(r.status / 100, 2) << r.body;
    traffic_ = json(r.body)->getValue<std::string>("trafficAccessToken");
  }
  // A request through E2B's routing to `port` (after connect_e2b): as E2B_SANDBOX_URL clients
  // send it, or by Host (what getHost(port) gives).
  HttpReply e2b(int port, const std::string& path, bool by_host = false) {
    if (by_host)
      return http(port_, "GET", path, "", "",
                  {{"Host", std::to_string(port) + "-" + sb_ + ".e2b.test"},
                   {"e2b-traffic-access-token", traffic_}});
    return http(port_, "GET", "/e2b/envd" + path, "", "",
                {{"E2b-Sandbox-Id", sb_},
                 {"E2b-Sandbox-Port", std::to_string(port)},
                 {"e2b-traffic-access-token", traffic_}});
  }
  // ws_echo_server.py, started in the sandbox on kWsPort of `address`.
  void start_ws_server(const std::string& address = "127.0.0.1") {
    std::ifstream in(PVS_SOURCE_DIR "/tests/service/api/ports/ws_echo_server.py");
    std::stringstream text;
    text << in.rdbuf();
    ASSERT_EQ(in_sandbox(sb_, "cat > " + dir_ + "/ws.py <<'EOF'\n" + text.str() + "EOF\necho ok"),
              "ok");
    ASSERT_EQ(
        in_sandbox(sb_, "cd " + dir_ + " && (setsid python3 ws.py " + std::to_string(kWsPort) +
                            " " + address + " > ws.log 2>&1 < /dev/null &) && " +
                            "python3 wait.py " + std::to_string(kWsPort) + " && echo up"),
        "up");
  }
  // ws_port_client.py (python3-websockets, a client nobody here wrote) through the REST route
  // to `path` on kWsPort: its exit code; what it printed (its JSON) in *out.
  int ws_client(const std::string& path, std::string* out) {
    return test::run_command(
        {"/usr/bin/python3", PVS_SOURCE_DIR "/tests/service/api/ports/ws_port_client.py",
         "ws://127.0.0.1:" + std::to_string(port_) + url(path, kWsPort), "tok-alice"},
        out);
  }
  // A WebSocket to the sandbox's kWsPort with Poco's client; throws what Poco throws (a refused
  // upgrade: WebSocketException, its response in `resp`).
  std::unique_ptr<Poco::Net::WebSocket> open_ws(Poco::Net::HTTPResponse& resp) {
    Poco::Net::HTTPClientSession cs("127.0.0.1", port_);
    Poco::Net::HTTPRequest req("GET", url("/ws", kWsPort), "HTTP/1.1");
    req.set("Authorization", "Bearer tok-alice");
    auto ws = std::make_unique<Poco::Net::WebSocket>(cs, req, resp);
    ws->setReceiveTimeout(Poco::Timespan(15, 0));
    return ws;
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
  std::string traffic_;
};

}  // namespace pvs::service
