// What the E2B routes get from the Api: the REST API's sandbox operations and services.
#include "app/api.h"

namespace pvs::service {

E2bRoutes::Deps Api::e2b_deps() {
  return E2bRoutes::Deps{
      config_,
      *this,
      gate_,
      limits_,
      metrics_,
      tokens_,
      [this](const AuditRecord& r) { append_audit(r); },
      [this](const Principal& p, const std::string& id) { return sandbox_for(p, id); },
      [this](const Principal& p, const CreateRequest& r, const Egress& e) {
        return create_for(p, r, e);
      },
      [this](const Principal& p, const Labels& selector) { return list_for(p, selector); },
      [this](Sandbox& sandbox) {
        terminals_->close_sandbox(sandbox.id());
        if (auto st = sandbox.destroy(); !st) throw from_error(st.error());
      },
      [this](const std::string& name) {
        auto m = manager();
        if (!m) return false;
        for (const auto& t : m->custom_templates())
          if (t.name == name) return true;
        return false;
      },
      [this](const Principal& p, Sandbox& source, const std::string& name) {
        return capture_for(p, source, name);
      },
      [this](const Principal& p, Sandbox& source, int count, CreateRequest r, const Egress& e) {
        return fork_for(p, source, count, std::move(r), e);
      },
      [this](const Principal& p) { return templates_for(p); },
      [this](const Principal& p, const std::string& name) { delete_template_for(p, name); },
      [this](const TemplateRecipe& r, const BuildOutput& out) -> Result<TemplateBuild> {
        auto m = manager();
        if (!m) return fail(ErrorCode::kUnavailable, "the controller is starting");
        return m->build_template(r, out);
      },
      [this](const Principal& p) {
        auto all = require_manager()->volumes();
        std::erase_if(all, [&](const VolumeInfo& v) { return v.owner != p.name; });
        return all;
      },
      [this](const Principal& p, const std::string& name) {
        auto made = require_manager()->create_volume({name, 0, p.name, ""});
        if (!made) throw from_error(made.error());
        return *made;
      },
      [this](const Principal&, const std::string& id) {
        if (auto st = require_manager()->delete_volume(id); !st) throw from_error(st.error());
      },
      [this] {
        E2bRoutes::Deps::Recovery r;
        auto m = manager();
        if (!m) return r;
        r.open = true;
        r.passes = m->stats().reconciles;
        for (const NodeInfo& n : m->nodes())
          if (!n.recovered) r.unrecovered.insert(n.name);
        return r;
      },
  };
}

}  // namespace pvs::service
