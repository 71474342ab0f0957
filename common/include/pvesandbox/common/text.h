// Small helpers for handling untrusted text.
#pragma once

#include <string>
#include <string_view>

namespace pvs {

// Quotes untrusted text for an error or log message: printable ASCII as is, every other byte
// (and `"`, `\`) as \xNN, cut after `max` bytes with "..." so that a 64 KiB line does not become
// a 64 KiB message.
std::string quoted(std::string_view text, std::size_t max = 64);

}  // namespace pvs
