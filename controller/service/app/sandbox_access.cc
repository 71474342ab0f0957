// The Api's side of SandboxOps (sandbox_ops.h): which sandboxes a caller may use, and a new one
// within the token's max_sandboxes (counted with the creates in flight, under the API mutex).
#include "app/api.h"

namespace pvs::service {

std::shared_ptr<Sandbox> Api::sandbox_for(const Principal& principal, const std::string& id) {
  if (!is_sandbox_id(id))
    throw bad_request("not a sandbox id (sb- and 12 hex digits): " + id.substr(0, 64));
  auto manager = require_manager();
  auto sandbox = manager->attach(id);
  if (!sandbox) {
    if (sandbox.error().code == ErrorCode::kNotFound) throw not_found("no sandbox " + id);
    throw from_error(sandbox.error());
  }
  if (!principal.admin && (*sandbox)->info().owner != principal.name) {
    throw not_found("no sandbox " + id);  // others' sandboxes are invisible
  }
  return *sandbox;
}

std::shared_ptr<Sandbox> Api::create_for(const Principal& principal, const CreateRequest& req,
                                         const Egress& egress) {
  auto manager = require_manager();
  const std::string& owner = principal.name;
  {
    std::lock_guard lock(mu_);
    // The Manager keeps a count per owner: no walk over every live sandbox under mu_.
    int owned = creating_[owner] + static_cast<int>(manager->count_owned(owner));
    if (owned >= principal.max_sandboxes) {
      throw limit_exceeded("token " + owner + " already has " + std::to_string(owned) +
                           " sandboxes (limit " + std::to_string(principal.max_sandboxes) + ")");
    }
    ++creating_[owner];
  }
  struct Release {
    Api* api;
    std::string owner;
    ~Release() {
      std::lock_guard lock(api->mu_);
      if (--api->creating_[owner] == 0) api->creating_.erase(owner);
    }
  } release{this, owner};

  CreateOptions options;
  options.hostname = req.hostname;
  options.cpus = req.cpus;
  options.memory_mb = req.memory_mb;
  options.disk_gb = req.disk_gb;
  options.egress = egress;
  options.ttl = std::chrono::seconds(req.ttl_seconds);
  options.pause_on_expiry = req.pause_on_expiry;
  options.auto_resume = req.auto_resume;
  options.labels = req.labels;
  options.owner = owner;
  options.profile = req.profile;
  options.template_name = req.template_name;
  options.node = req.node;
  options.node_selector = req.node_selector;
  auto sandbox = manager->create(options);
  if (!sandbox) throw from_error(sandbox.error());
  return *sandbox;
}

std::vector<SandboxInfo> Api::list_for(const Principal& principal, const Labels& selector) {
  auto manager = require_manager();
  std::vector<SandboxInfo> out;
  for (auto& info : manager->list(selector)) {
    if (principal.admin || info.owner == principal.name) out.push_back(std::move(info));
  }
  return out;
}

}  // namespace pvs::service
