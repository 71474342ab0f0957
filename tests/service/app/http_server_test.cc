// The HTTP server's keep-alive while the workers run out (app/http_server.cc): a connection
// served on the last free worker is closed after its reply, so idle keep-alive connections
// never hold every worker while a new connection waits. Two workers and a keep-alive timeout
// of 300 s make the case by construction: before the change the third connection waited the
// whole timeout. The web console's index is the request (public, no Manager needed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <Poco/Net/NetException.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/Net/StreamSocket.h>
#include <Poco/String.h>

#include "app/api.h"
#include "service/support/in_process_service.h"

namespace pvs::service {
namespace {

// A keep-alive connection written and read by hand: Poco's client session would reconnect.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port)
      : socket_(Poco::Net::SocketAddress("127.0.0.1", port)) {
    socket_.setReceiveTimeout(Poco::Timespan(10, 0));
  }
  // Sends GET `target` and reads one reply (Content-Length framed): its head, or "" when the
  // server closed the connection or did not answer within 10 s.
  std::string get(const std::string& target) {
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n";
    socket_.sendBytes(req.data(), static_cast<int>(req.size()));
    std::string in;
    std::size_t end;
    while ((end = in.find("\r\n\r\n")) == std::string::npos) {
      if (!receive(in)) return "";
    }
    std::string head = in.substr(0, end + 2);
    auto at = head.find("Content-Length: ");
    std::size_t length =
        at == std::string::npos ? 0 : std::strtoul(head.c_str() + at + 16, nullptr, 10);
    while (in.size() < end + 4 + length) {
      if (!receive(in)) return "";
    }
    return head;
  }
  // True once the server has closed the connection (a read returns 0 bytes).
  bool closed_by_server() {
    std::string rest;
    return !receive(rest) && rest.empty();
  }

 private:
  bool receive(std::string& into) {
    char buf[4096];
    try {
      int n = socket_.receiveBytes(buf, sizeof buf);
      if (n <= 0) return false;
      into.append(buf, static_cast<std::size_t>(n));
      return true;
    } catch (const Poco::TimeoutException&) {
      return false;
    }
  }
  Poco::Net::StreamSocket socket_;
};

bool closes(const std::string& head) {  // Poco writes "Connection: Close"
  return Poco::toLower(head).find("connection: close") != std::string::npos;
}

TEST(HttpServerTest, TheLastFreeWorkerClosesItsConnectionAfterTheReply) {
  ServiceConfig config;
  config.listen_port = 0;
  config.audit_file = ::testing::TempDir() + "/keepalive-audit-" + std::to_string(::getpid());
  config.http_threads = 2;
  config.http_keepalive_timeout_seconds = 300;
  auto svc = test::InProcessService::start(config);
  ASSERT_TRUE(svc) << svc.error().message;
  const std::uint16_t port = (*svc)->port();

  RawConnection first(port);
  std::string head = first.get("/ui/");
  ASSERT_NE(head.find(" 200 "), std::string::npos) << head;
  EXPECT_FALSE(closes(head)) << "a worker was still free: keep-alive\n" << head;

  RawConnection second(port);  // takes the last worker while `first` idles on the other
  head = second.get("/ui/");
  ASSERT_NE(head.find(" 200 "), std::string::npos) << head;
  EXPECT_TRUE(closes(head)) << head;
  EXPECT_TRUE(second.closed_by_server());

  RawConnection third(port);  // answered at once, not after first's 300 s keep-alive
  head = third.get("/ui/");
  EXPECT_NE(head.find(" 200 "), std::string::npos) << "the third connection waited: " << head;

  // The idle keep-alive connection still serves its next request.
  head = first.get("/ui/");
  EXPECT_NE(head.find(" 200 "), std::string::npos) << head;
  svc->reset();
  std::remove(config.audit_file.c_str());
}

}  // namespace
}  // namespace pvs::service
