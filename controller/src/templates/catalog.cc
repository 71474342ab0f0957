// The catalogue of custom templates (custom_templates.h): read back from Proxmox by every
// reconcile, listed with their users, deleted when nothing uses them.
#include <algorithm>

#include "lifecycle/core.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"

namespace pvs::lifecycle {

namespace {

int label_int(const SandboxMetadata& md, std::string_view key) {
  auto it = md.labels.find(std::string(key));
  if (it == md.labels.end()) return 0;
  try {
    return std::stoi(it->second);
  } catch (...) {
    return 0;
  }
}

}  // namespace

int ManagerCore::custom_vmid_locked(const std::string& name) const {
  auto it = custom_.find(name);
  return it == custom_.end() ? 0 : it->second.vmid;
}

std::vector<CustomTemplate> ManagerCore::custom_templates() const {
  std::lock_guard lock(mu_);
  std::vector<CustomTemplate> out;
  for (auto& [name, t] : custom_) {
    CustomTemplate c = t;
    c.in_use = 0;
    for (auto& [id, sb] : registry_) {
      auto md = sb->metadata();
      auto it = md.labels.find(std::string(kTemplateNameLabel));
      if (it != md.labels.end() && it->second == name) ++c.in_use;
    }
    out.push_back(std::move(c));
  }
  return out;
}

Status ManagerCore::refresh_custom_templates() {
  std::map<std::string, CustomTemplate> found;
  std::map<int, CustomTemplate> known;  // by VMID: no config read for these
  {
    std::lock_guard lock(mu_);
    for (auto& [name, t] : custom_) known[t.vmid] = t;
  }
  for (auto& n : nodes_) {
    if (!n->online) {  // unreachable now: what it held is kept, never forgotten on a guess
      for (auto& [vmid, t] : known)
        if (t.node == n->cfg.name) found[t.name] = t;
      continue;
    }
    auto cts = pve_.list_containers(n->cfg.name);
    if (!cts) return fail(pve_error(cts.error(), "list containers"));
    for (auto& ct : *cts) {
      if (!ct.is_template || ct.vmid < static_cast<int>(cfg_.vmid_min) ||
          ct.vmid > static_cast<int>(cfg_.vmid_max))
        continue;
      if (auto k = known.find(ct.vmid); k != known.end() && k->second.node == n->cfg.name) {
        found[k->second.name] = k->second;
        continue;
      }
      auto conf = pve_.config(n->cfg.name, ct.vmid);
      if (!conf) continue;
      auto d = conf->find("description");
      auto md = decode_description(d == conf->end() ? "" : d->second);
      if (!md || md->vmid != ct.vmid) continue;
      auto name = md->labels.find(std::string(kTemplateNameLabel));
      auto digest = md->labels.find(std::string(kRecipeDigestLabel));
      if (name == md->labels.end() || digest == md->labels.end()) continue;
      CustomTemplate t;
      t.name = name->second;
      t.digest = digest->second;
      t.node = n->cfg.name;
      t.vmid = ct.vmid;
      t.id = md->id;
      t.base_vmid = label_int(*md, kTemplateBaseLabel);
      t.pool_size = label_int(*md, kTemplatePoolLabel);
      t.created_at = md->created_at;
      if (found.count(t.name))
        log::warn("two templates named " + quoted(t.name) + "; using the older one");
      if (!found.count(t.name) || found[t.name].vmid > t.vmid) found[t.name] = t;
    }
  }
  // A build that finished meanwhile is kept (it holds build_mu_ until it is in custom_).
  std::unique_lock build(build_mu_, std::try_to_lock);
  if (!build.owns_lock()) return {};
  {
    std::lock_guard lock(mu_);
    custom_ = std::move(found);
    for (auto& [name, t] : custom_) template_nodes_[t.vmid] = t.node;
  }
  resolve_named_profiles();
  return {};
}

void ManagerCore::resolve_named_profiles() {
  bool replan = false;
  {
    std::lock_guard lock(mu_);
    for (auto& h : hot_) {  // profiles that name a template: its VMID now (0: not built)
      if (h.p.template_name.empty()) continue;
      int vmid = custom_vmid_locked(h.p.template_name);
      replan |= vmid != h.p.template_vmid;
      h.p.template_vmid = vmid;
      if (replan) h.not_before = {};  // fill now, not after a backoff
    }
  }
  if (!replan) return;
  plan_replicas();
  hot_cv_.notify_all();
}

Status ManagerCore::delete_template(const std::string& name) {
  std::lock_guard one(build_mu_);
  CustomTemplate t;
  {
    std::lock_guard lock(mu_);
    auto it = custom_.find(name);
    if (it == custom_.end()) return fail(ErrorCode::kNotFound, "no template " + quoted(name));
    t = it->second;
    int users = 0;
    for (auto& [id, sb] : registry_) {
      auto md = sb->metadata();
      auto l = md.labels.find(std::string(kTemplateNameLabel));
      if (l != md.labels.end() && l->second == name) ++users;
    }
    if (users > 0)
      return fail(ErrorCode::kConflict, "template " + quoted(name) + " is used by " +
                                            std::to_string(users) + " sandbox(es)");
    for (auto& h : hot_)
      if (h.p.template_vmid == t.vmid && h.p.size > 0)
        return fail(ErrorCode::kConflict,
                    "template " + quoted(name) + " feeds hot pool " + quoted(h.p.name));
    busy_vmids_.insert(t.vmid);
  }
  Node* node = find_node(t.node);
  Status r = node ? destroy_container(*node, t.vmid, t.id)
                  : fail(ErrorCode::kUnavailable, "its node " + t.node + " is not one of ours");
  busy(t.vmid, false);
  if (!r) return fail(r.error().code, "delete template " + name + ": " + r.error().message);
  vmids_.release(static_cast<std::uint32_t>(t.vmid));
  std::lock_guard lock(mu_);
  custom_.erase(name);
  log::info("template " + name + " (vmid " + std::to_string(t.vmid) + ") deleted");
  return {};
}

}  // namespace pvs::lifecycle
