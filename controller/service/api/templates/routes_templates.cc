#include <Poco/Net/HTTPServerResponse.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "api/templates/template_routes.h"
#include "http/api_error.h"
#include "pvesandbox/template_recipe.h"

namespace pvs::service {

namespace {

constexpr std::uint64_t kMaxRecipeBody = kMaxRecipeBytes * 2 + (2 << 20);  // base64 and more
constexpr std::size_t kMaxQueuedLines = 10000;  // a slow reader loses lines, never the build

struct BuildState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> lines;
  bool dropped = false;
  std::optional<Result<TemplateBuild>> result;
};

std::string template_name_param(RequestContext& ctx) {
  const std::string& name = ctx.params.at("name");
  if (!valid_template_name(name)) throw bad_request("name: not a template name");
  return name;
}

}  // namespace

void write_template(JsonWriter& w, const CustomTemplate& t) {
  w.begin_object();
  w.key("name").value(t.name).key("vmid").value(t.vmid).key("node").value(t.node);
  w.key("digest").value(t.digest).key("base_vmid").value(t.base_vmid);
  w.key("pool_size").value(t.pool_size).key("created_at").value(t.created_at);
  w.key("in_use").value(t.in_use);
  if (!t.owner.empty()) w.key("owner").value(t.owner);
  if (!t.source.empty()) w.key("source").value(t.source).key("fork_base").value(t.fork_base);
  w.key("nodes").begin_array();
  for (const auto& n : t.nodes) w.value(n);
  w.end_array().key("copies").begin_array();
  for (const auto& c : t.copies) {
    w.begin_object().key("node").value(c.node).key("vmid").value(c.vmid);
    w.key("base_vmid").value(c.base_vmid).key("serves").begin_array();
    for (const auto& n : c.serves) w.value(n);
    w.end_array().end_object();
  }
  w.end_array();
  w.end_object();
}

void TemplateRoutes::build(RequestContext& ctx) {
  auto manager = manager_();
  std::string body = replies_.read_body(ctx, kMaxRecipeBody);
  auto recipe = parse_recipe(body, "recipe");
  if (!recipe) throw from_error(recipe.error());
  JsonWriter p;
  p.begin_object().key("name").value(recipe->name).key("digest").value(recipe->digest());
  ctx.params_json = p.end_object().take();

  auto state = std::make_shared<BuildState>();
  // As a streaming exec: the status line now, the outcome (and its audit) at the end.
  std::ostream& out = start_ndjson(ctx);
  auto emit = [&out](const std::string& line) { emit_line(out, line); };
  std::thread worker([state, manager, r = std::move(*recipe)] {
    auto built = manager->build_template(r, [state](std::string_view line) {
      std::lock_guard lock(state->mu);
      if (state->lines.size() >= kMaxQueuedLines) {
        state->dropped = true;
        return;
      }
      state->lines.emplace_back(line);
      state->cv.notify_one();
    });
    std::lock_guard lock(state->mu);
    state->result = std::move(built);
    state->cv.notify_one();
  });
  for (bool done = false; !done;) {
    std::deque<std::string> lines;
    {
      std::unique_lock lock(state->mu);
      state->cv.wait(lock, [&] { return state->result || !state->lines.empty(); });
      lines.swap(state->lines);
      done = state->result.has_value();
    }
    for (const auto& line : lines) {
      JsonWriter w;
      emit(w.begin_object().key("line").value(line).end_object().take());
    }
  }
  worker.join();
  const Result<TemplateBuild>& r = *state->result;
  JsonWriter w;
  w.begin_object();
  if (r) {
    replies_.audit(ctx, 200, nullptr);
    w.key("template");
    write_template(w, r->made);
    w.key("cached").value(r->cached).key("seconds").value(r->seconds);
    w.key("built_on").begin_array();
    for (const auto& n : r->built_on) w.value(n);
    w.end_array();
    if (state->dropped) w.key("lines_dropped").value(true);
  } else {
    ApiError e = from_error(r.error());
    replies_.audit(ctx, e.status, &e);
    w.key("error").begin_object().key("code").value(e.code);
    w.key("message").value(e.message).end_object();
  }
  emit(w.end_object().take());
}

bool template_visible(const CustomTemplate& t, const Principal& who) {
  return who.admin || t.owner.empty() || t.owner == who.name;
}

bool template_deletable(const CustomTemplate& t, const Principal& who) {
  return who.admin || (!t.owner.empty() && t.owner == who.name);
}

void TemplateRoutes::list(RequestContext& ctx) {
  JsonWriter w;
  w.begin_object().key("templates").begin_array();
  for (const auto& t : manager_()->custom_templates())
    if (template_visible(t, *ctx.principal)) write_template(w, t);
  replies_.send_json(ctx, 200, w.end_array().end_object().take());
}

void TemplateRoutes::show(RequestContext& ctx) {
  std::string name = template_name_param(ctx);
  for (const auto& t : manager_()->custom_templates()) {
    if (t.name != name || !template_visible(t, *ctx.principal)) continue;
    JsonWriter w;
    write_template(w, t);
    return replies_.send_json(ctx, 200, w.take());
  }
  throw not_found("no template " + name);
}

// An operator's template is an admin's to delete; a token deletes the ones it captured.
void TemplateRoutes::remove(RequestContext& ctx) {
  std::string name = template_name_param(ctx);
  JsonWriter p;
  ctx.params_json = p.begin_object().key("name").value(name).end_object().take();
  auto manager = manager_();
  const Principal& who = *ctx.principal;
  auto all = manager->custom_templates();
  bool may = std::any_of(all.begin(), all.end(), [&](const CustomTemplate& t) {
    return t.name == name && template_deletable(t, who);
  });
  if (!may) throw not_found("no template " + name);
  if (auto st = manager->delete_template(name); !st) throw from_error(st.error());
  replies_.send_empty(ctx, 204);
}

}  // namespace pvs::service
