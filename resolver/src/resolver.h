// pve-sandbox-resolver: DNS for sandboxes in allowlist mode (docs/architecture.md "Egress by
// domain"). A query from a sandbox is answered only for names on its list (ASK), and only after
// the agent holds the (sandbox . address . port) pairs of the answer (PAIR): the first
// connection never races the set. Everything else is REFUSED.
//
// One event loop thread does all of it (#32): upstream queries are asynchronous (c-ares), the
// agent connections are shared and pipelined, and a FairQueue decides which query runs, so a
// source flooding names that resolve slowly holds its own slots only.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent_link.h"
#include "dns_message.h"
#include "egress_log.h"
#include "fair_queue.h"
#include "resolver_config.h"
#include "upstream.h"

namespace pvs::resolver {

// Counters for the log and tests.
struct Stats {
  std::atomic<std::uint64_t> queries{0};
  std::atomic<std::uint64_t> answered{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> limited{0};      // dropped: over the source's budget or queue
  std::atomic<std::uint64_t> outsider{0};     // dropped: source outside sandbox_cidr
  std::atomic<std::uint64_t> tcp_refused{0};  // connections closed at once (cidr or caps)
  std::atomic<std::uint64_t> log_lines{0};    // ELOG lines sent to the agent
  std::atomic<std::uint64_t> log_failed{0};   // of them, not taken (an error or no reply)
};

class Resolver {
 public:
  explicit Resolver(ResolverConfig config);
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Binds udp and tcp on listen:port (IP_FREEBIND: the bridge may come up later); port 0 picks
  // a free port (tests), see port().
  Status open();
  std::uint16_t port() const { return config_.port; }
  // Starts the event loop thread; stop() ends it.
  Status start();
  void stop();
  const Stats& stats() const { return stats_; }
  // Sends the egress log's aggregates of every window now, not at their windows' ends
  // (SIGUSR1); any thread.
  void flush_egress_log() { flush_all_ = true; }

 private:
  struct Job {
    Ipv4Address source;
    dns::Query query;
    std::uint64_t tcp = 0;  // the TCP client to answer; 0: UDP
    sockaddr_in from{};     // UDP
    std::string entry;      // the list entry ASK matched
  };
  struct TcpClient {
    UniqueFd fd;
    Ipv4Address source;
    std::vector<std::uint8_t> in;
    std::vector<std::uint8_t> out;
    std::int64_t idle_deadline_ms = 0;
  };

  void loop();
  void read_udp();
  void accept_tcp();
  void read_tcp(std::uint64_t id);
  void write_tcp(TcpClient& c);
  void close_tcp(std::uint64_t id);
  // A query arrived: budget, checks, then the FairQueue.
  void intake(Ipv4Address source, std::span<const std::uint8_t> wire, std::uint64_t tcp,
              const sockaddr_in& from);
  bool admit(Ipv4Address source);  // the per-source token bucket (queries_per_second)
  void start_job(std::uint64_t id);
  void on_ask(std::uint64_t id, Result<proto::Reply> asked);
  void on_upstream(std::uint64_t id, Result<dns::Response> response);
  void on_pair(std::uint64_t id, Result<proto::Reply> paired, std::vector<dns::Record> records,
               std::uint32_t ttl);
  // Sends `reply` (if any) for job `id`, frees its slot and starts the next query.
  void finish(std::uint64_t id, std::optional<std::vector<std::uint8_t>> reply);
  void send_reply(const Job& job, const std::vector<std::uint8_t>& reply);
  std::vector<std::uint8_t> refuse(const Job& job, dns::Rcode rcode);
  AgentLink& agent();
  // The egress log: a decision on `job` (allowed: with the answer's addresses).
  void log_decision(const Job& job, bool allowed, const std::vector<dns::Record>& answer = {});
  // Sends the aggregates of the windows that ended to the agent (resolver_io.cc's loop).
  void flush_log(std::int64_t now_ms);
  void send_log_line(const proto::EgressLogLine& line);

  ResolverConfig config_;
  UniqueFd udp_;
  UniqueFd tcp_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> flush_all_{false};
  std::thread thread_;
  std::unique_ptr<Upstream> upstream_;
  std::vector<std::unique_ptr<AgentLink>> agents_;
  FairQueue fair_;
  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uint64_t, Job> jobs_;  // running and queued
  std::deque<std::uint64_t> runnable_;           // given a slot by finish(), to start
  std::unordered_map<std::uint64_t, std::unique_ptr<TcpClient>> tcp_clients_;
  std::unordered_map<std::uint32_t, std::uint32_t> tcp_per_source_;
  struct Bucket {
    double tokens = 0;
    std::int64_t last_ms = 0;
  };
  std::unordered_map<std::uint32_t, Bucket> buckets_;
  std::unique_ptr<EgressLog> log_;                 // null: egress_log off
  std::vector<proto::EgressLogLine> first_lines_;  // sent by the next flush_log
  Stats stats_;
};

}  // namespace pvs::resolver
