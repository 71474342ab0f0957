// Public endpoints: health, the OpenAPI document, metrics.
#include "api/fleet/system_routes.h"
#include "http/json.h"
#include "http/openapi.h"
#include "pvesandbox/version.h"

namespace pvs::service {

// Public, so it never grows or leaks for strangers: one refresh of the peers' state at a time
// (concurrent callers wait for it and share its answer, cached for a second), and the
// details (peer errors, the number of sandboxes) only for a caller with a valid token.
void SystemRoutes::health(RequestContext& ctx) {
  auto manager = manager_();
  Health h;
  std::uint64_t live = 0;
  if (manager) {
    std::lock_guard refresh(health_mu_);  // single flight; guards health_*
    if (std::chrono::steady_clock::now() - health_at_ >= std::chrono::seconds(1)) {
      health_ = manager->health();
      health_live_ = manager->stats().live;
      health_at_ = std::chrono::steady_clock::now();
    }
    h = health_;
    live = health_live_;
  }
  bool ok = manager && h.proxmox_ok && h.agent_ok;
  int status = ok ? 200 : 503;
  JsonWriter w;
  w.begin_object();
  w.key("status").value(!manager ? "starting" : ok ? "ok" : "degraded");
  const std::string authorization = ctx.request->get("Authorization", "");
  if (manager && !authorization.empty() && tokens_.authenticate(authorization)) {
    w.key("proxmox").begin_object().key("ok").value(h.proxmox_ok);
    if (!h.proxmox_ok) w.key("error").value(h.proxmox_error);
    w.end_object();
    w.key("agent").begin_object().key("ok").value(h.agent_ok);
    if (!h.agent_ok) w.key("error").value(h.agent_error);
    w.end_object();
    w.key("sandboxes").value(live);
  }
  w.key("version").value(std::string(pvs::version()));
  w.end_object();
  replies_.send_json(ctx, status, w.take());
}

void SystemRoutes::openapi(RequestContext& ctx) {
  replies_.send_json(ctx, 200, std::string(openapi_document()));
}

void SystemRoutes::metrics_text(RequestContext& ctx) {
  replies_.send_bytes(ctx, 200, "text/plain; version=0.0.4; charset=utf-8", metrics_->render());
}

}  // namespace pvs::service
