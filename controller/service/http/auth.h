// Bearer-token authentication. The configuration holds only SHA-256 hashes of the tokens; a
// request's token is hashed and compared with every stored hash in constant time.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.h"

namespace pvs::service {

// Lower-case hex SHA-256 of `text`.
std::string sha256_hex(std::string_view text);
// The same digest as 32 raw bytes.
std::string sha256_bytes(std::string_view text);
// Equal-length comparison whose time does not depend on where the inputs differ.
bool constant_time_equal(std::string_view a, std::string_view b);
// A fresh random token: 32 bytes from getrandom(2) (secure_random_bytes: fails closed, a
// std::runtime_error, never a weaker source), base64url without padding, after `prefix`.
std::string generate_token(std::string_view prefix = "pvs_");

struct Principal {
  std::string name;
  int max_sandboxes = 0;  // running (and creating) sandboxes it may own at once
  bool admin = false;
  bool approver = false;  // may decide approvals (admins may too)
  int max_paused = 16;    // paused sandboxes it may keep at once
};

class TokenStore {
 public:
  TokenStore(const std::vector<TokenConfig>& tokens, int default_max_sandboxes,
             int default_max_paused = 16);
  // The token of an "Authorization" header value ("Bearer <token>"), or nullopt.
  std::optional<Principal> authenticate(std::string_view authorization) const;
  // The token whose E2B API key (X-API-Key, "e2b_" + hex; TokenConfig::e2b_key_sha256) this
  // is, or nullopt.
  std::optional<Principal> authenticate_e2b_key(std::string_view key) const;
  // The configured token named `name` (a sandbox's owner), or nullopt when there is none (the
  // token was removed from the configuration): callers acting for an owner fail closed.
  std::optional<Principal> find(std::string_view name) const;

 private:
  struct Entry {
    std::string sha256;
    Principal principal;
    std::string e2b_key_sha256;
  };
  std::vector<Entry> entries_;
};

}  // namespace pvs::service
