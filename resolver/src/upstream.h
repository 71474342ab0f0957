// The resolver's upstream queries, asynchronous with c-ares (#32): any number in flight on the
// resolver's one event loop, each with its own timeout; the upstreams are tried in order (the
// next when one does not answer in time) and a truncated answer is asked again over TCP (c-ares
// does both).
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dns_message.h"
#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"

struct ares_channeldata;

namespace pvs::resolver {

class Upstream {
 public:
  using Callback = std::function<void(Result<dns::Response>)>;
  static Result<std::unique_ptr<Upstream>> create(
      const std::vector<std::pair<Ipv4Address, std::uint16_t>>& servers, std::uint32_t timeout_ms);
  ~Upstream();
  Upstream(const Upstream&) = delete;
  Upstream& operator=(const Upstream&) = delete;

  // Asks for `name`/A; `done` runs later on the loop (never after the Upstream is gone).
  void query(const std::string& name, Callback done);

  // Event loop: the sockets to poll, then what they reported (also runs the timeouts).
  void add_pollfds(std::vector<pollfd>& out) const;
  void process(const std::vector<pollfd>& fds);
  // Milliseconds until the next timeout; -1: none pending.
  int next_timeout_ms() const;

 private:
  Upstream() = default;
  static void on_socket(void* self, int fd, int readable, int writable);
  ares_channeldata* channel_ = nullptr;
  std::map<int, short> sockets_;  // fd -> poll events
};

}  // namespace pvs::resolver
