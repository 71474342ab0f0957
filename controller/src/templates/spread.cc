// Custom templates on a cluster (spread.h): the builds a recipe needs, the copy a node clones,
// the label of the nodes a copy serves; and the hot pool a template's pool_size makes.
#include "spread.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "lifecycle/core.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"

namespace pvs::lifecycle {

std::vector<std::vector<std::string>> build_groups(const std::vector<NodeBase>& unserved) {
  std::vector<std::vector<std::string>> groups;
  std::map<int, std::size_t> by_base;
  for (auto& n : unserved) {
    auto [it, added] = by_base.emplace(n.base, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(n.node);
  }
  return groups;
}

const TemplateCopy* copy_for(const CustomTemplate& t, std::string_view node) {
  for (auto& c : t.copies)
    if (c.node == node) return &c;
  for (auto& c : t.copies)
    if (std::find(c.serves.begin(), c.serves.end(), node) != c.serves.end()) return &c;
  return nullptr;
}

std::string nodes_label(const std::vector<std::string>& serves,
                        const std::vector<std::string>& all) {
  bool every = all.size() > 1 && std::all_of(all.begin(), all.end(), [&](const std::string& n) {
                 return std::find(serves.begin(), serves.end(), n) != serves.end();
               });
  if (every) return "*";
  std::string out;
  for (auto& n : serves) out += (out.empty() ? "" : ",") + n;
  return out.size() <= 128 ? out : "";
}

std::vector<std::string> parse_nodes_label(std::string_view value,
                                           const std::vector<std::string>& all,
                                           const std::string& home) {
  if (value == "*") return all;
  std::vector<std::string> out;
  while (!value.empty()) {
    auto comma = value.find(',');
    auto name = value.substr(0, comma);
    if (!name.empty() && std::find(out.begin(), out.end(), name) == out.end())
      out.emplace_back(name);
    value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
  }
  if (std::find(out.begin(), out.end(), home) == out.end()) out.insert(out.begin(), home);
  return out;
}

void finish_template(CustomTemplate& t, const std::vector<std::string>& node_order) {
  auto rank = [&](const std::string& node) {
    return std::find(node_order.begin(), node_order.end(), node) - node_order.begin();
  };
  std::stable_sort(
      t.copies.begin(), t.copies.end(),
      [&](const TemplateCopy& a, const TemplateCopy& b) { return rank(a.node) < rank(b.node); });
  t.nodes.clear();
  for (auto& n : node_order)
    if (copy_for(t, n)) t.nodes.push_back(n);
  if (t.copies.empty()) return;
  t.node = t.copies[0].node;
  t.vmid = t.copies[0].vmid;
  t.id = t.copies[0].id;
  t.base_vmid = t.copies[0].base_vmid;
}

namespace {

// One build of a recipe's: on a group's first node, for the group.
struct CopyJob {
  Node* node = nullptr;
  int base = 0;
  std::vector<std::string> serves;
  std::optional<Result<TemplateCopy>> made;
  std::string log;
};

// The configuration's profiles win over a recipe's pool_size: the build says so.
void note_pool(const ManagerConfig& cfg, const TemplateRecipe& r, const BuildOutput& out) {
  for (auto& p : cfg.hot_pools)
    if (out && r.pool_size > 0 && (p.template_name == r.name || p.name == r.name))
      out("==> pool_size " + std::to_string(r.pool_size) + " not applied: the configuration's " +
          "hot pool profile " + p.name +
          (p.template_name == r.name ? " serves it" : " has its name"));
}

}  // namespace

Status ManagerCore::can_build(const Node& n, const std::vector<std::string>& group) const {
  if (nodes_label(group, node_names()).empty())
    return fail(ErrorCode::kInvalidArgument, "too many nodes share one copy to record them");
  if (n.online && n.agent_ok) return {};
  std::lock_guard lock(mu_);
  return fail(ErrorCode::kUnavailable, "node " + n.cfg.name + " cannot build now: " +
                                           (n.error.empty() ? "agent unreachable" : n.error));
}

void ManagerCore::drop_copy(Node& n, const TemplateCopy& c, const std::string& name) {
  if (auto st = destroy_container(n, c.vmid, c.id); !st)
    log::warn("template " + name + ": copy " + std::to_string(c.vmid) + " on " + n.cfg.name +
              " not destroyed (recovery retries): " + st.error().message);
  else
    vmids_.release(static_cast<std::uint32_t>(c.vmid));
  busy(c.vmid, false);
}

// The nodes without a copy of this digest get one: one build per group of nodes sharing a base
// (build_groups), in parallel; each node's lines prefixed with its name on a cluster. Any
// failure destroys the copies this build made: the error names the nodes that failed.
Result<TemplateBuild> ManagerCore::build_template(const TemplateRecipe& r, const BuildOutput& out) {
  const auto started = Clock::now();
  std::lock_guard one(build_mu_);
  TemplateBuild result;
  const std::string digest = r.digest();
  const bool cluster = nodes_.size() > 1;
  {
    std::lock_guard lock(mu_);
    if (auto it = custom_.find(r.name); it != custom_.end()) {
      if (it->second.digest != digest)
        return fail(ErrorCode::kConflict,
                    "template " + pvs::quoted(r.name) +
                        " exists, built from another recipe: delete it first");
      result.made = it->second;
    }
  }
  std::vector<NodeBase> unserved;
  for (auto& n : nodes_) {
    if (copy_for(result.made, n->cfg.name)) continue;
    auto base = recipe_base(r, *n);
    if (!base) return fail(base.error());
    unserved.push_back({n->cfg.name, *base});
  }
  if (unserved.empty()) {
    result.cached = true;
    if (out)
      out("==> cached: template " + r.name + " (vmid " + std::to_string(result.made.vmid) +
          ") has this recipe's digest" + (cluster ? " on every node" : ""));
    return result;
  }
  std::vector<CopyJob> jobs;
  for (auto& group : build_groups(unserved)) {
    CopyJob& j = jobs.emplace_back();
    j.node = find_node(group.front());
    j.serves = group;
    for (auto& u : unserved)
      if (u.node == group.front()) j.base = u.base;
    if (auto st = can_build(*j.node, group); !st) return fail(st.error());
  }
  std::mutex out_mu;  // the builds' lines, one at a time
  auto run = [&](CopyJob& j) {
    BuildOutput lines;
    if (out)
      lines = [&, prefix = cluster ? "[" + j.node->cfg.name + "] " : ""](std::string_view l) {
        std::lock_guard lock(out_mu);
        out(prefix + std::string(l));
      };
    j.made = build_copy(r, *j.node, j.base, j.serves, lines, &j.log);
  };
  {
    std::vector<std::thread> threads;
    for (std::size_t i = 1; i < jobs.size(); ++i) threads.emplace_back(run, std::ref(jobs[i]));
    run(jobs[0]);
    for (auto& t : threads) t.join();
  }
  std::string failed;
  for (auto& j : jobs) {
    result.log += j.log;
    if (!*j.made)
      failed += (failed.empty() ? "" : "\n") + (cluster ? j.node->cfg.name + ": " : "") +
                j.made->error().message;
  }
  if (!failed.empty()) {
    ErrorCode code = ErrorCode::kInvalidArgument;
    for (auto& j : jobs)
      if (*j.made)
        drop_copy(*j.node, **j.made, r.name);
      else
        code = j.made->error().code;
    if (cluster) failed = "build of " + r.name + " failed (nothing kept on any node): " + failed;
    return fail(code, failed);
  }
  {
    std::lock_guard lock(mu_);
    auto& t = custom_[r.name];
    if (t.copies.empty()) {
      t = CustomTemplate{};
      t.name = r.name;
      t.digest = digest;
      t.pool_size = r.pool_size;
      t.created_at = now_unix();
    }
    for (auto& j : jobs) {
      t.copies.push_back(**j.made);
      template_nodes_[(*j.made)->vmid] = j.node->cfg.name;
      busy_vmids_.erase((*j.made)->vmid);
      result.built_on.push_back(j.node->cfg.name);
    }
    finish_template(t, node_names());
    result.made = t;
  }
  sync_template_pools();
  resolve_named_profiles();
  note_pool(cfg_, r, out);
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

// A template whose recipe asks for a pool gets a hot pool profile of its own, named after it,
// on every node it serves: unless a profile of the configuration names it (the operator's
// wins) or holds its name. Implicit profiles of templates gone are retired (size 0), their
// members destroyed by the hot pool's workers.
void ManagerCore::sync_template_pools() {
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    auto configured = [&](const std::string& name) {
      return std::any_of(
          cfg_.hot_pools.begin(), cfg_.hot_pools.end(),
          [&](const HotPoolProfile& p) { return p.template_name == name || p.name == name; });
    };
    std::map<std::pair<std::string, Node*>, int> wanted;  // (name, node) -> size
    for (auto& [name, t] : custom_) {
      if (t.pool_size <= 0 || configured(name)) continue;
      for (auto& node : t.nodes)
        if (Node* n = find_node(node)) wanted[{name, n}] = t.pool_size;
    }
    for (auto& h : hot_) {
      if (!h.implicit) continue;
      auto it = wanted.find({h.p.name, h.node});
      int size = it == wanted.end() ? 0 : it->second;
      if (it != wanted.end()) wanted.erase(it);
      if (h.p.size == size) continue;
      changed = true;
      h.p.size = size;
      h.not_before = {};
      if (size > 0) continue;
      log::info("hot pool " + h.p.name + " on " + h.node->cfg.name + ": its template is gone");
      for (auto& m : h.ready) discard_member(std::move(m), "its template is gone");
      h.ready.clear();
    }
    for (auto& [key, size] : wanted) {
      auto& h = hot_.emplace_back();
      h.implicit = true;
      h.node = key.second;
      h.p.name = key.first;
      h.p.template_name = key.first;
      h.p.template_vmid = custom_vmid_locked(key.first, *key.second);
      h.p.size = size;
      h.p.memory_mb = std::min(h.p.memory_mb, cfg_.max_memory_mb);  // 1 CPU, 512 MB at most
      changed = true;
      log::info("hot pool " + h.p.name + " on " + h.node->cfg.name + ": " + std::to_string(size) +
                " member(s) of template " + key.first + " (pool_size)");
    }
  }
  if (!changed) return;
  plan_replicas();
  start_hot_workers();
  hot_cv_.notify_all();
}

Status ManagerCore::empty_template_pool(const std::string& name) {
  std::vector<HotMember> members;
  {
    std::unique_lock lock(mu_);
    auto mine = [&](const HotProfile& h) { return h.implicit && h.p.name == name; };
    for (auto& h : hot_)
      if (mine(h)) h.p.size = 0;
    auto filled = [&] {
      return std::none_of(hot_.begin(), hot_.end(),
                          [&](const HotProfile& h) { return mine(h) && h.filling > 0; });
    };
    if (!hot_cv_.wait_for(lock, cfg_.template_step_timeout, filled))
      return fail(ErrorCode::kUnavailable,
                  "template " + name + ": its hot pool is still making members; try again");
    for (auto& h : hot_) {
      if (!mine(h)) continue;
      for (auto& m : h.ready) {
        busy_vmids_.insert(m.vmid);
        members.push_back(std::move(m));
      }
      h.ready.clear();
      h.p.template_vmid = 0;
    }
  }
  for (auto& m : members) {
    log::info("hot member " + std::to_string(m.vmid) + " of " + name + ": its template goes");
    destroy_member(std::move(m));
  }
  return {};
}

}  // namespace pvs::lifecycle
