// A sandbox's egress log as the API shows it (docs/api.md "Egress log"): the JSON of
// GET /v1/sandboxes/{id}/egress/log, and the names a sandbox was refused, which the MCP tool
// internet returns with its answer and an approval for a wider list shows its person.
//
//   auto filter = parse_egress_log_filter(ctx.query_value("since"), ctx.query_value("limit"));
//   replies.send_json(ctx, 200, egress_log_json(*sandbox->egress_log(), *filter));
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_error.h"
#include "policy/policy.h"
#include "pvesandbox/manager.h"

namespace pvs::service {

struct EgressLogFilter {
  std::int64_t since_ms = 0;  // lines of windows that started at or after this (unix ms)
  std::size_t limit = 100;    // the newest lines, at most this many
};
inline constexpr std::size_t kMaxEgressLogLimit = 1000;

// `since`: empty, or unix milliseconds; `limit`: empty, or 1..kMaxEgressLogLimit. 400 otherwise.
ApiResult<EgressLogFilter> parse_egress_log_filter(std::string_view since, std::string_view limit);

// {"names":[{"name","decision","count","window_start","window_start_ms","entry","addresses"}],
//  "refused":[...], "connections":[{"address","port","protocol","count","first_seen",
//  "last_seen","others"}]}: the filtered lines, oldest first, the names they refused, and the
//  refused connections last seen since `since_ms`, most recent first.
std::string egress_log_json(const EgressLog& log, const EgressLogFilter& filter);

// The names refused in `log`, the most refused first, at most `max` ("*", the names beyond the
// agent's bound, is left out); with `allowed_now`, only those it still refuses.
std::vector<std::string> refused_names(const EgressLog& log, std::size_t max = 20,
                                       const Egress* allowed_now = nullptr);

// The same as one line for people and models: "refused names: a.example (12 times),
// b.example (1 time); connections refused: 203.0.113.9:22/tcp (3 times), other destinations
// (40 times)" (the others: beyond the agent's bound or the node's per-sandbox bucket); empty
// when nothing was refused.
std::string refusals_text(const EgressLog& log, std::size_t max = 20,
                          const Egress* allowed_now = nullptr);

// The sandbox's egress log, or an empty one when the agent cannot say (logged): what a call
// shows beside its answer never fails the call.
EgressLog egress_log_or_empty(Sandbox& sandbox);

// What the policy judges of an internet call (REST and MCP): the egress asked for, and for the
// person an approval asks, the names the sandbox was refused so far (`log`, read once).
PolicyRequest internet_request(const EgressLog& log, const Egress& to);

}  // namespace pvs::service
