// Fuzzes the sandbox description decoder that recovery runs on every container's description
// (anyone with VM.Config.Options on a container can edit it). Whatever the text: no crash, no
// exception; a description that decodes survives an encode/decode round trip unchanged.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "pvesandbox/sandbox_metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto decoded = pvs::decode_description(text);
  if (!decoded) {
    if (decoded.error().message.empty()) std::abort();
    return 0;
  }
  auto again = pvs::decode_description(pvs::encode_description(*decoded));
  if (!again || !(*again == *decoded)) std::abort();
  return 0;
}
