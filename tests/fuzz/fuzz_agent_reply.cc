// Fuzzes the controller's side of the agent protocol: reply lines and every payload parser.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "pvesandbox/common/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pvs::proto;
  std::string_view line(reinterpret_cast<const char*>(data), size);
  auto reply = parse_reply(line);
  if (!reply || !reply->ok) return 0;
  const std::string& payload = reply->text;
  (void)parse_hello_payload(payload);
  (void)parse_count_payload(payload);
  (void)parse_status_payload(payload);
  if (auto list = parse_list_payload(payload)) {
    auto again = parse_list_payload(format_list_payload(*list));
    if (!again || *again != *list) std::abort();
  }
  if (auto bindings = parse_bindings_payload(payload)) {
    auto again = parse_bindings_payload(format_bindings_payload(*bindings));
    if (!again || *again != *bindings) std::abort();
  }
  if (auto entries = parse_egresses_payload(payload)) {
    auto again = parse_egresses_payload(format_egresses_payload(*entries));
    if (!again || *again != *entries) std::abort();
  }
  if (auto answer = parse_ask_payload(payload)) {
    auto again = parse_ask_payload(format_ask_payload(*answer));
    if (!again || *again != *answer) std::abort();
  }
  if (auto lines = parse_egress_log_payload(pvs::Ipv4Address(0x0a630007u), payload)) {
    auto again =
        parse_egress_log_payload(pvs::Ipv4Address(0x0a630007u), format_egress_log_payload(*lines));
    if (!again || *again != *lines) std::abort();
  }
  if (auto items = parse_egress_refused_payload(payload)) {
    auto again = parse_egress_refused_payload(format_egress_refused_payload(*items));
    if (!again || *again != *items) std::abort();
  }
  return 0;
}
