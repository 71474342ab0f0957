// Fuzzes the controller's parser of the agent's EGRESSES payload (egress_wire.h): whatever it
// accepts is a valid list as stored (validate_stored_egress_list), normalised, per address, that
// formats back to an EGRESS line.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "pvesandbox/egress_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view payload(reinterpret_cast<const char*>(data), size);
  auto lists = pvs::egress_wire::parse_egresses_payload(payload);
  if (!lists) return 0;
  for (const auto& [address, list] : *lists) {
    if (!pvs::validate_stored_egress_list(list)) std::abort();
    auto copy = list;
    pvs::normalize_egress_list(copy);
    if (!(copy == list)) std::abort();
    if (pvs::egress_wire::format_egress(address, list).empty()) std::abort();
  }
  return 0;
}
