// From what a caller asks for as `internet` (EgressRequest) to the Egress a sandbox gets: a
// named list resolved from the configuration (egress.lists), then the token's caps
// (auth.tokens[].egress) checked. The same for REST and MCP, at create and at run time.
//
//   auto egress = resolve_egress(request, config, principal.name);
//   if (!egress) throw egress.error();   // 400 (bad names, unknown list), 403 (over the caps)
#pragma once

#include <string>
#include <string_view>

#include "core/config/config.h"
#include "http/api_error.h"
#include "http/requests.h"
#include "policy/policy.h"
#include "pvesandbox/egress.h"

namespace pvs::service {

ApiResult<Egress> resolve_egress(const EgressRequest& request, const ServiceConfig& config,
                                 std::string_view token);

// True if `name` (a name or a "*." wildcard) is covered by the cap entry `allowed`: equal, or
// `allowed` is "*.d" and `name` lies below d (a subdomain, or a wildcard of one).
bool egress_name_covered(std::string_view name, std::string_view allowed);

// What the policy's rules see of an egress (PolicyRequest::internet, egress, egress_names, ...).
void set_policy_egress(PolicyRequest& request, const Egress& egress);

// The effective egress as JSON: false, true, or {"allow": [...], "ports": [...], "list": ...}.
std::string egress_json(const Egress& egress);

}  // namespace pvs::service
