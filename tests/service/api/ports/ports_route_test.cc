// The port proxy's route transport end to end (ports.transport: route; docs/design/ports.md,
// section 10): the real agent opens the route in the real ruleset, the controller connects to
// the sandbox's address directly. The service tells which way a request came: over SSH its peer
// is the sandbox's own 127.0.0.1, over a route the controller's address.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "service/api/ports/ports_fixture.h"
#include "support/eventually.h"

namespace pvs::service {
namespace {

using namespace std::chrono_literals;

constexpr int kOpenPort = 8002;  // server.py on all the sandbox's addresses

class PortsRouteTest : public PortsApiTest {
 protected:
  void adjust_service(ServiceConfig& c) override {
    PortsApiTest::adjust_service(c);
    c.ports_route = true;
  }
  void SetUp() override {
    PortsApiTest::SetUp();  // server.py on 127.0.0.1:kPort
    if (HasFatalFailure()) return;
    start_service(kOpenPort, "0.0.0.0");
    auto info = json(call("GET", "/v1/sandboxes/" + sb_).body);
    address_ = info->getValue<std::string>("address");
    node_ = info->getValue<std::string>("node");
  }
  // Where a request came from, as the service saw it (its /echo).
  std::string client_of(const HttpReply& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json(r.body)->getValue<std::string>("client") : "";
  }
  // The agent's `change ... verb=<verb> address=<sandbox> port=<port>` lines, successful ones.
  int agent_changes(const std::string& verb, int port, int node = 0) {
    std::string log = stack_->agent_log(node);
    std::string needle = "verb=" + verb + " address=" + address_ + " port=" + std::to_string(port);
    int n = 0;
    for (auto at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1))
      n += log.compare(log.find("result=", at), 9, "result=OK") == 0;
    return n;
  }

  std::string address_, node_;
};

// A GET and a WebSocket reach a service on 0.0.0.0 by route, through REST and E2B's routing
// alike; every route asked for is removed again.
TEST_F(PortsRouteTest, RestAndE2bGoByRouteToAServiceOnEveryAddress) {
  const std::string gateway = "10.99.0.1";  // the node's bridge: the controller runs on the node
  auto rest = call("GET", url("/echo", kOpenPort));
  EXPECT_EQ(client_of(rest), gateway);
  auto big = call("GET", url("/big.bin", kOpenPort));
  EXPECT_EQ(big.status, 200);
  EXPECT_EQ(big.body.size(), 3000000u);
  connect_e2b();
  EXPECT_EQ(client_of(e2b(kOpenPort, "/echo")), gateway);
  EXPECT_EQ(client_of(e2b(kOpenPort, "/echo", true)), gateway);

  start_ws_server("0.0.0.0");
  std::string out;
  ASSERT_EQ(ws_client("/ws", &out), 0) << out;
  EXPECT_EQ(json(out)->getObject("seen")->getValue<std::string>("client"), gateway) << out;
  Poco::Net::HTTPClientSession cs("127.0.0.1", port_);
  Poco::Net::HTTPRequest req("GET", "/e2b/envd/ws", "HTTP/1.1");
  req.set("E2b-Sandbox-Id", sb_);
  req.set("E2b-Sandbox-Port", std::to_string(kWsPort));
  req.set("e2b-traffic-access-token", traffic_);
  Poco::Net::HTTPResponse resp;
  Poco::Net::WebSocket ws(cs, req, resp);
  ws.setReceiveTimeout(Poco::Timespan(15, 0));
  char buf[4096];
  int flags = 0;
  int n = ws.receiveFrame(buf, sizeof buf, flags);
  ASSERT_GT(n, 0);
  EXPECT_EQ(json(std::string(buf, static_cast<std::size_t>(n)))->getValue<std::string>("client"),
            gateway);
  ws.sendFrame("ping", 4);
  n = ws.receiveFrame(buf, sizeof buf, flags);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(std::max(n, 0))), "ping");
  ws.shutdown();

  // Each connection's route went back (one element per port while any connection holds it).
  EXPECT_GE(agent_changes("ROUTE", kOpenPort), 1);
  EXPECT_GE(agent_changes("ROUTE", kWsPort), 1);
  for (int port : {kOpenPort, kWsPort})
    EXPECT_TRUE(test::eventually(
        [&] { return agent_changes("UNROUTE", port) == agent_changes("ROUTE", port); }, 15s))
        << port;
}

// A service on the sandbox's loopback refuses the route's connection: the proxy goes over SSH.
TEST_F(PortsRouteTest, AServiceOnLoopbackOnlyIsReachedOverSsh) {
  EXPECT_EQ(client_of(call("GET", url("/echo"))), "127.0.0.1");
  EXPECT_EQ(client_of(call("GET", url("/echo", kOpenPort))), "10.99.0.1");
  EXPECT_EQ(agent_changes("ROUTE", kPort), agent_changes("UNROUTE", kPort));
  auto none = call("GET", url("/", 8009));  // nothing at all: SSH's 502, as before
  EXPECT_EQ(none.status, 502) << none.body;
}

