// The port proxy's route transport (docs/design/ports.md, section 10): a node's routes in use
// (RouteTable: one proxy_routes element per sandbox address and port, asked of the node's agent
// with ROUTE when the first connection needs it, refreshed while connections last, UNROUTEd
// with the last), and the TCP connection over one (open_routed_stream, a PortStream).
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "peers.h"
#include "pvesandbox/port_stream.h"

namespace pvs::lifecycle {

class RouteTable {
 public:
  explicit RouteTable(TimedAgent& agent) : agent_(agent) {}
  RouteTable(const RouteTable&) = delete;
  RouteTable& operator=(const RouteTable&) = delete;

  // One user of a route: the element exists while a Lease of it lives (and at most its life
  // after the last keep()).
  class Lease {
   public:
    Lease(RouteTable& table, Ipv4Address address, std::uint16_t port, std::chrono::seconds life);
    ~Lease();  // the last user's end UNROUTEs
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    // Asks the agent again once half the element's life has passed (cheap otherwise). Any
    // thread; a failure is logged, and the connection ends when the element does.
    void keep();

   private:
    RouteTable& table_;
    Ipv4Address address_;
    std::uint16_t port_;
    std::chrono::seconds life_;
    std::atomic<Clock::rep> next_;  // when keep() asks again
  };

  // A lease of (address, port): ROUTE for the first user, nothing more for the others.
  Result<std::unique_ptr<Lease>> acquire(Ipv4Address address, std::uint16_t port,
                                         std::chrono::seconds life);
  std::size_t in_use() const;  // elements held now
  // The agent dropped `address`'s elements (its sandbox was unbound): the next lease of one of
  // its ports asks again, even while an older lease (a connection to the gone sandbox) lives.
  void forget(Ipv4Address address);

 private:
  using Key = std::pair<Ipv4Address, std::uint16_t>;
  struct Entry {
    int users = 0;
    Clock::time_point asked;  // the last ROUTE
  };
  Clock::time_point refresh(const Key& key, std::chrono::seconds life);
  void release(const Key& key);

  TimedAgent& agent_;
  mutable std::mutex mu_;  // held around the agent calls too: a ROUTE never races its UNROUTE
  std::map<Key, Entry> entries_;
};

// A TCP connection to `address`:`options.port` over `lease` (which it keeps and ends with).
// kConnectRefused: nothing accepts connections there; kConnectTimeout; kNetwork.
Result<std::unique_ptr<PortStream>> open_routed_stream(Ipv4Address address,
                                                       const RouteOptions& options,
                                                       std::unique_ptr<RouteTable::Lease> lease,
                                                       std::shared_ptr<void> keep_alive);

}  // namespace pvs::lifecycle
