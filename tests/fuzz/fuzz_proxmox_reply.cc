// Fuzzes the decoding of Proxmox VE answers (controller/src/proxmox/decode.h): anyone between
// the controller and the API, or a broken or newer server, may send any bytes. The first byte
// picks the HTTP status class and the endpoint decoder; the rest is the body. Whatever the
// bytes: no crash, no exception, a value or an error with a message.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "proxmox/decode.h"

namespace {

namespace decode = pvs::pve::decode;

template <typename R>
void check(const R& result) {
  if (!result && result.error().message.empty()) std::abort();  // every error says something
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const int kStatuses[] = {200, 400, 403, 500, 501, 595, 596, 302};
  int status = kStatuses[data[0] & 7];
  int total = -1;
  auto envelope = decode::envelope(status, (data[0] & 8) ? "" : "Reason", body, &total);
  check(envelope);
  if (!envelope) return 0;
  const auto& v = *envelope;
  switch ((data[0] >> 4) % 14) {
    case 0: check(decode::next_id(v)); break;
    case 1: check(decode::resources(v)); break;
    case 2: check(decode::containers(v)); break;
    case 3: check(decode::status(v)); break;
    case 4: check(decode::config(v)); break;
    case 5: check(decode::interfaces(v)); break;
    case 6: check(decode::snapshots(v)); break;
    case 7: check(decode::pools(v)); break;
    case 8: check(decode::one_pool(v)); break;
    case 9: check(decode::task_status(v)); break;
    case 10: check(decode::task_log(v)); break;
    case 11: check(decode::upid(v)); break;
    case 12: check(decode::rrddata(v)); break;
    default: (void)decode::json_text(v); break;
  }
  return 0;
}
