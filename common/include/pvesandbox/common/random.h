// Secrets from the kernel's CSPRNG: the one source of every token, access token, upload link
// and key the programs mint.
//
//   auto key = pvs::secure_random_bytes(32);   // Result<std::string>
//
// getrandom(2) needs no file descriptor, so running out of them cannot turn it into a weaker
// source (a stream on /dev/urandom that falls back to a clock-seeded generator when the open
// fails would). It fails closed: an error, never fewer or weaker bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <sys/types.h>

#include "pvesandbox/common/error.h"

namespace pvs {

// `n` bytes from getrandom(2) (short reads and EINTR retried); kIo on any other error.
Result<std::string> secure_random_bytes(std::size_t n);

// The same, throwing std::runtime_error naming `what` on failure: for callers whose failure
// ends the request (a 500, nothing minted).
std::string secure_random_or_throw(std::size_t n, std::string_view what);

// `n` random bytes as 2n lower-case hex digits (secure_random_or_throw).
std::string secure_random_hex(std::size_t n, std::string_view what);

namespace random_detail {
// The system call, replaceable by a unit test (a fake that fails or is interrupted).
using GetrandomFn = ssize_t (*)(void* buf, std::size_t len, unsigned flags);
Result<std::string> secure_random_bytes_with(std::size_t n, GetrandomFn getrandom_fn);
}  // namespace random_detail

}  // namespace pvs
