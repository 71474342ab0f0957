// Sealed tokens: a payload the controller hands to a client and takes back later, with
// HMAC-SHA256 under a key only the controller holds, so that what comes back is what it issued.
// Text form: "<prefix><base64url payload>.<base64url mac>" (URL- and header-safe). The payload
// is readable by whoever holds the token: never put a secret in it.
//
//   std::string key = new_seal_key();
//   std::string t = seal("pv1.", R"({"s":"sb-1"})", key);
//   auto payload = unseal("pv1.", t, key);   // the payload, or nullopt
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pvs::service {

// Tokens longer than this are refused unread.
inline constexpr std::size_t kMaxSealedBytes = 2048;

// A fresh key: 32 bytes from the OS's random source.
std::string new_seal_key();

std::string seal(std::string_view prefix, std::string_view payload, std::string_view key);

// The payload when `text` is `prefix` + a payload sealed under `key` (compared in constant
// time); nullopt for anything else, whatever is wrong with it.
std::optional<std::string> unseal(std::string_view prefix, std::string_view text,
                                  std::string_view key);

}  // namespace pvs::service
