// What a sandbox used over time as the API shows it (docs/api.md "Usage"): the JSON of
// GET /v1/sandboxes/{id}/usage?since=&until= (its window: parse_usage_window, http/requests.h).
//
//   auto window = parse_usage_window(ctx.query_value("since"), ctx.query_value("until"));
//   replies.send_json(ctx, 200, usage_json(*sandbox->usage(window->since, window->until)));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pvesandbox/usage.h"

namespace pvs::service {

// {"samples":[{"time","cpu","cpus","mem","maxmem","disk","maxdisk","live"}]}: oldest first,
// `cpu` the share of `cpus` in use (0..1), sizes in bytes.
std::string usage_json(const std::vector<UsageSample>& samples);

}  // namespace pvs::service
