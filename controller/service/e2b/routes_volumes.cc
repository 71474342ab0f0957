// E2B's volumes (docs/e2b.md "Volumes"), on the controller's volumes (pvesandbox/volumes.h):
// POST /volumes {name} makes one of volumes.default_size_gb for the key's token (201
// VolumeAndToken), GET /volumes lists the token's, GET /volumes/{volumeID} shows one (404: the
// SDK's VolumeNotFoundError), DELETE /volumes/{volumeID} deletes one (204; 404, which the SDK
// reads as false; 409 while a sandbox holds it). Sandbox.create's volumeMounts mount them by
// name. The reply's token is the volume's for the content plane (routes_volume_content.cc).
#include "e2b/control_wire.h"
#include "e2b/e2b_routes.h"
#include "http/json.h"
#include "policy/canonical.h"

namespace pvs::service {
namespace {

// Volume (list) or VolumeAndToken (with `token`).
std::string volume_json(const VolumeInfo& v, const std::string* token) {
  JsonWriter w;
  w.begin_object().key("volumeID").value(v.id).key("name").value(v.name);
  if (token) w.key("token").value(*token);
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
    auto made = d_.create_volume_for(*ctx.principal, *name);
    const std::string token = volume_token(made);
    d_.replies.send_json(ctx, 201, volume_json(made, &token));
  });
}

void E2bRoutes::volume_list(RequestContext& ctx) {
  control(ctx, [&] {
    JsonWriter w;
    w.begin_array();
    for (const auto& v : d_.volumes_for(*ctx.principal)) w.raw(volume_json(v, nullptr));
    d_.replies.send_json(ctx, 200, w.end_array().take());
  });
}

void E2bRoutes::volume_show(RequestContext& ctx) {
  control(ctx, [&] {
    auto v = own_volume(d_.volumes_for(*ctx.principal), *ctx.principal, ctx.params.at("id"));
    const std::string token = volume_token(v);
    d_.replies.send_json(ctx, 200, volume_json(v, &token));
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

e2b::VolumeHelpers& E2bRoutes::volume_helpers() {
  std::call_once(helpers_once_, [this] {
    e2b::VolumeHelpers::Deps deps;
    deps.volumes = d_.volumes_for;
    deps.sandbox_for = d_.sandbox_for;
    deps.destroy = d_.destroy;
    // A helper is a create of the caller's: judged by the policy and counted as one.
    deps.create = [this](const Principal& who, const CreateRequest& r) {
      PolicyRequest asked;
      asked.action = PolicyAction::kSandboxCreate;
      asked.cpus = r.cpus;
      asked.memory_mb = r.memory_mb;
      asked.disk_gb = r.disk_gb;
      asked.canonical = canonical_create(r, Egress::off());
      admit(who, "", asked);
      return d_.create_for(who, r, Egress::off());
    };
    helpers_ = std::make_unique<e2b::VolumeHelpers>(std::move(deps));
    helpers_made_ = true;
  });
  return *helpers_;
}

// Before the first content call there is no helper, and no reaper thread is started for a
// create that only mounts volumes.
void E2bRoutes::release_volume_helpers(const std::vector<std::string>& volume_ids) {
  if (helpers_made_) volume_helpers().release(volume_ids);
}

}  // namespace pvs::service
