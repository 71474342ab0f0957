// GET /ui/...: the web console's files (console.h), with the console's security headers on
// every reply, 404s included. Public: the files hold no data; the console signs in with a
// token against the REST API like any other client.
#include "api/console/console.h"
#include "http/server.h"

namespace pvs::service {

void Api::console(RequestContext& ctx) {
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
    send_bytes(ctx, 308, "text/plain; charset=utf-8", "");
    return;
  }
  if (reply.status != 200) throw not_found("no such console file: " + ctx.path.substr(0, 200));
  send_bytes(ctx, 200, std::string(reply.content_type), reply.body);
}

}  // namespace pvs::service
