// What a sandbox used over time as the API shows it (docs/api.md "Usage"): the window of
// GET /v1/sandboxes/{id}/usage?since=&until= and its JSON.
//
//   auto window = parse_usage_window(ctx.query_value("since"), ctx.query_value("until"));
//   replies.send_json(ctx, 200, usage_json(*sandbox->usage(window->since, window->until)));
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_error.h"
#include "pvesandbox/usage.h"

namespace pvs::service {

struct UsageWindow {
  std::int64_t since = 0;  // unix seconds; 0: since the sandbox was created
  std::int64_t until = std::numeric_limits<std::int64_t>::max();  // to now, the live sample too
};

// Each empty or unix seconds (a non-negative integer), `since` not after `until`; 400 otherwise.
ApiResult<UsageWindow> parse_usage_window(std::string_view since, std::string_view until);

// {"samples":[{"time","cpu","cpus","mem","maxmem","disk","maxdisk","live"}]}: oldest first,
// `cpu` the share of `cpus` in use (0..1), sizes in bytes.
std::string usage_json(const std::vector<UsageSample>& samples);

}  // namespace pvs::service
