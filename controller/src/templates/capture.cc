// Templates from a sandbox (Manager::capture_template and Manager::fork; custom_templates.h):
//   1. a running sandbox's container is snapshotted (a paused one is stopped: none needed),
//   2. a full clone of that snapshot is made on the sandbox's node, described as a build (phase
//      "creating", label pve-sandbox/build: a controller killed here leaves it to recovery),
//   3. the snapshot is deleted, the clone described as a template (phase "pooled", the template
//      labels with its owner and source) and converted.
// The sandbox's op lock is held throughout, so that no pause, resume, rollback or destroy
// changes the container under the snapshot and the clone; its commands and files go on.
// A fork captures a base and creates from it at once; the reconcile destroys a base nothing
// uses any more (drop_unused_fork_bases).
#include <optional>
#include <thread>

#include "lifecycle/core.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"
#include "pvesandbox/template_recipe.h"
#include "spread.h"

namespace pvs::lifecycle {

namespace {

// Removes `name` from `names` (under `mu`) when it goes out of scope.
class NameHold {
 public:
  NameHold(std::mutex& mu, std::multiset<std::string>& names, std::string name)
      : mu_(mu), names_(names), name_(std::move(name)) {}
  ~NameHold() {
    std::lock_guard lock(mu_);
    names_.erase(names_.find(name_));
  }
  NameHold(const NameHold&) = delete;
  NameHold& operator=(const NameHold&) = delete;

