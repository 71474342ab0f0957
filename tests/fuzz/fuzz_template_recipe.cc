// Fuzzes the template recipe parser (POST /v1/templates takes it from any admin caller):
// whatever the text, no crash and no exception; a recipe that parses has a digest, and its
// canonical form (JSON, also a recipe) parses back to the same digest.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "pvesandbox/template_recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = pvs::parse_recipe(text, "fuzz");
  if (!r) {
    if (r.error().message.empty()) std::abort();
    return 0;
  }
  auto again = pvs::parse_recipe(r->canonical(), "canonical");
  if (!again || again->digest() != r->digest()) std::abort();
  return 0;
}
