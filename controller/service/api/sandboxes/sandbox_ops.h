// The sandboxes a caller may use, as every resource room asks for them: the handler classes of
// sandboxes, files and terminals, and the MCP tools. The Api implements it (app/sandbox_access.cc):
// it holds the Manager and counts each token's sandboxes, so a handler gets this narrow view
// instead of the Api.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "http/api_error.h"
#include "http/auth.h"
#include "http/request_context.h"
#include "http/requests.h"
#include "pvesandbox/manager.h"

namespace pvs::service {

class SandboxOps {
 public:
  virtual ~SandboxOps() = default;
  // A sandbox `principal` may use: its own, or any for an admin; others' are "no sandbox".
  virtual std::shared_ptr<Sandbox> sandbox_for(const Principal& principal,
                                               const std::string& id) = 0;
  // A new sandbox owned by `principal`, within its max_sandboxes (429 beyond).
  virtual std::shared_ptr<Sandbox> create_for(const Principal& principal,
                                              const CreateRequest& request,
                                              const Egress& egress) = 0;
  // The sandboxes `principal` sees that carry every label of `selector`.
  virtual std::vector<SandboxInfo> list_for(const Principal& principal, const Labels& selector) = 0;

  // Templates of a sandbox's files (Manager::capture_template, docs/templates.md "Templates
  // from a sandbox"): one owned by `principal`; `count` new sandboxes at once (Manager::fork),
  // each made as create_for makes `request` with the fork's base as its template, all or none
  // (the first failure is thrown); the custom templates `principal` may create from (the
  // operator's and its own; an admin's: all); deleting one of those (404 for the others).
  virtual CustomTemplate capture_for(const Principal& principal, Sandbox& source,
                                     const std::string& name) = 0;
  virtual std::vector<std::shared_ptr<Sandbox>> fork_for(const Principal& principal,
                                                         Sandbox& source, int count,
                                                         CreateRequest request,
                                                         const Egress& egress) = 0;
  virtual std::vector<CustomTemplate> templates_for(const Principal& principal) = 0;
  virtual void delete_template_for(const Principal& principal, const std::string& name) = 0;

  // The sandbox of the route's {id} (400 when malformed), recorded on `ctx` for the audit log.
  std::shared_ptr<Sandbox> find(RequestContext& ctx) {
    const std::string& id = ctx.params.at("id");
    if (!is_sandbox_id(id)) throw bad_request("id: not a sandbox id (sb- and 12 hex digits)");
    ctx.sandbox = id;
    return sandbox_for(*ctx.principal, id);
  }
};

// The JSON of a sandbox, as the API returns it.
std::string sandbox_json(const SandboxInfo& info);

// What a fork of `source` creates (api/sandboxes/routes_fork.cc): its resources, labels and what
// its TTL's end does; `ttl_seconds` its own (0: the configured default). fork_for sets the
// template; the egress is the source's (SandboxInfo::egress).
CreateRequest fork_request(const SandboxInfo& source, int ttl_seconds);

}  // namespace pvs::service
