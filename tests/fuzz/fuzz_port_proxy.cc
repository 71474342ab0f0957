// Fuzzes the port proxy's parsers of what a sandbox's service sends back and of the route's
// request-target (controller/service/api/ports/port_proxy.h). A response head that parses has
// a status 100-599 and headers the client may get (names are tokens, no CR, LF or NUL anywhere,
// no hop-by-hop or framing header); a chunked body decodes to the same bytes whether it arrives
// whole or split in two, never to more bytes than it had; a target that passes is a path of
// visible ASCII without a fragment. The listing of /proc/net/tcp parses to ports in order.
#include <cstdint>
#include <string>
#include <string_view>

#include "api/ports/listening.h"
#include "api/ports/port_proxy.h"
#include "fuzz_check.h"

namespace {

using namespace pvs::service::ports;
using pvs::fuzz::require;

bool clean(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
}

void check_head(std::string_view input, std::string_view method) {
  auto head = parse_response_head(input, method);
  if (!head) return;
  require(head->status >= 100 && head->status <= 599);
  require(clean(head->reason));
  for (const auto& [name, value] : head->headers) {
    require(!name.empty() && clean(name) && clean(value));
    require(name.find_first_of(" \t:") == std::string::npos);
    require(!is_hop_by_hop(name, ""));
    std::string lower;
    for (char c : name) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    require(lower != "content-length" && lower != "transfer-encoding");
  }
  if (method == "HEAD") require(head->framing == ResponseHead::Framing::kNone);
}

void check_chunked(std::string_view input, std::size_t split) {
  std::string whole, parts;
  ChunkedDecoder a, b;
  auto n = a.feed(input, &whole);
  auto first = b.feed(input.substr(0, split), &parts);
  bool split_ok = static_cast<bool>(first);
  if (split_ok && !b.done()) {
    auto second = b.feed(input.substr(split), &parts);
    split_ok = static_cast<bool>(second);
    if (second) require(*first + *second == (n ? *n : 0) || !n);
  }
  require(static_cast<bool>(n) == split_ok);
  if (!n) return;
  require(*n <= input.size());
  require(whole == parts && a.done() == b.done());
  require(whole.size() <= input.size());
}

void check_target(std::string_view input) {
  auto t = upstream_target("/v1/sandboxes/sb-0123456789ab/ports/8080" + std::string(input),
                           "sb-0123456789ab", "8080");
  if (!t) return;
  require(!t->empty() && (*t)[0] == '/');
  for (char c : *t) {
    auto u = static_cast<unsigned char>(c);
    require(u > 0x20 && u < 0x7f && c != '#');
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  check_head(input, "GET");
  check_head(input, "HEAD");
  check_chunked(input, size == 0 ? 0 : data[0] % (size + 1));
  check_target(input);
  (void)parse_port(input);
  // /proc/net/tcp{,6} as a sandbox's kernel could print them: every port found is 1-65535,
  // listed once, ascending, each with at least one address.
  auto listening = parse_listening(input, input.substr(input.size() / 2));
  for (std::size_t i = 0; i < listening.size(); ++i) {
    require(listening[i].port != 0 && !listening[i].addresses.empty());
    require(i == 0 || listening[i - 1].port < listening[i].port);
  }
  return 0;
}
