// The usage window and its JSON (usage_view.h).
#include "api/sandboxes/usage_view.h"

#include <charconv>

#include "http/json.h"

namespace pvs::service {

ApiResult<UsageWindow> parse_usage_window(std::string_view since, std::string_view until) {
  UsageWindow w;
  auto read = [](std::string_view text, std::int64_t* out) {
    if (text.empty()) return true;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return ec == std::errc() && end == text.data() + text.size() && *out >= 0;
  };
  if (!read(since, &w.since))
    return tl::unexpected(bad_request("since: unix seconds (a non-negative integer)"));
  if (!read(until, &w.until))
    return tl::unexpected(bad_request("until: unix seconds (a non-negative integer)"));
  if (w.since > w.until) return tl::unexpected(bad_request("since: after until"));
  return w;
}

std::string usage_json(const std::vector<UsageSample>& samples) {
  JsonWriter w;
  w.begin_object().key("samples").begin_array();
  for (const auto& s : samples) {
    w.begin_object()
        .key("time")
        .value(s.time)
        .key("cpu")
        .value(s.cpu)
        .key("cpus")
        .value(s.cpus)
        .key("mem")
        .value(s.mem)
        .key("maxmem")
        .value(s.maxmem)
        .key("disk")
        .value(s.disk)
        .key("maxdisk")
        .value(s.maxdisk)
        .key("live")
        .value(s.live)
        .end_object();
  }
  w.end_array().end_object();
  return w.take();
}

}  // namespace pvs::service