// A controller on another host (the cluster layout: the controller in its own namespace, the
// node's forward chain between): the element is in the node's proxy_routes only while a
// request runs, and without it the controller's connection is dropped.
class PortsRouteClusterTest : public PortsRouteTest {
 protected:
  test::StackOptions stack_options() override {
    auto o = PortsRouteTest::stack_options();
    o.nodes = 2;
    return o;
  }
  int node_number() const { return std::stoi(node_.substr(3)); }  // "pve<i>"
  std::string routes() {
    std::string out;
    test::run_command({"ip", "netns", "exec", stack_->id() + "-" + node_, "nft", "list", "set",
                       "inet", "sandbox", "proxy_routes"},
                      &out);
    return out;
  }
  // A plain TCP connect to the sandbox's port from this (the controller's) namespace: "ok",
  // "refused" or "dropped" (no answer within 1.5 s).
  std::string connect_directly(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(port));
    sa.sin_addr.s_addr = htonl(Ipv4Address::parse(address_)->to_uint());
    ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    pollfd p{fd, POLLOUT, 0};
    std::string what = "dropped";
    if (::poll(&p, 1, 1500) == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      what = err == 0 ? "ok" : err == ECONNREFUSED ? "refused" : std::strerror(err);
    }
    ::close(fd);
    return what;
  }
};

TEST_F(PortsRouteClusterTest, TheRouteLivesWhileItsRequestDoes) {
  const std::string element = address_ + " . " + std::to_string(kOpenPort);
  EXPECT_EQ(connect_directly(kOpenPort), "dropped");
  EXPECT_EQ(routes().find(element), std::string::npos) << routes();
  // /silent never answers: the request holds its connection (and the route) until the client
  // hangs up.
  Poco::Net::StreamSocket s(Poco::Net::SocketAddress("127.0.0.1", port_));
  std::string req = "GET " + url("/silent", kOpenPort) +
                    " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-alice\r\n\r\n";
  s.sendBytes(req.data(), static_cast<int>(req.size()));
  ASSERT_TRUE(test::eventually(
      [&] { return in_sandbox(sb_, "test -e " + dir_ + "/asked && echo yes") == "yes"; }, 20s));
  EXPECT_NE(routes().find(element), std::string::npos) << routes();
  EXPECT_NE(routes().find("timeout 1m"), std::string::npos) << routes();
  s.close();
  EXPECT_TRUE(test::eventually([&] { return routes().find(element) == std::string::npos; }, 15s))
      << routes();
  EXPECT_EQ(connect_directly(kOpenPort), "dropped");
  // The same by route, once more, with the service's answer: the controller's own address on
  // its link to the node.
  std::string client = client_of(call("GET", url("/echo", kOpenPort)));
  EXPECT_EQ(client.rfind("172.31.", 0), 0u) << client;
  // The lease ends when the proxy lets go of the connection, which may be just after the
  // client has the whole reply.
  EXPECT_TRUE(test::eventually([&] { return routes().find(element) == std::string::npos; }, 15s))
      << routes();
}

// Two connections to one port share its element: the first to end leaves it (and the other
// connection, whose every packet the ruleset checks against it) alone; the last removes it.
TEST_F(PortsRouteClusterTest, ARouteLastsAsLongAsItsLastConnection) {
  start_ws_server("0.0.0.0");
  const std::string element = address_ + " . " + std::to_string(kWsPort);
  Poco::Net::HTTPResponse r1, r2;
  auto first = open_ws(r1);
  auto second = open_ws(r2);
  char buf[4096];
  int flags = 0;
  ASSERT_GT(first->receiveFrame(buf, sizeof buf, flags), 0);  // what the service received
  ASSERT_GT(second->receiveFrame(buf, sizeof buf, flags), 0);
  EXPECT_NE(routes().find(element), std::string::npos) << routes();
  first->shutdown();
  while (first->receiveFrame(buf, sizeof buf, flags) > 0 &&
         (flags & Poco::Net::WebSocket::FRAME_OP_BITMASK) != Poco::Net::WebSocket::FRAME_OP_CLOSE) {
  }
  first.reset();
  // The first one's end has reached the proxy once its upgrade's place is free again (its
  // stream, and its hold on the route, go right after).
  EXPECT_TRUE(test::eventually(
      [&] {
        call("GET", "/metrics", "", "");  // refreshes the gauge
        return metrics_->value("pvs_port_upgrades_open") == 1;
      },
      15s));
  second->sendFrame("still routed", 12);
  int n = second->receiveFrame(buf, sizeof buf, flags);
  EXPECT_EQ(std::string(buf, static_cast<std::size_t>(std::max(n, 0))), "still routed");
  EXPECT_NE(routes().find(element), std::string::npos) << routes();
  EXPECT_EQ(agent_changes("UNROUTE", kWsPort, node_number()), 0);
  second->shutdown();
  second.reset();
  EXPECT_TRUE(test::eventually([&] { return routes().find(element) == std::string::npos; }, 15s))
      << routes();
  EXPECT_EQ(agent_changes("ROUTE", kWsPort, node_number()), 1);
  EXPECT_EQ(agent_changes("UNROUTE", kWsPort, node_number()), 1);
}

}  // namespace
}  // namespace pvs::service
