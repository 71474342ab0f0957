#include "api/console/console.h"
#include "api/console/console_routes.h"
#include "http/api_error.h"

namespace pvs::service {

void ConsoleRoutes::serve(RequestContext& ctx) {
  ctx.route = "/ui/";  // one metrics label for every file
  for (const auto& [name, value] : console_headers())
    ctx.response->set(std::string(name), std::string(value));
  if (ctx.method != "GET" && ctx.method != "HEAD") {
    ctx.response->set("Allow", "GET, HEAD");
    throw method_not_allowed(ctx.method.substr(0, 16) + " is not allowed here; allowed: GET, HEAD");
  }
  ConsoleReply reply = console_lookup(ctx.path);
  if (reply.status == 308) {
    ctx.response->set("Location", reply.location);
    replies_.send_bytes(ctx, 308, "text/plain; charset=utf-8", "");
    return;
  }
  if (reply.status != 200) throw not_found("no such console file: " + ctx.path.substr(0, 200));
  replies_.send_bytes(ctx, 200, std::string(reply.content_type), reply.body);
}

}  // namespace pvs::service
