// A create with volumes (CreateOptions::volumes): checked and claimed before anything is
// cloned, placed on their node, and written as mpN of the sandbox's container in the configure
// step's one config write (the container is stopped there: it mounts them at start).
#include "lifecycle/core.h"
#include "pvesandbox/common/text.h"

namespace pvs::lifecycle {

Status ManagerCore::claim_volumes(const CreateOptions& o, const std::string& sandbox_id,
                                  std::set<const Node*>* only) {
  if (o.volumes.empty()) return {};
  if (cfg_.volumes.holder_template_vmid == 0)
    return fail(ErrorCode::kInvalidArgument, "volumes are not configured on this controller");
  if (auto ok = check_mounts(o.volumes, cfg_.volumes.max_mounts); !ok) return ok;
  std::lock_guard lock(mu_);
  std::string node;
  for (auto& m : o.volumes) {
    auto it = volumes_.find(m.volume);
    if (it == volumes_.end() || it->second.first.owner != o.owner)
      return fail(ErrorCode::kInvalidArgument, "no volume " + pvs::quoted(m.volume, 40));
    if (auto by = holder_of(m.volume); !by.empty())
      return fail(ErrorCode::kConflict, "volume " + m.volume + " (" + it->second.first.name +
                                            ") is mounted by " + by +
                                            "; one sandbox at a time may mount a volume");
    if (!node.empty() && node != it->second.first.node)
      return fail(ErrorCode::kInvalidArgument, "volumes on two nodes (" + node + ", " +
                                                   it->second.first.node + ") in one sandbox");
    node = it->second.first.node;
  }
  const Node* at = nullptr;
  for (auto& n : nodes_)
    if (n->cfg.name == node) at = n.get();
  if (!at || (!only->empty() && !only->count(at)) || (!o.node.empty() && o.node != node))
    return fail(ErrorCode::kInvalidArgument,
                "the volumes live on node " + node + ", where this sandbox cannot be made" +
                    (o.node.empty() ? std::string(" (its template is not there)")
                                    : " (node " + pvs::quoted(o.node, 64) + " was asked for)"));
  *only = {at};
  for (auto& m : o.volumes) volume_claims_[m.volume] = sandbox_id;
  return {};
}

void ManagerCore::release_volumes(const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  std::erase_if(volume_claims_, [&](const auto& claim) { return claim.second == sandbox_id; });
}

Result<pve::Params> ManagerCore::mount_params(const std::vector<VolumeMount>& mounts) const {
  pve::Params params;
  std::lock_guard lock(mu_);
  for (std::size_t k = 0; k < mounts.size(); ++k) {
    auto it = volumes_.find(mounts[k].volume);
    if (it == volumes_.end())
      return fail(ErrorCode::kConflict, "volume " + mounts[k].volume + " was deleted meanwhile");
    // backup=0: a vzdump of the sandbox leaves the volume to its holder's backup.
    params.emplace_back("mp" + std::to_string(k), it->second.second + ",mp=" + mounts[k].path +
                                                      ",backup=0" +
                                                      (mounts[k].read_only ? ",ro=1" : ""));
  }
  return params;
}

}  // namespace pvs::lifecycle
