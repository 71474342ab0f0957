// The requestState of revision 2026-07-28's multi-round-trip requests, as this server mints it:
// a handle for a tool call that waits for a person's approval. The server answers such a call
// with an InputRequiredResult carrying this state; the client calls again with the same
// arguments and the state, and the server goes on waiting for (or acting on) the same approval
// instead of asking for a new one. Nothing is kept per client between the two calls.
//
// The state passes through the client, so it is attacker-controlled input: it is sealed with
// HMAC-SHA256 under a key only the controller holds (random per process: a restart invalidates
// outstanding states), and binds the approval to the token, the tool and a digest of the
// arguments, with a short expiry. Text form: "v1.<base64url payload>.<base64url mac>".
//
//   auto digest = mcp::arguments_digest(args);
//   std::string s = mcp::seal_state({approval, token, tool, digest, expires}, key);
//   auto st = mcp::open_state(s, key, now);     // error text, or the fields
//   if (st && mcp::state_matches(*st, token, tool, digest)) ... st->approval_id ...
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace pvs::service::mcp {

struct PendingState {
  std::string approval_id;   // "ap-..."
  std::string token;         // the principal's name
  std::string tool;          // the tool's name
  std::string digest;        // arguments_digest() of the call's arguments
  std::int64_t expires = 0;  // Unix seconds
};

// States longer than this are refused unread.
inline constexpr std::size_t kMaxStateBytes = 2048;

// A fresh key: 32 bytes from the OS's random source.
std::string new_state_key();

// The SHA-256 of `arguments_json` (the call's arguments as the client sent them, re-serialised
// by the server), lower-case hex.
std::string arguments_digest(std::string_view arguments_json);

std::string seal_state(const PendingState& state, std::string_view key);

// The state if its seal is this key's and it has not expired at `now` (Unix seconds); else why
// not, in words for the client.
tl::expected<PendingState, std::string> open_state(std::string_view text, std::string_view key,
                                                   std::int64_t now);

// Whether an opened state belongs to this call.
bool state_matches(const PendingState& state, std::string_view token, std::string_view tool,
                   std::string_view digest);

}  // namespace pvs::service::mcp
