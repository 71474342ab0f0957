// The Api's side of SandboxOps (sandbox_ops.h): which sandboxes a caller may use, and a new one
// within the token's max_sandboxes (counted with the creates in flight, under the API mutex),
// templates of a sandbox's files and forks, and the custom templates a caller may see.
#include <exception>

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
  // Paused sandboxes count against max_paused, not here (the owner's, outside the API mutex).
  const int paused = static_cast<int>(manager->count_paused(owner));
  {
    std::lock_guard lock(mu_);
    // The Manager keeps a count per owner: no walk over every live sandbox under mu_.
    int owned = creating_[owner] + static_cast<int>(manager->count_owned(owner)) - paused;
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
  options.volumes = resolve_volumes(*manager, principal, req.volumes);
  if (!options.volumes.empty()) {  // E2B's content plane lets go of them first
    std::vector<std::string> ids;
    for (const auto& v : options.volumes) ids.push_back(v.volume);
    e2b_routes_.release_volume_helpers(ids);
  }
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

CustomTemplate Api::capture_for(const Principal& principal, Sandbox& source,
                                const std::string& name) {
  auto made = require_manager()->capture_template(source.id(), name, principal.name);
  if (!made) throw from_error(made.error());
  return *made;
}

std::vector<std::shared_ptr<Sandbox>> Api::fork_for(const Principal& principal, Sandbox& source,
                                                    int count, CreateRequest request,
                                                    const Egress& egress) {
  // create_for throws (429 past max_sandboxes, ...): the first one thrown is the fork's answer.
  std::mutex mu;
  std::exception_ptr thrown;
  auto made =
      require_manager()->fork(source.id(), count, principal.name,
                              [&](const std::string& base) -> Result<std::shared_ptr<Sandbox>> {
                                CreateRequest r = request;
                                r.template_name = base;
                                r.profile.clear();
                                try {
                                  return create_for(principal, r, egress);
                                } catch (...) {
                                  std::lock_guard lock(mu);
                                  if (!thrown) thrown = std::current_exception();
                                  return fail(ErrorCode::kInternal, "a fork's create failed");
                                }
                              });
  if (made) return std::move(*made);
  if (thrown) std::rethrow_exception(thrown);
  throw from_error(made.error());
}

std::vector<CustomTemplate> Api::templates_for(const Principal& principal) {
  auto all = require_manager()->custom_templates();
  std::erase_if(all, [&](const CustomTemplate& t) { return !template_visible(t, principal); });
  return all;
}

void Api::delete_template_for(const Principal& principal, const std::string& name) {
  auto all = require_manager()->custom_templates();
  if (std::none_of(all.begin(), all.end(), [&](const CustomTemplate& t) {
        return t.name == name && template_deletable(t, principal);
      }))
    throw not_found("no template " + name.substr(0, 64));
  if (auto st = require_manager()->delete_template(name); !st) throw from_error(st.error());
}

}  // namespace pvs::service
