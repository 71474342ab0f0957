// Custom templates (docs/templates.md): POST /v1/templates (admin) builds one from a recipe
// (YAML or JSON body) and streams the build as NDJSON, GET /v1/templates and
// GET /v1/templates/{name} list those the caller may create from (template_visible),
// DELETE /v1/templates/{name} destroys one (an operator's: admin; one captured from a sandbox:
// its owner too; 409 while sandboxes or hot pool members use it). Needs only the Manager and
// the reply helpers.
#pragma once

#include <functional>
#include <memory>

#include "http/auth.h"
#include "http/json.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "pvesandbox/manager.h"

namespace pvs::service {

class TemplateRoutes {
 public:
  // `manager` returns the Manager or throws ApiError 503 (starting).
  using ManagerSource = std::function<std::shared_ptr<Manager>()>;
  TemplateRoutes(ManagerSource manager, Replies& replies)
      : manager_(std::move(manager)), replies_(replies) {}

  // The reply: 200, application/x-ndjson, one object per line: {"line":"..."} for each line
  // of the build's output, then {"template":{...},"cached":bool,"seconds":n} or
  // {"error":{"code":"...","message":"..."}}. A recipe that does not parse: 400 before that.
  void build(RequestContext& ctx);
  void list(RequestContext& ctx);
  void show(RequestContext& ctx);
  void remove(RequestContext& ctx);

 private:
  ManagerSource manager_;
  Replies& replies_;
};

// One template as JSON.
void write_template(JsonWriter& w, const CustomTemplate& t);
// The templates a caller may see and create from: an operator's (no owner), its own, or any
// for an admin.
bool template_visible(const CustomTemplate& t, const Principal& who);
// The templates it may delete: its own captures, or any for an admin (an operator's is an
// admin's to delete).
bool template_deletable(const CustomTemplate& t, const Principal& who);

}  // namespace pvs::service
