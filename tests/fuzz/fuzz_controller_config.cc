// Fuzzes the controller's configuration parser (the strict YAML reader under it): whatever the
// text, no crash, no exception, no hang; an error names the file; a configuration that parses
// never shows its secret in describe().
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "core/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::map<std::string, std::string> env = {{"PVS_SECRET", "fuzz-secret-value"}};
  std::string text(reinterpret_cast<const char*>(data), size);
  auto c = pvs::service::parse_config(text, "fuzz.yaml", &env);
  if (!c) {
    if (c.error().message.rfind("fuzz.yaml", 0) != 0) std::abort();
    return 0;
  }
  if (pvs::service::describe(*c).find("fuzz-secret-value") != std::string::npos) std::abort();
  return 0;
}
