// E2B's volumes (docs/e2b.md "Volumes"), on the controller's volumes (pvesandbox/volumes.h):
// POST /volumes {name} makes one of volumes.default_size_gb for the key's token (201
// VolumeAndToken), GET /volumes lists the token's, GET /volumes/{volumeID} shows one (404: the
// SDK's VolumeNotFoundError), DELETE /volumes/{volumeID} deletes one (204; 404, which the SDK
// reads as false; 409 while a sandbox holds it). Sandbox.create's volumeMounts mount them by
// name. The content plane (/volumecontent/{volumeID}/..., E2B_VOLUME_API_URL) answers 501: the
// controller reaches a volume's files only through a sandbox that mounts it; the reply's token
// is "" so that a client sends nothing secret to a content plane elsewhere.
#include "e2b/control_wire.h"
#include "e2b/e2b_routes.h"
#include "http/json.h"

namespace pvs::service {
namespace {

std::string volume_json(const VolumeInfo& v, bool with_token) {
  JsonWriter w;
  w.begin_object().key("volumeID").value(v.id).key("name").value(v.name);
  if (with_token) w.key("token").value("");
  return w.end_object().take();
}

VolumeInfo own_volume(const std::vector<VolumeInfo>& all, const Principal& who,
                      const std::string& id) {
  for (const auto& v : all)
    if (v.id == id && v.owner == who.name) return v;
  throw not_found("no volume " + id.substr(0, 64));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> mounts_of(const SandboxInfo& info,
                                                           const std::vector<VolumeInfo>& volumes) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& m : info.volumes) {
    std::string name = m.volume;
    for (const auto& v : volumes)
      if (v.id == m.volume) name = v.name;
    out.emplace_back(name, m.path);
  }
  return out;
}

void E2bRoutes::volume_create(RequestContext& ctx) {
  control(ctx, [&] {
    auto body = JsonBody::parse(d_.replies.json_body(ctx));
    if (!body) throw body.error();
    auto name = body->string("name", 63);
    if (!name && !body->finish()) body->reject("name", "required");
    if (name && !valid_volume_name(*name))
      body->reject("name", "must be 1-63 of [a-z0-9_-], a letter or digit first");
    if (auto err = body->finish()) throw *err;
    ctx.params_json = "{\"name\":\"" + *name + "\"}";
    d_.replies.send_json(ctx, 201, volume_json(d_.create_volume_for(*ctx.principal, *name), true));
  });
}

void E2bRoutes::volume_list(RequestContext& ctx) {
  control(ctx, [&] {
    JsonWriter w;
    w.begin_array();
    for (const auto& v : d_.volumes_for(*ctx.principal)) w.raw(volume_json(v, false));
    d_.replies.send_json(ctx, 200, w.end_array().take());
  });
}

void E2bRoutes::volume_show(RequestContext& ctx) {
  control(ctx, [&] {
    auto v = own_volume(d_.volumes_for(*ctx.principal), *ctx.principal, ctx.params.at("id"));
    d_.replies.send_json(ctx, 200, volume_json(v, true));
  });
}

void E2bRoutes::volume_delete(RequestContext& ctx) {
  control(ctx, [&] {
    auto v = own_volume(d_.volumes_for(*ctx.principal), *ctx.principal, ctx.params.at("id"));
    ctx.params_json = "{\"volumeID\":\"" + v.id + "\"}";
    d_.delete_volume_for(*ctx.principal, v.id);
    d_.replies.send_empty(ctx, 204);
  });
}

// The content plane's errors are {code: string, message}; no key is asked for (the SDK sends
// its Bearer volume token, "" here, so no header at all).
void E2bRoutes::volume_content(RequestContext& ctx) {
  JsonWriter w;
  w.begin_object().key("code").value("not_implemented");
  w.key("message").value(
      "pve-sandbox does not serve volume contents (docs/e2b.md, Volumes): mount the volume in a "
      "sandbox (volumeMounts) and use sandbox.files at its path");
  ctx.error = ApiError{501, "not_implemented", "volume content plane"};
  d_.replies.send_bytes(ctx, 501, "application/json", w.end_object().take());
}

}  // namespace pvs::service
