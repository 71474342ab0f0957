// The public endpoints (room api/fleet/): GET /v1/health (the peers' state, details for a valid
// token), GET /v1/openapi.json (docs/openapi.json, compiled in) and GET /metrics (Prometheus
// text). A handler class with narrow dependencies: the Manager (null until it is there), the
// token store (health's details), the metrics and the reply helpers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "core/observability/metrics.h"
#include "http/auth.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "pvesandbox/manager.h"

namespace pvs::service {

class SystemRoutes {
 public:
  // `manager` returns the Manager, or null while the controller starts.
  using ManagerSource = std::function<std::shared_ptr<Manager>()>;
  SystemRoutes(ManagerSource manager, const TokenStore& tokens, Metrics* metrics, Replies& replies)
      : manager_(std::move(manager)), tokens_(tokens), metrics_(metrics), replies_(replies) {}

  void health(RequestContext& ctx);
  void openapi(RequestContext& ctx);
  void metrics_text(RequestContext& ctx);

 private:
  ManagerSource manager_;
  const TokenStore& tokens_;
  Metrics* metrics_;
  Replies& replies_;
  // /v1/health asks Proxmox and the agent; its answer is reused for a second (it is public).
  std::mutex health_mu_;  // one refresh at a time; guards the three below
  std::chrono::steady_clock::time_point health_at_{};
  Health health_;
  std::uint64_t health_live_ = 0;
};

}  // namespace pvs::service
