// TCP on 127.0.0.1 for tests and benchmarks, in the calling thread's network namespace. Each
// returns an empty UniqueFd when the kernel refuses (the caller says what that means).
//
//   std::uint16_t port = 0;
//   pvs::UniqueFd listener = pvs::test::loopback_listen(&port);  // a free port, listening
//   pvs::UniqueFd client = pvs::test::loopback_connect(port);
#pragma once

#include <cstdint>

#include "pvesandbox/common/unique_fd.h"

namespace pvs::test {

// A socket bound to a free port on 127.0.0.1 (written to `*port`), listening with `backlog`;
// backlog 0 leaves it bound but not listening: a port where connections are refused.
UniqueFd loopback_listen(std::uint16_t* port, int backlog = 64);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed).
std::uint16_t free_port();

// A blocking TCP connection to 127.0.0.1:`port`.
UniqueFd loopback_connect(std::uint16_t port);

}  // namespace pvs::test
