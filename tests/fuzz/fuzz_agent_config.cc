// Fuzzes the agent's configuration parser (the strict YAML reader under it): whatever the text,
// no crash, no exception; an error names the file; a configuration that parses is usable (a
// sandbox CIDR with a gateway inside it, someone allowed to connect).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = pvs::agent::parse_config(text, "fuzz.yaml");
  if (!c) {
    if (c.error().message.rfind("fuzz.yaml", 0) != 0) std::abort();
    return 0;
  }
  if (!c->sandbox_cidr.contains(c->gateway)) std::abort();
  if (c->allowed_uids.empty() && c->allowed_gids.empty()) std::abort();
  return 0;
}
