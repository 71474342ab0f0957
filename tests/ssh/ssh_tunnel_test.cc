// TcpTunnel (SshSession::open_tunnel) against a real OpenSSH sshd on 127.0.0.1 and TCP services
// the test runs on loopback: what the service receives and sends crosses a direct-tcpip channel.
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "pvesandbox/ssh_session.h"
#include "support/loopback.h"
#include "support/sshd_client.h"
#include "support/sshd_fixture.h"

namespace pvs {
namespace {

using namespace std::chrono_literals;
using test::SshdFixture;

// One TCP service on 127.0.0.1: accepts one connection and runs `serve` on it in a thread.
class OneShotServer {
 public:
  explicit OneShotServer(std::function<void(int fd)> serve) {
    listen_fd_ = test::loopback_listen(&port_, 4);
    if (!listen_fd_) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
      return;
    }
    thread_ = std::thread([this, serve = std::move(serve)] {
      UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!fd) return;
      accepted_ = true;
      serve(fd.get());
    });
  }
  ~OneShotServer() {
    ::shutdown(listen_fd_.get(), SHUT_RDWR);  // wakes an accept that never got a connection
    if (thread_.joinable()) thread_.join();
  }
  std::uint16_t port() const { return port_; }
  void join() { thread_.join(); }
  bool accepted() const { return accepted_; }

 private:
  UniqueFd listen_fd_;
  std::uint16_t port_ = 0;
  std::atomic<bool> accepted_{false};
  std::thread thread_;
};

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 977) & 0xff);
  return s;
}

// Reads the tunnel to the service's EOF.
std::string read_to_eof(TcpTunnel& t, std::size_t chunk) {
  std::string got;
  std::string buf(chunk, '\0');
  for (;;) {
    auto n = t.read(buf.data(), buf.size(), 30s);
    EXPECT_TRUE(n) << n.error().to_string();
    if (!n || *n == 0) return got;
    got.append(buf.data(), *n);
  }
}

class SshTunnelTest : public ::testing::Test {
 protected:
  static SshConfig config(const SshdFixture& sshd) { return test::client_config(sshd); }
  SshdFixture sshd_;
};

// 8 MiB each way at once through 64 KiB queues: the service echoes what it reads as it reads it,
// so neither side can finish unless both directions stream (nothing is buffered whole).
TEST_F(SshTunnelTest, EchoesBothWaysThroughSmallQueues) {
  OneShotServer echo([](int fd) {
    char buf[16384];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0 || !send_all(fd, std::string_view(buf, static_cast<std::size_t>(n)))) break;
    }
  });
  SshSession ssh(config(sshd_));
  TunnelOptions o;
  o.port = echo.port();
  o.max_buffered = 64 << 10;
  auto t = ssh.open_tunnel(o);
  ASSERT_TRUE(t) << t.error().to_string();
  const std::string data = pattern(8 << 20);
  std::thread writer([&] {
    for (std::size_t at = 0; at < data.size(); at += 100000) {
      auto st = (*t)->write(std::string_view(data).substr(at, 100000), 30s);
      ASSERT_TRUE(st) << st.error().to_string();
    }
    (*t)->shutdown_write();
  });
  std::string got = read_to_eof(**t, 7000);
  writer.join();
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  EXPECT_EQ((*t)->bytes_sent(), data.size());
  EXPECT_EQ((*t)->bytes_received(), data.size());
  // The session still runs commands beside and after it.
  auto r = ssh.exec("echo ok");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "ok\n");
}

// A service that answers and closes (HTTP/1.0 style): the tunnel reads to its EOF, and the
// request reached the service whole.
TEST_F(SshTunnelTest, ServiceSeesTheRequestAndItsEof) {
  std::string seen;
  OneShotServer server([&](int fd) {
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      seen.append(buf, static_cast<std::size_t>(n));
    }
    send_all(fd, "answer to " + std::to_string(seen.size()) + " bytes");
  });
  SshSession ssh(config(sshd_));
  TunnelOptions o;
  o.port = server.port();
  auto t = ssh.open_tunnel(o);
  ASSERT_TRUE(t) << t.error().to_string();
  ASSERT_TRUE((*t)->write("hello through the sandbox", 10s));
  (*t)->shutdown_write();
  EXPECT_EQ(read_to_eof(**t, 4096), "answer to 25 bytes");
  server.join();
  EXPECT_EQ(seen, "hello through the sandbox");
  // Reading past the end stays at the end; writing after shutdown_write is refused.
  char c;
  auto again = (*t)->read(&c, 1, 1s);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 0u);
  EXPECT_FALSE((*t)->write("x", 1s));
}

