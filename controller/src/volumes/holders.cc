// Volumes and their holders (pvesandbox/volumes.h): a holder is a linked clone of the holder
// template that never starts, its mp0 the volume, its description a SandboxMetadata in phase
// "pooled" with the label pve-sandbox/volume (the name) and the owner. While it is made it is in
// phase "creating", so a controller killed there leaves it to recovery, which destroys it and
// Proxmox frees the volume with it (its owner). Every reconcile registers the holders it lists.
#include <algorithm>

#include "lifecycle/core.h"
#include "lifecycle/on_exit.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"

namespace pvs::lifecycle {

namespace {

Error volumes_off() {
  return {ErrorCode::kUnavailable,
          "volumes are not configured (volumes.holder_template_vmid; docs/operations.md)"};
}

// A sandbox on a node not read whole (Node::recovered) may mount a volume of it without
// holder_of knowing: what needs the volume unmounted waits until the node is recovered.
Status read_whole(const Node* node, const std::string& volume) {
  if (!node || node->recovered) return {};
  const std::string why = ": a sandbox not adopted yet may mount volume " + volume;
  return fail(ErrorCode::kUnavailable,
              node->cfg.name + ": " + Node::kRecovering + why + "; try again shortly");
}

std::string storage_of(const std::string& volid) {
  return volid.substr(0, volid.find(':'));
}

// The volume a holder's config shows: its mp0's volid and size (false if it has none).
bool read_mp0(const pve::Config& conf, std::string* volid, int* size_gb_out) {
  auto mp0 = conf.find("mp0");
  if (mp0 == conf.end()) return false;
  *volid = mp0->second.substr(0, mp0->second.find(','));
  *size_gb_out = size_gb(mp0->second);
  return volid->find(':') != std::string::npos;
}

// The node a new volume goes to: the one asked for, else the first online and undrained.
Result<Node*> volume_node(const std::vector<std::unique_ptr<Node>>& nodes,
                          const std::string& name) {
  for (auto& n : nodes)
    if (name.empty() ? n->online && !n->drained : n->cfg.name == name) return n.get();
  if (name.empty()) return fail(ErrorCode::kUnavailable, "no node is online and undrained");
  return fail(ErrorCode::kInvalidArgument, "no node " + pvs::quoted(name, 64) + " in the cluster");
}

// kConflict when the owner has the name already (or is creating it) or keeps `max` volumes.
using Volumes = std::map<std::string, std::pair<VolumeInfo, std::string>>;
Status may_add(const Volumes& volumes, const std::set<std::pair<std::string, std::string>>& naming,
               const VolumeRequest& r, int max) {
  int kept = 0;
  for (auto& [id, v] : volumes) {
    if (v.first.owner != r.owner) continue;
    ++kept;
    if (v.first.name == r.name)
      return fail(ErrorCode::kConflict, "volume " + pvs::quoted(r.name) + " exists already");
  }
  for (auto& [owner, name] : naming) {
    if (owner != r.owner) continue;
    ++kept;
    if (name == r.name)
      return fail(ErrorCode::kConflict, "volume " + pvs::quoted(r.name) + " is being created");
  }
  if (kept >= max)
    return fail(ErrorCode::kConflict, "owner " + pvs::quoted(r.owner, 64) + " keeps " +
                                          std::to_string(kept) + " volumes, the most it may " +
                                          "(volumes.max_per_owner); delete one first");
  return {};
}

}  // namespace

std::string ManagerCore::holder_of(const std::string& volume) const {
  auto claim = volume_claims_.find(volume);
  if (claim != volume_claims_.end()) return claim->second;
  for (auto& [id, sb] : registry_)
    for (auto& m : sb->metadata().volumes)
      if (m.volume == volume) return id;
  return "";
}

std::vector<VolumeInfo> ManagerCore::volumes() const {
  std::lock_guard lock(mu_);
  std::vector<VolumeInfo> out;
  for (auto& [id, v] : volumes_) {
    out.push_back(v.first);
    out.back().mounted_by = holder_of(id);
  }
  std::sort(out.begin(), out.end(), [](const VolumeInfo& a, const VolumeInfo& b) {
    return std::tie(a.created_at, a.id) < std::tie(b.created_at, b.id);
  });
  return out;
}

Result<VolumeInfo> ManagerCore::create_volume(const VolumeRequest& r) {
  const VolumeConfig& vc = cfg_.volumes;
  if (vc.holder_template_vmid == 0) return fail(volumes_off());
  if (!valid_volume_name(r.name))
    return fail(ErrorCode::kInvalidArgument, "volume name " + pvs::quoted(r.name, 64) +
                                                 ": 1-63 of [a-z0-9_-], a letter or digit first");
  const int size = r.size_gb == 0 ? vc.default_size_gb : r.size_gb;
  if (size < 1 || size > vc.max_size_gb)
    return fail(ErrorCode::kInvalidArgument,
                "size_gb must be 1.." + std::to_string(vc.max_size_gb) + " (volumes.max_size_gb)");
  auto node = volume_node(nodes_, r.node);
  if (!node) return fail(node.error());
  const auto key = std::make_pair(r.owner, r.name);
  {
    std::lock_guard lock(mu_);
    if (auto ok = may_add(volumes_, volume_names_, r, vc.max_per_owner); !ok)
      return fail(ok.error());
    volume_names_.insert(key);
  }
  OnExit unname([this, key] {
    std::lock_guard lock(mu_);
    volume_names_.erase(key);
  });

  Step s;
  s.node = *node;
  s.id = "vol-" + random_hex(12);
  s.template_vmid = vc.holder_template_vmid;
  SandboxMetadata md;
  md.id = s.id;
  md.phase = SandboxMetadata::Phase::kCreating;
  md.created_at = now_unix();
  md.owner = r.owner;
  md.labels[std::string(kVolumeHolderLabel)] = r.name;
  auto made = [&]() -> Result<VolumeInfo> {
    if (auto c = clone_template(
            s,
            [&](int vmid, pve::CloneRequest& req) {
              md.vmid = vmid;
              req.hostname = "volume-" + std::to_string(vmid);
              req.description = encode_description(md);
              req.full = false;  // a holder never starts: a linked clone costs nothing
              req.storage.clear();
            },
            CloneQueue::Who::kCaller, true);
        !c)
      return fail(c.error());
    auto holder = pve_.config(s.node->cfg.name, s.vmid);
    if (!holder) return fail(pve_error(holder.error(), "holder config"));
    std::string storage = vc.storage;
    if (storage.empty() && holder->count("rootfs")) storage = storage_of(holder->at("rootfs"));
    md.phase = SandboxMetadata::Phase::kPooled;
    pve::Params params = {{"mp0", storage + ":" + std::to_string(size) + ",mp=/volume,backup=1"},
                          {"description", encode_description(md)}};
    if (auto w = pve_.update_config(s.node->cfg.name, s.vmid, params); !w)
      return fail(pve_error(w.error(), "allocate the volume"));
    auto conf = pve_.config(s.node->cfg.name, s.vmid);
    if (!conf) return fail(pve_error(conf.error(), "holder config"));
    VolumeInfo v;
    std::string volid;
    if (!read_mp0(*conf, &volid, &v.size_gb))
      return fail(ErrorCode::kInternal, "the holder's config shows no volume at mp0");
    v.id = s.id;
    v.name = r.name;
    v.owner = r.owner;
    v.node = s.node->cfg.name;
    v.storage = storage_of(volid);
    v.holder_vmid = s.vmid;
    v.created_at = md.created_at;
    std::lock_guard lock(mu_);
    volumes_[v.id] = {v, volid};
    busy_vmids_.erase(s.vmid);
    return v;
  }();
  if (!made) {
    log::warn("volume " + r.name + " not created: " + made.error().message);
    (void)rollback(s);
    return made;
  }
  log::info("volume " + made->id + " (" + r.name + ", " + std::to_string(made->size_gb) +
            " GiB) created on " + made->node + ": holder " + std::to_string(s.vmid));
  return made;
}

Status ManagerCore::delete_volume(const std::string& id) {
  std::pair<VolumeInfo, std::string> v;
  {
    std::lock_guard lock(mu_);
    auto it = volumes_.find(id);
    if (it == volumes_.end()) return fail(ErrorCode::kNotFound, "no volume " + pvs::quoted(id, 40));
    if (auto by = holder_of(id); !by.empty())
      return fail(ErrorCode::kConflict, "volume " + id + " is mounted by " + by +
                                            " (running or paused); destroy that sandbox first");
    if (auto st = read_whole(find_node(it->second.first.node), id); !st) return st;
    v = it->second;
    volumes_.erase(it);  // no claim finds it from here on
    busy_vmids_.insert(v.first.holder_vmid);
  }
  Node* node = find_node(v.first.node);
  Status r = node ? destroy_container(*node, v.first.holder_vmid, id)
                  : fail(ErrorCode::kUnavailable, "node " + v.first.node + " is not configured");
  std::lock_guard lock(mu_);
  busy_vmids_.erase(v.first.holder_vmid);
  if (!r) {
    volumes_[id] = v;
    return r;
  }
  vmids_.release(static_cast<std::uint32_t>(v.first.holder_vmid));
  log::info("volume " + id + " (" + v.first.name + ") deleted");
  return {};
}

Result<VolumeInfo> ManagerCore::resize_volume(const std::string& id, int size) {
  VolumeInfo v;
  {
    std::lock_guard lock(mu_);
    auto it = volumes_.find(id);
    if (it == volumes_.end()) return fail(ErrorCode::kNotFound, "no volume " + pvs::quoted(id, 40));
    if (auto by = holder_of(id); !by.empty())
      return fail(ErrorCode::kConflict, "volume " + id + " is mounted by " + by +
                                            "; Proxmox resizes a volume its holder owns offline");
    if (auto st = read_whole(find_node(it->second.first.node), id); !st) return fail(st.error());
    v = it->second.first;
    if (size <= v.size_gb || size > cfg_.volumes.max_size_gb)
      return fail(ErrorCode::kInvalidArgument, "size_gb must be " + std::to_string(v.size_gb + 1) +
                                                   ".." + std::to_string(cfg_.volumes.max_size_gb) +
                                                   ": a volume only grows");
    volume_claims_[id] = "a resize";  // no create mounts it meanwhile
  }
  auto r = wait(pve_.resize(v.node, v.holder_vmid, "mp0", std::to_string(size) + "G"), "resize");
  std::lock_guard lock(mu_);
  volume_claims_.erase(id);
  if (!r) return fail(r.error());
  auto it = volumes_.find(id);
  if (it != volumes_.end()) it->second.first.size_gb = size;
  v.size_gb = size;
  return v;
}

bool ManagerCore::keep_holder(Node& n, const pve::Config& conf, const SandboxMetadata& md) {
  if (md.phase != SandboxMetadata::Phase::kPooled) return conf.count("lock") > 0;  // unfinished
  VolumeInfo v;
  std::string volid;
  if (!read_mp0(conf, &volid, &v.size_gb)) return false;
  v.id = md.id;
  v.name = md.labels.at(std::string(kVolumeHolderLabel));
  v.owner = md.owner;
  v.node = n.cfg.name;
  v.storage = storage_of(volid);
  v.holder_vmid = md.vmid;
  v.created_at = md.created_at;
  std::lock_guard lock(mu_);
  auto& known = volumes_[v.id];
  if (known.first.id.empty()) log::info("volume " + v.id + " (" + v.name + ") found");
  known = {v, volid};
  return true;
}

void ManagerCore::forget_vanished_holders(Node& n, const std::set<int>& before,
                                          const std::set<int>& present) {
  std::lock_guard lock(mu_);
  for (auto it = volumes_.begin(); it != volumes_.end();) {
    const VolumeInfo& v = it->second.first;
    if (v.node == n.cfg.name && before.count(v.holder_vmid) && !present.count(v.holder_vmid) &&
        !busy_vmids_.count(v.holder_vmid)) {
      log::warn("volume " + v.id + " vanished from Proxmox (holder " +
                std::to_string(v.holder_vmid) + "); forgetting it");
      it = volumes_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace pvs::lifecycle
