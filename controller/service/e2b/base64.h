// Base64 as protobuf's JSON mapping uses it for `bytes`: written in the standard alphabet with
// padding; read in the standard or the URL-safe alphabet, padded or not.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pvs::service::e2b {

std::string base64_encode(std::string_view bytes);
// nullopt for a character outside both alphabets, a misplaced '=', or a length that is 1
// modulo 4 (after padding is removed).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace pvs::service::e2b
