// The catalogue of custom templates (custom_templates.h): read back from Proxmox by every
// reconcile, listed with their users, deleted when nothing uses them.
#include <algorithm>
#include <condition_variable>
#include <optional>

#include "lifecycle/core.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"
#include "spread.h"

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

int ManagerCore::custom_vmid_locked(const std::string& name, const Node& n) const {
  auto it = custom_.find(name);
  if (it == custom_.end()) return 0;
  auto* c = copy_for(it->second, n.cfg.name);
  return c ? c->vmid : 0;
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

namespace {

// A copy read back from its description (nullopt: not a custom template's).
std::optional<CustomTemplate> read_copy(const SandboxMetadata& md, const std::string& node,
                                        const std::vector<std::string>& all) {
  auto name = md.labels.find(std::string(kTemplateNameLabel));
  auto digest = md.labels.find(std::string(kRecipeDigestLabel));
  if (name == md.labels.end() || digest == md.labels.end()) return std::nullopt;
  CustomTemplate t;
  t.name = name->second;
  t.digest = digest->second;
  t.pool_size = label_int(md, kTemplatePoolLabel);
  t.created_at = md.created_at;
  auto label = [&](std::string_view key) {
    auto it = md.labels.find(std::string(key));
    return it == md.labels.end() ? std::string() : it->second;
  };
  t.owner = label(kTemplateOwnerLabel);
  t.source = label(kTemplateSourceLabel);
  t.fork_base = label(kTemplateForkLabel) == "1";
  t.host_key = md.host_key;
  TemplateCopy& c = t.copies.emplace_back();
  c.node = node;
  c.vmid = md.vmid;
  c.id = md.id;
  c.base_vmid = label_int(md, kTemplateBaseLabel);
  auto nodes = md.labels.find(std::string(kTemplateNodesLabel));
  c.serves = parse_nodes_label(nodes == md.labels.end() ? "" : nodes->second, all, node);
  return t;
}

// Adds one copy (t.copies[0]) to the catalogue: a second copy on one node, or one of another
// digest, is left out (the older, the first found, wins).
void add_copy(std::map<std::string, CustomTemplate>& found, CustomTemplate t) {
  auto [it, added] = found.emplace(t.name, t);
  if (added) return;
  auto& have = it->second;
  const TemplateCopy& c = t.copies[0];
  auto same = std::find_if(have.copies.begin(), have.copies.end(),
                           [&](const TemplateCopy& h) { return h.node == c.node; });
  if (have.digest != t.digest || same != have.copies.end()) {
    log::warn("two templates named " + pvs::quoted(t.name) +
              (have.digest != t.digest ? " (other digests)" : "") + " on " + c.node +
              "; using the older one");
    if (have.digest == t.digest && c.vmid < same->vmid) *same = c;
    return;
  }
  have.created_at = std::min(have.created_at, t.created_at);
  have.copies.push_back(c);
}

}  // namespace

Status ManagerCore::refresh_custom_templates() {
  const auto all = node_names();
  std::map<std::string, CustomTemplate> found;
  std::map<int, CustomTemplate> known;  // by VMID, one copy each: no config read for these
  {
    std::lock_guard lock(mu_);
    captured_.clear();
    for (auto& [name, t] : custom_)
      for (auto& c : t.copies) {
        CustomTemplate k = t;
        k.copies = {c};
        known[c.vmid] = std::move(k);
      }
  }
  for (auto& n : nodes_) {
    if (!n->online) {  // unreachable now: what it held is kept, never forgotten on a guess
      for (auto& [vmid, t] : known)
        if (t.copies[0].node == n->cfg.name) add_copy(found, t);
      continue;
    }
    auto cts = pve_.list_containers(n->cfg.name);
    if (!cts) return fail(pve_error(cts.error(), "list containers"));
    std::vector<int> vmids;
    for (auto& ct : *cts)
      if (ct.is_template && ct.vmid >= static_cast<int>(cfg_.vmid_min) &&
          ct.vmid <= static_cast<int>(cfg_.vmid_max))
        vmids.push_back(ct.vmid);
    std::sort(vmids.begin(), vmids.end());  // the older (lower VMID) first
    for (int vmid : vmids) {
      if (auto k = known.find(vmid); k != known.end() && k->second.copies[0].node == n->cfg.name) {
        add_copy(found, k->second);
        continue;
      }
      auto conf = pve_.config(n->cfg.name, vmid);
      if (!conf) continue;
      auto d = conf->find("description");
      auto md = decode_description(d == conf->end() ? "" : d->second);
      if (!md || md->vmid != vmid) continue;
      if (auto t = read_copy(*md, n->cfg.name, all)) add_copy(found, std::move(*t));
    }
  }
  for (auto& [name, t] : found) finish_template(t, all);
  // A build that finished meanwhile is kept (it holds build_mu_ until it is in custom_).
  std::unique_lock build(build_mu_, std::try_to_lock);
  if (!build.owns_lock()) return {};
  {
    std::lock_guard lock(mu_);
    for (auto& name : captured_)  // converted after this refresh listed its node
      if (auto it = custom_.find(name); it != custom_.end()) found.emplace(name, it->second);
    custom_ = std::move(found);
    for (auto& [name, t] : custom_)
      for (auto& c : t.copies) template_nodes_[c.vmid] = c.node;
  }
  sync_template_pools();
  resolve_named_profiles();
  return {};
}

void ManagerCore::resolve_named_profiles() {
  bool replan = false;
  {
    std::lock_guard lock(mu_);
    for (auto& h : hot_) {  // profiles that name a template: its copy's VMID (0: none)
      if (h.p.template_name.empty()) continue;
      int vmid = custom_vmid_locked(h.p.template_name, *h.node);
      if (vmid == h.p.template_vmid) continue;
      replan = true;
      h.p.template_vmid = vmid;
      h.not_before = {};  // fill now, not after a backoff
    }
  }
  if (!replan) return;
  plan_replicas();
  hot_cv_.notify_all();
}

// Its own hot pool (pool_size) is emptied first: the members' fills finish, then they are
// destroyed here. A sandbox made from it, or a profile of the configuration that feeds on it,
// refuses the delete.
Status ManagerCore::delete_template(const std::string& name) {
  std::lock_guard one(build_mu_);
  return remove_template(name);
}

Status ManagerCore::remove_template(const std::string& name) {
  CustomTemplate t;
  {
    std::lock_guard lock(mu_);
    auto it = custom_.find(name);
    if (it == custom_.end()) return fail(ErrorCode::kNotFound, "no template " + pvs::quoted(name));
    t = it->second;
    if (forking_.count(name))
      return fail(ErrorCode::kConflict, "template " + pvs::quoted(name) + " is a fork's base");
    int users = 0;
    for (auto& [id, sb] : registry_) {
      auto md = sb->metadata();
      auto l = md.labels.find(std::string(kTemplateNameLabel));
      if (l != md.labels.end() && l->second == name) ++users;
    }
    if (users > 0)
      return fail(ErrorCode::kConflict, "template " + pvs::quoted(name) + " is used by " +
                                            std::to_string(users) + " sandbox(es)");
    for (auto& h : hot_)
      for (auto& c : t.copies)
        if (!h.implicit && h.p.template_vmid == c.vmid && h.p.size > 0)
          return fail(ErrorCode::kConflict,
                      "template " + pvs::quoted(name) + " feeds hot pool " + pvs::quoted(h.p.name));
  }
  if (auto st = empty_template_pool(name); !st) return st;
  std::string failed;
  for (auto& c : t.copies) {
    busy(c.vmid, true);
    Node* node = find_node(c.node);
    Status r = node ? destroy_container(*node, c.vmid, c.id)
                    : fail(ErrorCode::kUnavailable, "its node " + c.node + " is not one of ours");
    busy(c.vmid, false);
    std::lock_guard lock(mu_);
    auto& have = custom_[name];
    if (!r) {
      failed += (failed.empty() ? "" : "; ") + c.node + ": " + r.error().message;
      continue;
    }
    vmids_.release(static_cast<std::uint32_t>(c.vmid));
    std::erase_if(have.copies, [&](const TemplateCopy& h) { return h.vmid == c.vmid; });
    finish_template(have, node_names());
    if (have.copies.empty()) custom_.erase(name);
    log::info("template " + name + " (vmid " + std::to_string(c.vmid) + " on " + c.node +
              ") deleted");
  }
  plan_replicas();  // its copies are no clone sources any more
  if (!failed.empty())
    return fail(ErrorCode::kUnavailable, "delete template " + name + ": " + failed);
  return {};
}

}  // namespace pvs::lifecycle
