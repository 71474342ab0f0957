// Internal: named keys -> the bytes an xterm sends for them (see pvesandbox/terminal.h for the
// names).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs::terminal {

// The bytes of one key name, or kInvalidArgument naming it.
Result<std::string> key_bytes(std::string_view name);
// Every fixed key name (C-x and M-x families excluded), for documentation and tests.
std::vector<std::string_view> fixed_key_names();

}  // namespace pvs::terminal
