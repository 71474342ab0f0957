#include "api/volumes/volume_routes.h"

#include "http/api_error.h"
#include "pvesandbox/common/text.h"

namespace pvs::service {

namespace {

ApiResult<VolumeRequest> parse_volume(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  VolumeRequest r;
  if (auto v = body->string("name", 63)) {
    if (!valid_volume_name(*v))
      body->reject("name", "must be 1-63 of [a-z0-9_-], a letter or digit first");
    r.name = *v;
  } else if (!body->finish()) {
    body->reject("name", "required");
  }
  if (auto v = body->integer("size_gb", 1, 65536)) r.size_gb = static_cast<int>(*v);
  if (auto v = body->string("node", 63)) r.node = *v;
  return finish(*body, std::move(r));
}

std::string volume_id_param(RequestContext& ctx) {
  const std::string& id = ctx.params.at("id");
  if (!valid_volume_id(id)) throw bad_request("not a volume id (vol- and 12 hex digits)");
  return id;
}

}  // namespace

void write_volume(JsonWriter& w, const VolumeInfo& v) {
  w.begin_object();
  w.key("id").value(v.id).key("name").value(v.name).key("owner").value(v.owner);
  w.key("size_gb").value(v.size_gb).key("node").value(v.node).key("storage").value(v.storage);
  w.key("holder_vmid").value(v.holder_vmid).key("created_at").value(v.created_at);
  w.key("mounted_by");
  if (v.mounted_by.empty())
    w.null();
  else
    w.value(v.mounted_by);
  w.end_object();
}

std::optional<VolumeInfo> find_volume(const std::vector<VolumeInfo>& all, const std::string& ref,
                                      const Principal& who) {
  const bool by_id = valid_volume_id(ref);
  for (const auto& v : all) {
    if (by_id ? v.id != ref : v.name != ref) continue;
    if (v.owner == who.name || (by_id && who.admin)) return v;
  }
  return std::nullopt;
}

std::vector<VolumeMount> resolve_volumes(Manager& manager, const Principal& who,
                                         std::vector<VolumeMount> mounts) {
  if (mounts.empty()) return mounts;
  const auto all = manager.volumes();
  for (auto& m : mounts) {
    if (valid_volume_id(m.volume)) continue;
    auto v = find_volume(all, m.volume, who);
    if (!v) throw bad_request("volumes: no volume " + pvs::quoted(m.volume, 64));
    m.volume = v->id;
  }
  return mounts;
}

VolumeInfo VolumeRoutes::find(RequestContext& ctx) {
  auto v = find_volume(manager_()->volumes(), volume_id_param(ctx), *ctx.principal);
  if (!v) throw not_found("no volume " + ctx.params.at("id"));
  return *v;
}

void VolumeRoutes::create(RequestContext& ctx) {
  auto manager = manager_();
  auto r = parse_volume(replies_.json_body(ctx));
  if (!r) throw r.error();
  JsonWriter p;
  p.begin_object().key("name").value(r->name).key("size_gb").value(r->size_gb);
  ctx.params_json = p.end_object().take();
  r->owner = ctx.principal->name;
  auto made = manager->create_volume(*r);
  if (!made) throw from_error(made.error());
  JsonWriter w;
  write_volume(w, *made);
  ctx.response->set("Location", "/v1/volumes/" + made->id);
  replies_.send_json(ctx, 201, w.take());
}

void VolumeRoutes::list(RequestContext& ctx) {
  JsonWriter w;
  w.begin_object().key("volumes").begin_array();
  for (const auto& v : manager_()->volumes())
    if (ctx.principal->admin || v.owner == ctx.principal->name) write_volume(w, v);
  replies_.send_json(ctx, 200, w.end_array().end_object().take());
}

void VolumeRoutes::show(RequestContext& ctx) {
  JsonWriter w;
  write_volume(w, find(ctx));
  replies_.send_json(ctx, 200, w.take());
}

void VolumeRoutes::remove(RequestContext& ctx) {
  auto v = find(ctx);
  JsonWriter p;
  ctx.params_json =
      p.begin_object().key("id").value(v.id).key("name").value(v.name).end_object().take();
  if (auto st = manager_()->delete_volume(v.id); !st) throw from_error(st.error());
  replies_.send_empty(ctx, 204);
}

void VolumeRoutes::resize(RequestContext& ctx) {
  auto body = JsonBody::parse(replies_.json_body(ctx));
  if (!body) throw body.error();
  auto size = body->integer("size_gb", 1, 65536);
  if (!size && !body->finish()) body->reject("size_gb", "required");
  if (auto err = body->finish()) throw *err;
  auto v = find(ctx);
  JsonWriter p;
  ctx.params_json =
      p.begin_object().key("id").value(v.id).key("size_gb").value(*size).end_object().take();
  auto grown = manager_()->resize_volume(v.id, static_cast<int>(*size));
  if (!grown) throw from_error(grown.error());
  JsonWriter w;
  write_volume(w, *grown);
  replies_.send_json(ctx, 200, w.take());
}

}  // namespace pvs::service
