// The web console through the real HTTP server (Api + HttpServer, no Manager needed: the
// console's files are public and the API answers 503 "starting" meanwhile): headers on every
// reply, HEAD, 405, the /ui redirect, traversal attempts as raw request lines, and the switch
// console.enabled.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>

#include "api/console/console.h"
#include "app/api.h"
#include "service/support/http_client.h"
#include "service/support/in_process_service.h"

namespace pvs::service {
namespace {

// One request written as is (no client-side normalisation of the path): the status line.
std::string raw_status(std::uint16_t port, const std::string& target) {
  Poco::Net::StreamSocket s(Poco::Net::SocketAddress("127.0.0.1", port));
  s.setReceiveTimeout(Poco::Timespan(10, 0));
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  s.sendBytes(req.data(), static_cast<int>(req.size()));
  std::string out;
  char buf[4096];
  for (int n; (n = s.receiveBytes(buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out.substr(0, out.find("\r\n"));
}

class ConsoleHttpTest : public ::testing::Test {
 protected:
  void start(bool enabled) {
    config_.listen_port = 0;
    // One file per test process (ctest runs this suite's cases side by side), removed after.
    config_.audit_file =
        ::testing::TempDir() + "/console-audit-" + std::to_string(::getpid()) + ".log";
    config_.console_enabled = enabled;
    auto svc = test::InProcessService::start(config_);
    ASSERT_TRUE(svc) << svc.error().message;
    svc_ = std::move(*svc);
    port_ = svc_->port();
  }
  void TearDown() override {
    svc_.reset();
    std::remove(config_.audit_file.c_str());
  }
  test::HttpReply get(const std::string& uri, const std::string& method = "GET") {
    return test::http(port_, method, uri);
  }

  ServiceConfig config_;
  std::unique_ptr<test::InProcessService> svc_;
  std::uint16_t port_ = 0;
};

void expect_security_headers(const test::HttpReply& r, const std::string& what) {
  ASSERT_TRUE(r.headers.count("Content-Security-Policy")) << what;
  EXPECT_NE(r.headers.at("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_NE(r.headers.at("Content-Security-Policy").find("frame-ancestors 'none'"),
            std::string::npos);
  EXPECT_EQ(r.headers.count("X-Content-Type-Options") ? r.headers.at("X-Content-Type-Options") : "",
            "nosniff")
      << what;
  EXPECT_EQ(r.headers.count("X-Frame-Options") ? r.headers.at("X-Frame-Options") : "", "DENY");
}

TEST_F(ConsoleHttpTest, ServesFilesWithTypesAndHeaders) {
  start(true);
  auto index = get("/ui/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.headers["Content-Type"], "text/html; charset=utf-8");
  EXPECT_NE(index.body.find("js/main.js"), std::string::npos);
  expect_security_headers(index, "/ui/");
  auto js = get("/ui/js/main.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.headers["Content-Type"], "text/javascript; charset=utf-8");
  expect_security_headers(js, "main.js");
  auto css = get("/ui/vendor/xterm/xterm.css");
  EXPECT_EQ(css.status, 200);
  EXPECT_EQ(css.headers["Content-Type"], "text/css; charset=utf-8");
  EXPECT_EQ(css.body, std::string(console_lookup("/ui/vendor/xterm/xterm.css").body));

  auto head = get("/ui/index.html", "HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(head.headers["Content-Length"], std::to_string(index.body.size()));

  auto redirect = get("/ui");
  EXPECT_EQ(redirect.status, 308);
  EXPECT_EQ(redirect.headers["Location"], "/ui/");

  auto post = test::http(port_, "POST", "/ui/", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers["Allow"], "GET, HEAD");

  auto missing = get("/ui/nope.js");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("not_found"), std::string::npos);
  expect_security_headers(missing, "404");

  // The API is as it was: no console headers on its replies, and its own 404s.
  auto health = get("/v1/health");
  EXPECT_EQ(health.headers.count("Content-Security-Policy"), 0u);
  EXPECT_EQ(get("/v1/sandboxes").status, 401);
}

TEST_F(ConsoleHttpTest, TraversalReachesNothing) {
  start(true);
  for (const char* target :
       {"/ui/../etc/passwd", "/ui/%2e%2e/%2e%2e/etc/passwd", "/ui/..%2f..%2fetc%2fpasswd",
        "/ui/js/../../../../etc/passwd", "/ui/js/..%5c..%5cindex.html", "/ui//etc/passwd",
        "/ui/%2fetc%2fpasswd", "/ui/index.html%00.js", "/ui/js/", "/ui/vendor/xterm/package.json",
        "/ui/../v1/openapi.json", "/ui/%252e%252e/etc/passwd"}) {
    std::string status = raw_status(port_, target).substr(0, 12);
    EXPECT_TRUE(status == "HTTP/1.1 404" || status == "HTTP/1.1 400") << target << ": " << status;
  }
  EXPECT_EQ(raw_status(port_, "/ui/js/main.js").substr(0, 12), "HTTP/1.1 200");
}

TEST_F(ConsoleHttpTest, CanBeSwitchedOff) {
  start(false);
  EXPECT_EQ(get("/ui/").status, 404);
  EXPECT_EQ(get("/ui/").headers.count("Content-Security-Policy"), 0u);
  EXPECT_EQ(get("/v1/openapi.json").status, 200);
}

}  // namespace
}  // namespace pvs::service
