// What the port proxy records of each request or upgraded connection (room api/ports/): the
// audit record's params and the pvs_port_* metrics. Shared by routes_ports.cc and
// routes_ports_upgrade.cc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "core/observability/metrics.h"
#include "http/json.h"

namespace pvs::service::ports {

// {"port", "method", "path" (no query, 256 bytes at most), "bytes_in", "bytes_out"}.
inline std::string audit_params(std::uint16_t port, const std::string& method,
                                const std::string& path,
                                std::optional<std::pair<std::uint64_t, std::uint64_t>> bytes) {
  JsonWriter w;
  w.begin_object().key("port").value(static_cast<int>(port)).key("method").value(method);
  w.key("path").value(path.substr(0, std::min<std::size_t>(path.find('?'), 256)));
  if (bytes) w.key("bytes_in").value(bytes->first).key("bytes_out").value(bytes->second);
  w.end_object();
  return w.take();
}

// One proxied request ("http") or upgraded connection ("upgrade") and its bytes each way.
inline void count(Metrics* metrics, const char* kind, std::uint64_t in, std::uint64_t out) {
  if (!metrics) return;
  metrics->inc("pvs_port_requests_total", {{"kind", kind}});
  metrics->inc("pvs_port_bytes_total", {{"direction", "in"}}, static_cast<double>(in));
  metrics->inc("pvs_port_bytes_total", {{"direction", "out"}}, static_cast<double>(out));
}

}  // namespace pvs::service::ports
