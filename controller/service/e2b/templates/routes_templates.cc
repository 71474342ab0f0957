// E2B's template build calls (docs/e2b.md, "Template builds"): Template.build(...) of the SDK
// onto pve-sandbox's recipes and Manager::build_template. The calls need an admin token's key
// (a build changes the node, as POST /v1/templates does); the upload link the SDK is given is
// served here too, under /e2b/template-uploads/<one-time token>.
#include <algorithm>

#include "e2b/control_wire.h"
#include "e2b/e2b_routes.h"
#include "e2b/templates/template_builds.h"
#include "http/json.h"

namespace pvs::service {
namespace {

const std::string& template_param(RequestContext& ctx) {
  const std::string& id = ctx.params.at("id");
  if (!valid_template_name(id))
    throw bad_request("templateID \"" + id.substr(0, 64) + "\": not a template name");
  return id;
}

const std::string& build_param(RequestContext& ctx) {
  const std::string& id = ctx.params.at("bid");
  if (!e2b::is_build_id(id)) throw not_found("no build " + id.substr(0, 64));
  return id;
}

// The scheme and Host the SDK reached the controller at: where it is to upload.
std::string reached_at(RequestContext& ctx, bool tls) {
  std::string host = ctx.request->getHost();
  bool ok =
      !host.empty() && host.size() <= 255 && std::all_of(host.begin(), host.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
               c == '[' || c == ']';
      });
  if (!ok) throw bad_request("the request's Host header is not a host name");
  return std::string(tls ? "https://" : "http://") + host;
}

}  // namespace

e2b::TemplateBuilds& E2bRoutes::builds() {
  std::call_once(builds_once_, [this] {
    builds_ = std::make_shared<e2b::TemplateBuilds>(
        [this](const TemplateRecipe& r, const BuildOutput& out) -> Result<TemplateBuild> {
          if (!d_.build_template)
            return fail(ErrorCode::kUnavailable, "template builds are not served here");
          return d_.build_template(r, out);
        });
  });
  return *builds_;
}

void E2bRoutes::admin_only(RequestContext& ctx) {
  if (!ctx.principal->admin)
    throw from_error(Error{ErrorCode::kPermissionDenied,
                           "template builds change the node: they need the key of an admin token"});
}

void E2bRoutes::template_request(RequestContext& ctx) {
  control(ctx, [&] {
    admin_only(ctx);
    auto req = e2b::parse_build_request(d_.replies.json_body(ctx));
    if (!req) throw req.error();
    auto id = builds().request(req->name);
    if (!id) throw id.error();
    d_.replies.send_json(ctx, 202, e2b::build_request_reply(req->name, *id));
  });
}

void E2bRoutes::template_files(RequestContext& ctx) {
  control(ctx, [&] {
    admin_only(ctx);
    const std::string& id = template_param(ctx);
    const std::string& hash = ctx.params.at("hash");
    if (!e2b::is_files_hash(hash)) throw bad_request("hash: must be 64 hex digits");
    auto link = builds().upload_link(id, hash);
    if (!link) throw link.error();
    std::string url;
    if (!link->present)
      url = reached_at(ctx, !d_.config.tls_cert_file.empty()) + "/e2b/template-uploads/" +
            link->token;
    d_.replies.send_json(ctx, 201, e2b::upload_link_reply(link->present, url));
  });
}

// No API key: the SDK sends only the link's own headers. The token in the path is the key
// (32 random bytes, one upload, an hour).
void E2bRoutes::template_upload(RequestContext& ctx) {
  try {
    const std::string& token = ctx.params.at("token");
    if (!builds().expects(token)) throw not_found("no such upload (a link is good for one)");
    auto stored = builds().upload(token, d_.replies.read_body(ctx, 16 << 20));
    if (!stored) throw stored.error();
    d_.replies.send_empty(ctx, 200);
  } catch (const ApiError& e) {
    if (ctx.responded) throw;
    ctx.error = e;
    d_.replies.send_bytes(ctx, e.status, "application/json", e2b::e2b_error_body(e));
  }
}

void E2bRoutes::template_start(RequestContext& ctx) {
  control(ctx, [&] {
    admin_only(ctx);
    const std::string& id = template_param(ctx);
    const std::string& bid = build_param(ctx);
    auto params = [&](const std::string& digest) {
      JsonWriter p;
      p.begin_object().key("name").value(id).key("build_id").value(bid);
      if (!digest.empty()) p.key("digest").value(digest);
      return p.end_object().take();
    };
    ctx.params_json = params("");
    auto start = e2b::parse_build_start(d_.replies.json_body(ctx));
    if (!start) throw start.error();
    const std::string& base = start->from_template;
    if (!base.empty() && base != e2b::kDefaultTemplate &&
        !(d_.is_custom_template && d_.is_custom_template(base)))
      throw bad_request("fromTemplate \"" + base + "\": no such template (GET /v1/templates)");
    auto mapped = e2b::map_build(
        id, *start, [&](const std::string& hash) { return builds().archive(id, hash); });
    if (!mapped) throw mapped.error();
    ctx.params_json = params(mapped->recipe.digest());
    // The outcome is audited on its own when the build ends (as POST /v1/templates' is).
    AuditRecord end;
    end.request_id = ctx.request_id;
    end.token = ctx.principal->name;
    end.remote = ctx.request->clientAddress().host().toString();
    end.action = "e2b.template.built";
    end.params_json = ctx.params_json;
    auto started = std::chrono::steady_clock::now();
    auto done = [this, end, started](const e2b::MappedBuild&, const Result<TemplateBuild>& r) {
      AuditRecord rec = end;
      rec.status = 200;
      if (!r) {
        ApiError e = from_error(r.error());
        rec.status = e.status;
        rec.error_code = e.code;
        rec.error_message = e.message.substr(0, e.message.find('\n'));
      }
      rec.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - started)
                            .count();
      if (d_.audit) d_.audit(rec);
    };
    auto st = builds().start(id, bid, std::move(*mapped), std::move(done));
    if (!st) throw st.error();
    d_.replies.send_empty(ctx, 202);
  });
}

// Template.exists(name): any key may ask (creates from a custom template are any token's).
void E2bRoutes::template_alias(RequestContext& ctx) {
  control(ctx, [&] {
    const std::string& alias = ctx.params.at("alias");
    bool known =
        alias == e2b::kDefaultTemplate ||
        (valid_template_name(alias) && d_.is_custom_template && d_.is_custom_template(alias));
    if (!known) throw not_found("no template \"" + alias.substr(0, 64) + "\"");
    JsonWriter w;
    w.begin_object().key("templateID").value(alias).key("public").value(false).end_object();
    d_.replies.send_json(ctx, 200, w.take());
  });
}

void E2bRoutes::template_status(RequestContext& ctx) {
  control(ctx, [&] {
    admin_only(ctx);
    const std::string& id = template_param(ctx);
    const std::string& bid = build_param(ctx);
    auto q = e2b::parse_status_query(ctx.query);
    if (!q) throw q.error();
    auto v = builds().status(id, bid, *q);
    if (!v) throw v.error();
    d_.replies.send_json(ctx, 200, e2b::build_status_reply(*v));
  });
}

}  // namespace pvs::service