 private:
  std::mutex& mu_;
  std::multiset<std::string>& names_;
  std::string name_;
};

}  // namespace

Result<CustomTemplate> ManagerCore::capture(const std::string& sandbox_id, std::string name,
                                            const std::string& owner, bool fork_base) {
  if (name.empty()) name = std::string(fork_base ? "fork-" : "snap-") + random_hex(12);
  if (!valid_template_name(name))
    return fail(ErrorCode::kInvalidArgument,
                "template name " + pvs::quoted(name, 40) + ": 1-32 of [a-z0-9-], a letter first");
  std::shared_ptr<SandboxImpl> sb;
  {
    std::lock_guard lock(mu_);
    auto it = registry_.find(sandbox_id);
    if (it == registry_.end() || it->second->destroyed())
      return fail(ErrorCode::kNotFound, "no sandbox " + sandbox_id);
    sb = it->second;
    if (custom_.count(name) || capturing_.count(name))
      return fail(ErrorCode::kConflict, "template " + pvs::quoted(name) + " exists already");
    int kept = 0;
    for (auto& [n, t] : custom_) kept += t.owner == owner && !t.fork_base;
    if (!fork_base && kept >= cfg_.max_templates_per_owner)
      return fail(ErrorCode::kConflict,
                  "owner " + pvs::quoted(owner, 64) + " keeps " + std::to_string(kept) +
                      " templates captured from sandboxes, the most it may (" +
                      "max_templates_per_owner " + std::to_string(cfg_.max_templates_per_owner) +
                      "); delete one first");
    capturing_.insert(name);
  }
  NameHold hold(mu_, capturing_, name);
  std::lock_guard op(sb->op_mutex());
  auto md = sb->metadata();
  if (sb->destroyed() ||
      (md.phase != SandboxMetadata::Phase::kReady && md.phase != SandboxMetadata::Phase::kPaused))
    return fail(ErrorCode::kConflict, "sandbox " + sandbox_id + " is being destroyed");
  if (auto ok = no_volumes(md); !ok) return fail(ok.error());
  busy(sb->vmid(), true);
  auto made = capture_steps(*sb, name, owner, fork_base);
  busy(sb->vmid(), false);
  if (!made) return made;
  std::lock_guard lock(mu_);
  custom_[name] = *made;
  if (fork_base) forking_.insert(name);  // the fork's hold (NameHold in fork)
  captured_.insert(name);                // kept by a refresh that began before it was converted
  template_nodes_[made->vmid] = made->node;
  busy_vmids_.erase(made->vmid);
  log::info("template " + name + " captured from " + sandbox_id + ": vmid " +
            std::to_string(made->vmid) + " on " + made->node);
  return made;
}

// The snapshot, the clone, the snapshot deleted, the clone sealed (op lock held).
Result<CustomTemplate> ManagerCore::capture_steps(SandboxImpl& sb, const std::string& name,
                                                  const std::string& owner, bool fork_base) {
  Node& n = sb.node();
  const auto md = sb.metadata();
  const bool running = md.phase == SandboxMetadata::Phase::kReady;
  const std::string snap = running ? "pvscapture" + random_hex(8) : "";
  if (running)
    if (auto r = wait(pve_.create_snapshot(n.cfg.name, sb.vmid(), snap, "pve-sandbox capture"),
                      "snapshot");
        !r)
      return fail(r.error());
  Step s;
  s.node = &n;
  s.id = "build-" + random_hex(12);
  s.template_vmid = sb.vmid();
  SandboxMetadata t;
  t.id = s.id;
  t.phase = SandboxMetadata::Phase::kCreating;
  t.created_at = now_unix();
  t.labels[std::string(kTemplateBuildLabel)] = name;
  auto cloned = clone_template(
      s,
      [&](int vmid, pve::CloneRequest& req) {
        t.vmid = vmid;
        req.description = encode_description(t);
        req.snapname = snap;
        req.full = true;  // a sandbox is no template: no linked clone of it
      },
      CloneQueue::Who::kCaller, true);
  if (running)
    if (auto r = wait(pve_.delete_snapshot(n.cfg.name, sb.vmid(), snap), "delete snapshot"); !r)
      log::warn("capture of " + sb.id() + ": snapshot " + snap +
                " not deleted: " + r.error().message);
  Status sealed = cloned;
  if (sealed) {
    t.phase = SandboxMetadata::Phase::kPooled;
    t.labels.clear();
    t.labels[std::string(kTemplateNameLabel)] = name;
    t.labels[std::string(kRecipeDigestLabel)] = random_hex(32);
    t.labels[std::string(kTemplateBaseLabel)] = std::to_string(sb.vmid());
    t.labels[std::string(kTemplatePoolLabel)] = "0";
    t.labels[std::string(kTemplateOwnerLabel)] = owner;
    t.labels[std::string(kTemplateSourceLabel)] = sb.id();
    if (fork_base) t.labels[std::string(kTemplateForkLabel)] = "1";
    t.host_key = md.host_key;  // what its clones present at first
    sealed = write_description(n, s.vmid, t);
  }
  if (sealed) sealed = make_template(n, s.vmid);
  if (!sealed) {
    (void)rollback(s);
    return fail(sealed.error());
  }
  CustomTemplate c;
  c.name = name;
  c.digest = t.labels[std::string(kRecipeDigestLabel)];
  c.created_at = t.created_at;
  c.owner = owner;
  c.source = sb.id();
  c.fork_base = fork_base;
  c.host_key = md.host_key;
  TemplateCopy& copy = c.copies.emplace_back();
  copy.node = n.cfg.name;
  copy.vmid = s.vmid;
  copy.id = s.id;
  copy.base_vmid = sb.vmid();
  copy.serves = {n.cfg.name};
  finish_template(c, node_names());
  return c;
}

std::string ManagerCore::template_host_key(const std::string& name) const {
  if (name.empty()) return "";
  std::lock_guard lock(mu_);
  auto it = custom_.find(name);
  return it == custom_.end() ? "" : it->second.host_key;
}

bool ManagerCore::may_use_template(const std::string& name, const std::string& owner) const {
  std::lock_guard lock(mu_);
  auto it = custom_.find(name);
  return it != custom_.end() && (it->second.owner.empty() || it->second.owner == owner);
}

ManagerCore::Forked ManagerCore::fork(const std::string& sandbox_id, int count,
                                      const std::string& owner, const Manager::ForkCreate& create) {
  if (count < 1 || count > cfg_.max_fork)
    return fail(ErrorCode::kInvalidArgument, "count must be 1.." + std::to_string(cfg_.max_fork));
  auto base = capture(sandbox_id, "", owner, true);  // held in forking_ until the creates are done
  if (!base) return fail(base.error());
  std::vector<std::optional<Result<std::shared_ptr<Sandbox>>>> made(count);
  {
    NameHold hold(mu_, forking_, base->name);
    std::vector<std::thread> threads;
    for (int i = 0; i < count; ++i) threads.emplace_back([&, i] { made[i] = create(base->name); });
    for (auto& t : threads) t.join();
  }
  std::optional<Error> first;
  for (auto& m : made)
    if (!*m && !first) first = m->error();
  if (!first) {
    std::vector<std::shared_ptr<Sandbox>> out;
    for (auto& m : made) out.push_back(std::move(**m));
    log::info("forked " + sandbox_id + " into " + std::to_string(count) + " from " + base->name);
    return out;
  }
  for (auto& m : made)  // all or none
    if (*m)
      if (auto st = (**m)->destroy(); !st)
        log::warn("fork of " + sandbox_id + ": " + (**m)->info().id +
                  " not destroyed: " + st.error().message);
  if (auto st = remove_template(base->name); !st)
    log::warn("fork base " + base->name + " left to the reconcile: " + st.error().message);
  return fail(*first);
}

// Fork bases that no sandbox and no fork in progress uses (after a restart: none in progress).
void ManagerCore::drop_unused_fork_bases() {
  std::vector<std::string> unused;
  for (const auto& t : custom_templates()) {
    if (!t.fork_base || t.in_use > 0) continue;
    std::lock_guard lock(mu_);
    if (!forking_.count(t.name) && !capturing_.count(t.name)) unused.push_back(t.name);
  }
  for (const auto& name : unused)
    if (auto st = remove_template(name); !st)
      log::warn("fork base " + name + " not destroyed: " + st.error().message);
}

}  // namespace pvs::lifecycle
