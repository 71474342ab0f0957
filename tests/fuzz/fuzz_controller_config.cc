// Fuzzes the controller's configuration parser (the strict YAML reader under it): whatever the
// text, no crash, no exception, no hang; an error names the file; a configuration that parses
// never shows its secret in describe(); its policy decides on the text as a file's path and
// content (content rules: globs, RE2 in multi-line mode, the size bound) without a crash.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "core/config/config.h"
#include "policy/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::map<std::string, std::string> env = {{"PVS_SECRET", "fuzz-secret-value"}};
  std::string text(reinterpret_cast<const char*>(data), size);
  auto c = pvs::service::parse_config(text, "fuzz.yaml", &env);
  if (!c) {
    if (c.error().message.rfind("fuzz.yaml", 0) != 0) std::abort();
    return 0;
  }
  // The secret must not reach the description from the environment; an input that writes the
  // same characters itself (a path, say) shows them, which is no leak.
  if (text.find("fuzz-secret-value") == std::string::npos &&
      pvs::service::describe(*c).find("fuzz-secret-value") != std::string::npos)
    std::abort();
  using pvs::service::PolicyAction;
  pvs::service::PolicyRequest r;
  r.action = PolicyAction::kFilesWrite;
  r.path = text;
  r.content = std::string_view(text);
  (void)c->policy.decide("ci", r);
  (void)c->policy.content_bound("ci", PolicyAction::kFilesEdit, text);
  return 0;
}
