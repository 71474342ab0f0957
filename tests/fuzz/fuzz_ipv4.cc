// Fuzzes the IPv4, CIDR and MAC parsers: accepted text must print back to exactly itself
// (the parsers accept only canonical forms).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/mac_address.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto a = pvs::Ipv4Address::parse(text); a && a->to_string() != text) std::abort();
  if (auto c = pvs::Cidr::parse(text); c && c->to_string() != text) std::abort();
  if (auto m = pvs::MacAddress::parse(text)) {
    auto again = pvs::MacAddress::parse(m->to_string());
    if (!again || *again != *m) std::abort();
  }
  return 0;
}
