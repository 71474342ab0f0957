// AgentClient's egress verbs on a real unix socket against a scripted peer that answers as the
// contract says (docs/protocol.md: EGRESS, EGRESSES), and as an agent from before them (400):
// the lines sent, the replies parsed, the errors mapped.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pvesandbox/agent_client.h"

namespace pvs {
namespace {

// Accepts one connection and answers each line with replies[line] ("ERR 400 unknown verb"
// when absent); HELLO gets the agent's greeting. Records the lines it got.
class ScriptedPeer {
 public:
  explicit ScriptedPeer(std::map<std::string, std::string> replies) : replies_(std::move(replies)) {
    char tmpl[] = "/tmp/pvs-egress-client-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/agent.sock";
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    bound_ =
        ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(fd_, 4) == 0;
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedPeer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  bool ok() const { return bound_; }
  const std::string& path() const { return path_; }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  void serve() {
    int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    std::string buffer;
    char chunk[4096];
    for (;;) {
      auto n = ::read(c, chunk, sizeof(chunk));
      if (n <= 0) break;
      buffer.append(chunk, static_cast<std::size_t>(n));
      for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
        std::string line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        std::string reply = "ERR 400 unknown verb";
        if (line.rfind("HELLO ", 0) == 0)
          reply = "OK pve-sandbox-agent test proto=1";
        else if (auto it = replies_.find(line); it != replies_.end())
          reply = it->second;
        {
          std::lock_guard lock(mu_);
          lines_.push_back(line);
        }
        reply += "\n";
        if (::write(c, reply.data(), reply.size()) < 0) break;
      }
    }
    ::close(c);
  }

  std::map<std::string, std::string> replies_;
  std::string dir_, path_;
  int fd_ = -1;
  bool bound_ = false;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> lines_;
};

AgentClientOptions at(const std::string& path) {
  AgentClientOptions o;
  o.socket_path = path;
  o.connect_timeout = std::chrono::seconds(5);
  o.request_timeout = std::chrono::seconds(5);
  o.retries = 0;
  return o;
}

TEST(EgressClientTest, SendsTheContractLinesAndParsesTheReplies) {
  ScriptedPeer peer({
      {"EGRESS 10.99.0.7 ports=80,443 names=*.github.com,pypi.org", "OK"},
      {"EGRESS 10.99.0.7 off", "OK"},
      {"EGRESSES", "OK 2 10.99.0.7=443,80/pypi.org,*.github.com 10.99.0.9=22/git.example.org"},
  });
  ASSERT_TRUE(peer.ok());
  AgentClient client(at(peer.path()));
  auto a = *Ipv4Address::parse("10.99.0.7");
  // Sent normalised: names sorted, default ports.
  ASSERT_TRUE(client.egress(a, EgressList{{"pypi.org", "*.github.com", "pypi.org"}, {}}));
  ASSERT_TRUE(client.egress_off(a));
  auto lists = client.egresses();
  ASSERT_TRUE(lists) << lists.error().message;
  ASSERT_EQ(lists->size(), 2u);
  EXPECT_EQ(lists->at(a), Egress::allow({"pypi.org", "*.github.com"}).list);
  EXPECT_EQ(lists->at(*Ipv4Address::parse("10.99.0.9")).ports, (std::vector<std::uint16_t>{22}));
  // A bad list is refused before anything is sent.
  auto bad = client.egress(a, EgressList{{"PyPI.org"}, {}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(peer.lines(),
            (std::vector<std::string>{"HELLO 1",
                                      "EGRESS 10.99.0.7 ports=80,443 names=*.github.com,pypi.org",
                                      "EGRESS 10.99.0.7 off", "EGRESSES"}));
}

TEST(EgressClientTest, AgentErrorsAndOldAgentsMapToCodes) {
  ScriptedPeer peer({
      {"EGRESS 10.99.0.1 ports=80,443 names=pypi.org", "ERR 403 address not allowed"},
      {"EGRESSES", "OK 3 10.99.0.7=80/pypi.org"},  // a count that does not match
  });
  ASSERT_TRUE(peer.ok());
  AgentClient client(at(peer.path()));
  auto gateway = client.egress(*Ipv4Address::parse("10.99.0.1"), EgressList{{"pypi.org"}, {}});
  ASSERT_FALSE(gateway);
  EXPECT_EQ(gateway.error().code, ErrorCode::kPermissionDenied);
  auto old = client.egress_off(*Ipv4Address::parse("10.99.0.7"));  // not scripted: 400
  ASSERT_FALSE(old);
  EXPECT_EQ(old.error().code, ErrorCode::kInvalidArgument);
  auto damaged = client.egresses();
  ASSERT_FALSE(damaged);
  EXPECT_EQ(damaged.error().code, ErrorCode::kInternal);
}

}  // namespace
}  // namespace pvs
