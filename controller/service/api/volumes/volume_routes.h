// Volumes (docs/api.md "Volumes"): named disks of a token that outlive its sandboxes.
// POST /v1/volumes {"name","size_gb","node"} makes one (201), GET /v1/volumes lists the caller's
// (an admin's: all), GET/DELETE /v1/volumes/{id} shows or deletes one (409 while a sandbox holds
// it), POST /v1/volumes/{id}/resize {"size_gb"} grows it. A create mounts them by name or id
// ("volumes" in POST /v1/sandboxes). Needs only the Manager and the reply helpers.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/auth.h"
#include "http/json.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "pvesandbox/manager.h"

namespace pvs::service {

class VolumeRoutes {
 public:
  // `manager` returns the Manager or throws ApiError 503 (starting).
  using ManagerSource = std::function<std::shared_ptr<Manager>()>;
  VolumeRoutes(ManagerSource manager, Replies& replies)
      : manager_(std::move(manager)), replies_(replies) {}

  void create(RequestContext& ctx);
  void list(RequestContext& ctx);
  void show(RequestContext& ctx);
  void remove(RequestContext& ctx);
  void resize(RequestContext& ctx);

 private:
  VolumeInfo find(RequestContext& ctx);  // the caller's volume {id}, else 404
  ManagerSource manager_;
  Replies& replies_;
};

// One volume as JSON.
void write_volume(JsonWriter& w, const VolumeInfo& v);
// The caller's own volume with this id or name (an admin: anyone's by id), if any.
std::optional<VolumeInfo> find_volume(const std::vector<VolumeInfo>& all, const std::string& ref,
                                      const Principal& who);
// A create's mounts with each name replaced by the id of the caller's volume of that name
// (ApiError 400 for none); ids are kept (the Manager checks their owner).
std::vector<VolumeMount> resolve_volumes(Manager& manager, const Principal& who,
                                         std::vector<VolumeMount> mounts);

}  // namespace pvs::service
