// Fuzzes the agent's on-disk and config parsers. The first byte picks the parser:
//   's' state snapshot, 'j' journal replay, anything else agent.yaml.
// Whatever the bytes: no crash, no exception, and an accepted snapshot survives a
// format/parse round trip unchanged.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config.h"
#include "state.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0]) {
    case 's': {
      auto state = pvs::agent::parse_state(text);
      if (state) {
        auto again = pvs::agent::parse_state(pvs::agent::format_state(*state));
        if (!again || !(*again == *state)) std::abort();
      }
      break;
    }
    case 'j': {
      pvs::agent::DesiredState state;
      (void)pvs::agent::apply_journal(text, &state);
      auto again = pvs::agent::parse_state(pvs::agent::format_state(state));
      if (!again) std::abort();  // whatever a journal produced must be storable
      break;
    }
    default: (void)pvs::agent::parse_config(text, "fuzz.yaml"); break;
  }
  return 0;
}
