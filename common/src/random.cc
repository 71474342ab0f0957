// Secrets from getrandom(2) (random.h).
#include "pvesandbox/common/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace pvs {

namespace random_detail {

Result<std::string> secure_random_bytes_with(std::size_t n, GetrandomFn getrandom_fn) {
  std::string out(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom_fn(out.data() + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return fail(ErrorCode::kIo, std::string("getrandom: ") + std::strerror(errno));
    }
    if (r == 0) return fail(ErrorCode::kIo, "getrandom: returned no bytes");
    got += static_cast<std::size_t>(r);
  }
  return out;
}

}  // namespace random_detail

Result<std::string> secure_random_bytes(std::size_t n) {
  return random_detail::secure_random_bytes_with(
      n, [](void* buf, std::size_t len, unsigned flags) { return ::getrandom(buf, len, flags); });
}

std::string secure_random_or_throw(std::size_t n, std::string_view what) {
  auto bytes = secure_random_bytes(n);
  if (!bytes)
    throw std::runtime_error("no random bytes for " + std::string(what) + ": " +
                             bytes.error().message);
  return std::move(*bytes);
}

std::string secure_random_hex(std::size_t n, std::string_view what) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string raw = secure_random_or_throw(n, what), out;
  out.reserve(2 * n);
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace pvs
