// Preview links (port_routes.h): a URL a browser opens without the bearer token, for one port of
// one sandbox, until it expires. The link is a sealed token (http/seal.h) in the path:
// "/v1/previews/pv1.<payload>.<mac>/", its payload the sandbox, the port, the token that made it
// (the link acts for that token: its access to the sandbox is checked at every request, so a
// link ends with the sandbox, the token's removal or the token's loss of the sandbox) and the
// expiry. Nothing is stored: the key (ports.preview_secret, or a random key per process) is what
// makes a link valid. Replies run in an opaque origin (kSandboxCsp), as on the bearer route.
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <ctime>

#include "api/ports/port_routes.h"
#include "http/json.h"
#include "http/seal.h"

namespace pvs::service {

namespace {

constexpr std::string_view kPreviewPrefix = "pv1.";
constexpr std::int64_t kDefaultSeconds = 3600;

struct PreviewLink {
  std::string sandbox;
  std::uint16_t port = 0;
  std::string token;  // the name of the token that made it
  std::int64_t expires = 0;
};

std::string payload_of(const PreviewLink& l) {
  JsonWriter w;
  w.begin_object().key("s").value(l.sandbox).key("p").value(static_cast<int>(l.port));
  w.key("t").value(l.token).key("e").value(l.expires);
  return w.end_object().take();
}

// The link's fields, when `text` is a link this controller sealed.
std::optional<PreviewLink> open_link(const std::string& text, const std::string& key) {
  auto payload = unseal(kPreviewPrefix, text, key);
  if (!payload) return std::nullopt;
  try {
    auto o = Poco::JSON::Parser().parse(*payload).extract<Poco::JSON::Object::Ptr>();
    PreviewLink l;
    l.sandbox = o->getValue<std::string>("s");
    int port = o->getValue<int>("p");
    if (port < 1 || port > 65535 || !is_sandbox_id(l.sandbox)) return std::nullopt;
    l.port = static_cast<std::uint16_t>(port);
    l.token = o->getValue<std::string>("t");
    l.expires = o->getValue<std::int64_t>("e");
    return l;
  } catch (const Poco::Exception&) {
    return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

ApiResult<PreviewRequest> parse_preview_request(std::string_view text, std::int64_t max_seconds) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  PreviewRequest r;
  auto port = body->integer("port", 1, 65535);
  if (!body->has("port")) body->reject("port", "required: the sandbox's port, 1-65535");
  r.port = static_cast<std::uint16_t>(port.value_or(0));
  r.seconds = body->integer("expires_in_seconds", 60, max_seconds);
  if (auto err = body->finish()) return tl::unexpected(*err);
  return r;
}

PortRoutes::PortRoutes(Deps deps) : d_(std::move(deps)), upgrades_(d_.upgrades) {
  if (d_.preview_key.empty()) d_.preview_key = new_seal_key();
}

// POST /v1/sandboxes/{id}/previews {"port": N, "expires_in_seconds": N}
void PortRoutes::make_preview(RequestContext& ctx) {
  auto sandbox = d_.sandboxes.find(ctx);  // the caller may use it
  auto req = parse_preview_request(d_.replies.read_body(ctx, 4096), d_.preview_max_seconds);
  if (!req) throw req.error();
  const int port = req->port;
  auto link = preview_link(*ctx.principal, ctx.sandbox, req->port, req->seconds);
  const std::string url = std::string(ctx.request->secure() ? "https" : "http") + "://" +
                          ctx.request->getHost() + link.path;
  JsonWriter audit;
  audit.begin_object().key("port").value(port).key("expires_at").value(iso_time(link.expires));
  ctx.params_json = audit.end_object().take();
  JsonWriter w;
  w.begin_object().key("sandbox").value(ctx.sandbox).key("port").value(port);
  w.key("path").value(link.path).key("url").value(url);
  w.key("expires_at").value(iso_time(link.expires)).end_object();
  d_.replies.send_json(ctx, 201, w.take());
}

PortRoutes::Preview PortRoutes::preview_link(const Principal& principal, const std::string& sandbox,
                                             std::uint16_t port,
                                             std::optional<std::int64_t> seconds) const {
  PreviewLink link;
  link.sandbox = sandbox;
  link.port = port;
  link.token = principal.name;
  link.expires = static_cast<std::int64_t>(std::time(nullptr)) +
                 seconds.value_or(std::min(kDefaultSeconds, d_.preview_max_seconds));
  return {"/v1/previews/" + seal(kPreviewPrefix, payload_of(link), d_.preview_key) + "/",
          link.expires};
}

// Any proxied method on /v1/previews/{token}/{path...}: public, the link is the credential.
void PortRoutes::preview(RequestContext& ctx) {
  const std::string& text = ctx.params.at("token");
  auto link = open_link(text, d_.preview_key);
  if (!link)
    throw not_found(
        "no such preview link (a link from before a controller restart ends with it "
        "unless ports.preview_secret is set)");
  if (static_cast<std::int64_t>(std::time(nullptr)) > link->expires)
    throw from_error(Error{ErrorCode::kPermissionDenied,
                           "this preview link expired at " + iso_time(link->expires) +
                               ": ask for a new one (POST /v1/sandboxes/{id}/previews)"});
  ctx.principal = d_.tokens.find(link->token);
  if (!ctx.principal)
    throw from_error(Error{ErrorCode::kPermissionDenied,
                           "the token that made this preview link is no longer configured"});
  auto slot = d_.limits.acquire(ctx.principal->name, TokenLimits::Kind::kRequest);
  if (!slot) {
    ctx.response->set("Retry-After", "1");
    throw limit_exceeded("token " + ctx.principal->name + " has too many requests in flight");
  }
  ctx.sandbox = link->sandbox;
  auto sandbox = d_.sandboxes.sandbox_for(*ctx.principal, link->sandbox);
  const std::string prefix = "/v1/previews/" + text;
  auto path = ports::upstream_target_after(ctx.request->getURI(), prefix);
  if (!path) throw path.error();
  forward(ctx, *sandbox, {link->port, *path, prefix, "", true, false});
}

}  // namespace pvs::service
