// Fuzzes the agent's request parser: whatever the bytes, parse_request() must return a value
// or an error without crashing, and anything it accepts must survive a format/parse round trip;
// the same for the resolver's ELOG lines (parse_egress_log).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "pvesandbox/common/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  auto request = pvs::proto::parse_request(line);
  if (request) {
    auto again = pvs::proto::parse_request(pvs::proto::format_request(*request));
    if (!again || !(*again == *request)) std::abort();
  } else {
    // Every error must map to a reply the agent can send.
    auto reply = pvs::proto::format_error(pvs::proto::reply_code_for(request.error()),
                                          request.error().message);
    if (!pvs::proto::parse_reply(reply)) std::abort();
  }
  if (auto log = pvs::proto::parse_egress_log(line)) {
    auto again = pvs::proto::parse_egress_log(pvs::proto::format_egress_log(*log));
    if (!again || !(*again == *log)) std::abort();
  }
  return 0;
}
