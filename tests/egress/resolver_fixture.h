// Real pieces around a real pve-sandbox-resolver process for the load tests (#32): a fake agent
// on a unix socket (allows every name but those starting with "no", listed as itself, pairs
// everything, counts its connections, keeps the ELOG lines it gets), a fake
// upstream on loopback UDP that answers at once or holds the names it is told to until the test
// releases them (so interleavings happen by construction), and DNS clients bound to chosen
// loopback sources (127.0.0.0/8 is all loopback on Linux).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dns_message.h"
#include "pvesandbox/common/protocol.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::resolver::testing {

class FakeAgent {
 public:
  explicit FakeAgent(std::string path);
  ~FakeAgent();
  const std::string& path() const { return path_; }
  int connections() const { return connections_; }
  int requests() const { return requests_; }
  // The ELOG lines received so far (the egress log), parsed.
  std::vector<proto::EgressLogLine> log();

 private:
  void serve(UniqueFd fd);
  std::string path_;
  UniqueFd listen_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::mutex mutex_;
  std::vector<std::thread> threads_;
  std::vector<proto::EgressLogLine> log_;  // under mutex_
};

class FakeUpstream {
 public:
  // Names starting with `held_prefix` are held until release().
  explicit FakeUpstream(std::string held_prefix = "slow");
  ~FakeUpstream();
  std::uint16_t port() const { return port_; }
  // Names asked so far, in arrival order.
  std::vector<std::string> asked();
  // Waits until `n` queries were asked in all; false after `timeout`.
  bool wait_asked(std::size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Answers the `n` oldest held queries (all with n = 0).
  void release(std::size_t n = 0);

 private:
  void serve();
  std::string held_prefix_;
  UniqueFd fd_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> asked_;
  struct Held {
    std::vector<std::uint8_t> reply;
    std::vector<std::uint8_t> to;  // sockaddr_in bytes
  };
  std::vector<Held> held_;
  std::thread thread_;
};

// A pve-sandbox-resolver process (PVS_RESOLVER_BIN, else the one built with the tests) on
// 127.0.0.1:port() with `extra` lines added to its config.
class ResolverProcess {
 public:
  ResolverProcess(const std::string& dir, const FakeAgent& agent, const FakeUpstream& upstream,
                  const std::string& extra);
  ~ResolverProcess();
  bool started() const { return started_; }
  std::uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  int threads() const;  // the process's threads now (/proc)

 private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
  bool started_ = false;
};

std::string resolver_binary();
// A free port on 127.0.0.1 for both udp and tcp (bound, then released).
std::uint16_t free_port();

struct Answer {
  dns::Rcode rcode;
  std::chrono::microseconds elapsed;
};
// One query (A unless `type` says otherwise) over UDP from `source`; nullopt when nothing came
// within `timeout`.
std::optional<Answer> udp_query(const std::string& source, std::uint16_t port,
                                const std::string& name,
                                std::chrono::milliseconds timeout = std::chrono::seconds(10),
                                std::uint16_t type = dns::kTypeA);
// A UDP socket bound to `source` that sends queries without waiting.
UniqueFd udp_socket(const std::string& source, std::uint16_t port);
void udp_send(int fd, const std::string& name, std::uint16_t id, std::uint16_t type = dns::kTypeA);

// A TCP connection from `source` (invalid when connect failed).
UniqueFd tcp_connect(const std::string& source, std::uint16_t port);
bool tcp_send_query(int fd, const std::string& name, std::uint16_t id);
// The next answer on a TCP connection; nullopt on EOF, error or timeout.
std::optional<dns::Response> tcp_read_answer(
    int fd, std::chrono::milliseconds timeout = std::chrono::seconds(10));
// True when the peer closed the connection within `timeout` (EOF or reset).
bool tcp_closed(int fd, std::chrono::milliseconds timeout);

}  // namespace pvs::resolver::testing