// close() ends the service's connection: its blocked recv returns 0 (no timing involved: the
// service thread waits for exactly that).
TEST_F(SshTunnelTest, CloseEndsTheServicesConnection) {
  std::atomic<ssize_t> last{-2};
  OneShotServer server([&](int fd) {
    char buf[64];
    last = ::recv(fd, buf, sizeof buf, 0);
  });
  SshSession ssh(config(sshd_));
  TunnelOptions o;
  o.port = server.port();
  auto t = ssh.open_tunnel(o);
  ASSERT_TRUE(t) << t.error().to_string();
  (*t)->close();
  server.join();
  EXPECT_EQ(last.load(), 0);
  char c;
  auto r = (*t)->read(&c, 1, 1s);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(SshErrc::kClosed)) << r.error().to_string();
}

TEST_F(SshTunnelTest, NothingListeningIsConnectRefused) {
  std::uint16_t port = test::free_port();
  SshSession ssh(config(sshd_));
  TunnelOptions o;
  o.port = port;
  auto t = ssh.open_tunnel(o);
  ASSERT_FALSE(t);
  EXPECT_TRUE(t.error().is(SshErrc::kConnectRefused)) << t.error().to_string();
  EXPECT_NE(t.error().message.find("127.0.0.1:" + std::to_string(port)), std::string::npos);
  // A refused tunnel frees its slot: the session goes on.
  auto r = ssh.exec("echo ok");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->out, "ok\n");
}

TEST_F(SshTunnelTest, BadArgumentsAreRefusedBeforeAnyChannel) {
  SshSession ssh(config(sshd_));
  TunnelOptions o;
  o.port = 0;
  auto t = ssh.open_tunnel(o);
  ASSERT_FALSE(t);
  EXPECT_TRUE(t.error().is(SshErrc::kInvalidArgument));
  o.port = 80;
  o.host = "";
  EXPECT_FALSE(ssh.open_tunnel(o));
}

// A sandbox whose sshd forbids forwarding says so (the template's AllowTcpForwarding).
TEST(SshTunnelRefusedTest, ForwardingForbiddenIsChannelRefused) {
  test::SshdOptions opts;
  opts.extra_config = "AllowTcpForwarding no";
  SshdFixture sshd(opts);
  OneShotServer server([](int) {});
  SshConfig c = test::client_config(sshd);
  SshSession ssh(c);
  TunnelOptions o;
  o.port = server.port();
  auto t = ssh.open_tunnel(o);
  ASSERT_FALSE(t);
  EXPECT_TRUE(t.error().is(SshErrc::kChannelRefused)) << t.error().to_string();
  EXPECT_NE(t.error().message.find("AllowTcpForwarding"), std::string::npos);
  EXPECT_FALSE(server.accepted());
}

// The template's lines (setup/pve-sandbox-setup): the sandbox's loopback is reachable, any
// other address is not.
TEST(SshTunnelRefusedTest, TemplateConfigAllowsOnlyTheLoopback) {
  test::SshdOptions opts;
  opts.extra_config = "AllowTcpForwarding local\nPermitOpen 127.0.0.1:*";
  SshdFixture sshd(opts);
  OneShotServer server([](int fd) { send_all(fd, "hi"); });
  SshConfig c = test::client_config(sshd);
  SshSession ssh(c);
  TunnelOptions o;
  o.port = server.port();
  o.host = "127.0.0.2";  // loopback too on Linux, but not the one permitted
  auto refused = ssh.open_tunnel(o);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().is(SshErrc::kChannelRefused)) << refused.error().to_string();
  o.host = "127.0.0.1";
  auto t = ssh.open_tunnel(o);
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(read_to_eof(**t, 64), "hi");
}

}  // namespace
}  // namespace pvs
