// A link with a round trip for ssh_bench (--rtt-ms): a TCP relay on 127.0.0.1 that holds every
// byte for a fixed time before passing it on, each way. It runs in a child process of its own,
// so that its CPU is neither side's in the bench's accounting.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>

namespace ssh_bench {

class DelayProxy {
 public:
  // Relays connections to 127.0.0.1:target_port with `one_way` added in each direction.
  DelayProxy(std::uint16_t target_port, std::chrono::milliseconds one_way);
  ~DelayProxy();  // stops the child
  DelayProxy(const DelayProxy&) = delete;
  DelayProxy& operator=(const DelayProxy&) = delete;

  std::uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace ssh_bench
