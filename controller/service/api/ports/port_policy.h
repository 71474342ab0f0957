// What the policy sees of a request proxied to a sandbox's port (room api/ports/,
// docs/policy.md "Ports"): the `ports` action, judged once per request (an upgrade: once, before
// it switches) on every surface that proxies, before a byte reaches the sandbox.
//
//   PolicyRequest asked = ports::policy_request(8000, "GET", "/a%20b/../c?x=1", "");
//   // asked.port 8000, asked.path "/c", asked.text "GET /c",
//   // asked.canonical {"method":"GET","port":8000,"target":"/a%20b/../c?x=1","upgrade":""}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/policy.h"

namespace pvs::service::ports {

// The path a rule's `path` glob judges: the target's path (the query left off), percent-decoded
// ("%41" is "A"; a malformed escape stays as written), with "." and ".." segments resolved as
// RFC 3986 5.2.4 removes them, so "/x/..%2Fadmin" is judged as "/admin".
std::string judged_path(std::string_view target);

// The `ports` request: port, path (judged_path), text "<METHOD> <path>" (for `command` rules),
// and the canonical form an approval binds: method, port, the target as sent (query and escapes
// included) and the protocol asked to switch to ("" for a plain request). The sandbox is in
// every approval's digest already (policy/gate.cc).
PolicyRequest policy_request(std::uint16_t port, std::string_view method, std::string_view target,
                             std::string_view upgrade);

}  // namespace pvs::service::ports
