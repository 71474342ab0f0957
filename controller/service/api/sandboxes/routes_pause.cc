// Pause and resume (docs/design/pause.md): POST /v1/sandboxes/{id}/pause {"mode"} stops the
// container with its disk kept; POST .../resume {"ttl_seconds"} starts it again and answers
// once its SSH does. Both answer the sandbox as show does.
#include "api/sandboxes/sandbox_routes.h"
#include "http/requests.h"

namespace pvs::service {

void SandboxRoutes::pause(RequestContext& ctx) {
  auto mode = parse_pause(d_.replies.json_body(ctx));
  if (!mode) throw mode.error();
  ctx.params_json =
      std::string("{\"mode\":\"") + (*mode == PauseMode::kMemory ? "memory" : "filesystem") + "\"}";
  auto sandbox = d_.sandboxes.find(ctx);
  if (auto st = sandbox->pause(*mode); !st) throw from_error(st.error());
  d_.replies.send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void SandboxRoutes::resume(RequestContext& ctx) {
  auto ttl = parse_resume(d_.replies.json_body(ctx), d_.config);
  if (!ttl) throw ttl.error();
  ctx.params_json = "{\"ttl_seconds\":" + std::to_string(*ttl) + "}";
  auto sandbox = d_.sandboxes.find(ctx);
  if (auto st = sandbox->resume(std::chrono::seconds(*ttl)); !st) throw from_error(st.error());
  d_.replies.send_json(ctx, 200, sandbox_json(sandbox->info()));
}

}  // namespace pvs::service
