// pve-sandbox-resolver: DNS for sandboxes in allowlist mode (docs/architecture.md "Egress by
// domain"). A query from a sandbox is answered only for names on its list (ASK), and only after
// the agent holds the (sandbox . address . port) pairs of the answer (PAIR): the first
// connection never races the set. Everything else is REFUSED.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "agent_link.h"
#include "dns_message.h"
#include "resolver_config.h"

namespace pvs::resolver {

// Counters for the log and tests.
struct Stats {
  std::atomic<std::uint64_t> queries{0};
  std::atomic<std::uint64_t> answered{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> limited{0};  // dropped: over the source's query budget
};

class Resolver {
 public:
  explicit Resolver(ResolverConfig config) : config_(std::move(config)) {}
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Binds udp and tcp on listen:port (IP_FREEBIND: the bridge may come up later).
  Status open();
  // Starts the worker threads; stop() ends them.
  void start();
  void stop();

  // The answer to one query from `source`; nullopt: send nothing. `tcp` allows larger answers.
  std::optional<std::vector<std::uint8_t>> answer(Ipv4Address source,
                                                  std::span<const std::uint8_t> wire,
                                                  AgentLink& link, bool tcp);
  const Stats& stats() const { return stats_; }

 private:
  // The per-source query budget (token bucket, queries_per_second, burst twice that).
  bool admit(Ipv4Address source);
  Result<dns::Response> ask_upstream(const std::string& name);
  Result<dns::Response> ask_upstream_tcp(std::pair<Ipv4Address, std::uint16_t> upstream,
                                         const std::vector<std::uint8_t>& query);
  void udp_loop();
  void tcp_loop();
  void tcp_client(int fd, Ipv4Address source);

  ResolverConfig config_;
  UniqueFd udp_;
  UniqueFd tcp_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint32_t> tcp_clients_{0};
  std::vector<std::thread> threads_;
  struct Bucket {
    double tokens = 0;
    std::int64_t last_ms = 0;
  };
  std::mutex buckets_mutex_;
  std::unordered_map<std::uint32_t, Bucket> buckets_;
  Stats stats_;
};

}  // namespace pvs::resolver
