// Template replicas (ManagerConfig::template_replicas): copies of a template, next to it, that
// clones are spread over. Proxmox holds `lock: disk` on a clone's source for the whole clone
// task, so one source makes one clone at a time; N sources make N at once.
//
// A replica is a linked clone of the primary template converted into a template
// (POST /nodes/{node}/lxc/{vmid}/template). Its description carries phase "pooled" and the
// labels pve-sandbox/replica-of (the primary's VMID) and pve-sandbox/template-digest (the
// primary's config digest when it was made): reconcile leaves templates alone, a restart finds
// the replicas by the labels, and one left half-made (not a template yet) is a pooled clone of
// no template, which reconcile destroys as an orphan. docs/operations.md ("Template replicas
// and sizing") says what they cost.
#include <algorithm>
#include <thread>
#include <tuple>

#include "core.h"
#include "pvesandbox/common/log.h"

namespace pvs::lifecycle {

namespace {

// `key` is `prefix` and a number (mp0, net3).
bool numbered(const std::string& key, std::string_view prefix) {
  return key.size() > prefix.size() && key.compare(0, prefix.size(), prefix) == 0 &&
         std::all_of(key.begin() + static_cast<std::ptrdiff_t>(prefix.size()), key.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}
bool volume_key(const std::string& key) {
  return key == "rootfs" || numbered(key, "mp");
}
bool net_key(const std::string& key) {
  return numbered(key, "net");
}

// A property string without one of its parts: the volume (the first part when it has no
// "key=") or the part "name=...".
std::string without_part(const std::string& value, std::string_view name) {
  std::string out;
  std::size_t start = 0;
  bool first = true;
  while (start <= value.size()) {
    auto end = value.find(',', start);
    if (end == std::string::npos) end = value.size();
    std::string part = value.substr(start, end - start);
    bool drop = name.empty() ? (first && part.find('=') == std::string::npos) ||
                                   part.rfind("volume=", 0) == 0
                             : part.rfind(std::string(name) + "=", 0) == 0;
    if (!drop) out += (out.empty() ? "" : ",") + part;
    first = false;
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string template_digest(const pve::Config& conf) {
  std::string text;
  for (const auto& [key, value] : conf) {  // std::map: sorted by key
    if (key == "digest" || key == "description" || key == "lock" || key == "template" ||
        key == "parent" || key.rfind("unused", 0) == 0)
      continue;
    std::string v = value;
    if (volume_key(key)) v = without_part(v, "");
    if (net_key(key)) v = without_part(v, "hwaddr");
    text += key + "=" + v + "\n";
  }
  return sha256_hex(text).substr(0, 32);  // 128 bits: ample for telling configurations apart
}

void ManagerCore::plan_replicas() {
  std::map<int, ReplicaSet> sets;
  // Templates that want none get a set too: its first pass destroys replicas an earlier
  // configuration made.
  auto want = [&](int primary, int n, const Node& node) {
    auto& set = sets[primary];
    set.primary = primary;
    set.wanted = std::max(set.wanted, n);
    if (set.home.empty()) {
      set.home = template_home(primary, node);
      set.node = find_node(set.home);
    }
  };
  for (auto& n : nodes_) want(n->cfg.template_vmid, n->cfg.template_replicas, *n);
  std::vector<std::tuple<int, int, const Node*>> profiles;  // hot_ grows: read under mu_
  {
    std::lock_guard lock(mu_);
    for (auto& h : hot_)
      if (h.p.template_vmid != 0)  // 0: a custom template not built yet
        profiles.emplace_back(h.p.template_vmid, h.p.template_replicas, h.node);
  }
  for (auto& [vmid, replicas, node] : profiles) want(vmid, replicas, *node);  // 0: no wish
  std::lock_guard lock(mu_);
  replica_sets_ = std::move(sets);
}

int ManagerCore::take_source(int primary, bool primary_only) {
  std::lock_guard lock(mu_);
  int best = primary;
  auto it = replica_sets_.find(primary);
  if (!primary_only && it != replica_sets_.end())
    for (int r : it->second.ready)
      if (clone_load_[r] < clone_load_[best]) best = r;
  ++clone_load_[best];
  return best;
}

void ManagerCore::give_source(int source) {
  std::lock_guard lock(mu_);
  if (--clone_load_[source] <= 0) clone_load_.erase(source);
}

void ManagerCore::drop_replica(int primary, int replica) {
  log::warn("template " + std::to_string(primary) + ": replica " + std::to_string(replica) +
            " is gone; cloning from the others");
  std::lock_guard lock(mu_);
  auto& ready = replica_sets_[primary].ready;
  ready.erase(std::remove(ready.begin(), ready.end(), replica), ready.end());
}

void ManagerCore::sync_replicas() {
  std::vector<int> primaries;
  {
    std::lock_guard lock(mu_);
    for (auto& [primary, set] : replica_sets_)
      if (set.wanted > 1 || !set.checked) primaries.push_back(primary);
  }
  for (int primary : primaries) {
    auto r = sync_replica_set(primary);
    std::lock_guard lock(mu_);
    replica_sets_[primary].error = r ? "" : r.error().message;
    if (r) replica_sets_[primary].checked = true;
    if (!r) log::warn("template " + std::to_string(primary) + " replicas: " + r.error().message);
  }
}

// The replicas of `primary` Proxmox has, sorted into good ones (the primary's digest, in the
// description and in their own config) and stale ones.
Status ManagerCore::find_replicas(const std::string& home, int primary, const std::string& digest,
                                  std::vector<Replica>* good, std::vector<Replica>* stale) {
  auto cts = pve_.list_containers(home);
  if (!cts) return fail(pve_error(cts.error(), "list containers"));
  for (auto& ct : *cts) {
    if (!ct.is_template || ct.vmid < static_cast<int>(cfg_.vmid_min) ||
        ct.vmid > static_cast<int>(cfg_.vmid_max))
      continue;
    {
      std::lock_guard lock(mu_);
      if (busy_vmids_.count(ct.vmid)) continue;
    }
    auto conf = pve_.config(home, ct.vmid);
    if (!conf) continue;  // gone meanwhile, or unreadable now: the next pass looks again
    auto d = conf->find("description");
    auto md = decode_description(d == conf->end() ? "" : d->second);
    if (!md || md->vmid != ct.vmid) continue;
    auto of = md->labels.find(std::string(kReplicaOfLabel));
    if (of == md->labels.end()) continue;
    vmids_.mark_used(static_cast<std::uint32_t>(ct.vmid));
    if (of->second != std::to_string(primary)) {
      std::lock_guard lock(mu_);
      bool known = std::any_of(replica_sets_.begin(), replica_sets_.end(),
                               [&](auto& set) { return std::to_string(set.first) == of->second; });
      if (!known) stale->push_back({ct.vmid, md->id});  // of a template no longer configured
      continue;
    }
    auto recorded = md->labels.find(std::string(kTemplateDigestLabel));
    bool fits = !digest.empty() && recorded != md->labels.end() && recorded->second == digest &&
                template_digest(*conf) == digest;
    (fits ? good : stale)->push_back({ct.vmid, md->id});
  }
  std::sort(good->begin(), good->end(), [](auto& a, auto& b) { return a.vmid < b.vmid; });
  return {};
}

// One template's replicas: checked against the primary, stale and surplus ones destroyed
// (once no clone uses them), missing ones made.
Status ManagerCore::sync_replica_set(int primary) {
  std::string home;
  Node* node = nullptr;
  int wanted = 1;
  {
    std::lock_guard lock(mu_);
    auto& set = replica_sets_[primary];
    home = set.home;
    node = set.node;
    wanted = set.wanted;
  }
  if (!node) return fail(ErrorCode::kUnavailable, "its node " + home + " is not one of the nodes");
  std::string digest;  // none wanted: every replica found is surplus
  if (wanted > 1) {
    auto pconf = pve_.config(home, primary);
    if (!pconf) return fail(pve_error(pconf.error(), "template config"));
    digest = template_digest(*pconf);
  }
  std::vector<Replica> good, stale;
  if (auto r = find_replicas(home, primary, digest, &good, &stale); !r) return r;
  while (static_cast<int>(good.size()) > wanted - 1) {
    stale.push_back(good.back());
    good.pop_back();
  }
  {
    std::lock_guard lock(mu_);
    auto& set = replica_sets_[primary];
    set.digest = digest;
    set.ready.clear();
    for (auto& g : good) set.ready.push_back(g.vmid);
  }
  Status result;
  for (auto& s : stale) {
    {
      std::lock_guard lock(mu_);
      auto load = clone_load_.find(s.vmid);
      if (load != clone_load_.end() && load->second > 0) continue;  // still a clone source
      busy_vmids_.insert(s.vmid);
    }
    // Linked clones of it keep its base volume in use: Proxmox refuses, the next pass retries.
    auto r = destroy_container(*node, s.vmid, s.id);
    busy(s.vmid, false);
    if (!r) {
      if (result) result = fail(r.error());
      continue;
    }
    vmids_.release(static_cast<std::uint32_t>(s.vmid));
    std::lock_guard lock(mu_);
    ++replica_sets_[primary].rebuilt;
  }
  for (int have = static_cast<int>(good.size()); have < wanted - 1; ++have) {
    auto made = make_replica(*node, primary, digest);
    if (!made) return fail(made.error());
    std::lock_guard lock(mu_);
    replica_sets_[primary].ready.push_back(*made);
  }
  return result;
}

// Clone (from the primary itself), convert into a template, check the digest.
Result<int> ManagerCore::make_replica(Node& node, int primary, const std::string& digest) {
  Step s;
  s.node = &node;
  s.id = "replica-" + random_hex(12);
  s.template_vmid = primary;
  SandboxMetadata md;
  md.id = s.id;
  md.phase = SandboxMetadata::Phase::kPooled;
  md.created_at = now_unix();
  md.labels[std::string(kReplicaOfLabel)] = std::to_string(primary);
  md.labels[std::string(kTemplateDigestLabel)] = digest;
  auto made = [&]() -> Status {
    auto cloned = clone_template(
        s,
        [&](int vmid, pve::CloneRequest& req) {
          md.vmid = vmid;
          req.description = encode_description(md);
          // Linked (shares the primary's base volume) unless sandboxes are full clones (storage
          // without linked clones): then a full copy, on the primary's storage.
          req.full = cfg_.full_clone;
          req.storage.clear();
        },
        CloneQueue::Who::kRefill, true);
    if (!cloned) return cloned;
    if (auto r = make_template(node, s.vmid); !r) return r;
    auto conf = pve_.config(node.cfg.name, s.vmid);
    if (!conf) return fail(pve_error(conf.error(), "replica config"));
    if (template_digest(*conf) != digest)
      return fail(ErrorCode::kConflict,
                  "replica " + std::to_string(s.vmid) + " does not match its template's digest");
    return {};
  }();
  if (!made) {
    (void)rollback(s);
    return fail(made.error());
  }
  busy(s.vmid, false);
  log::info("template " + std::to_string(primary) + ": replica " + std::to_string(s.vmid) +
            " made on " + node.cfg.name);
  return s.vmid;
}

Status ManagerCore::make_template(const Node& node, int vmid) {
  const std::string path = "/nodes/" + node.cfg.name + "/lxc/" + std::to_string(vmid);
  if (auto r = pve_.call("POST", path + "/template"); !r)
    return fail(pve_error(r.error(), "make template"));
  // The API answers null; the vztemplate worker's end shows as template: 1 in the config.
  auto deadline = Clock::now() + cfg_.task_timeout;
  auto delay = std::min(milliseconds(20), cfg_.task_poll_max);
  for (;;) {
    auto conf = pve_.config(node.cfg.name, vmid);
    if (conf && conf->count("template") && conf->at("template") == "1" && !conf->count("lock"))
      return {};
    if (Clock::now() + delay >= deadline)
      return fail(ErrorCode::kTimeout,
                  "container " + std::to_string(vmid) + " did not become a template in time");
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, cfg_.task_poll_max);
  }
}

std::vector<TemplateInfo> ManagerCore::templates() const {
  std::vector<TemplateInfo> out;
  std::lock_guard lock(mu_);
  for (auto& [primary, set] : replica_sets_) {
    if (set.wanted < 2) continue;
    TemplateInfo t;
    t.node = set.home;
    t.template_vmid = primary;
    t.wanted = set.wanted;
    t.replicas = set.ready;
    auto load = [&](int vmid) {
      auto it = clone_load_.find(vmid);
      return it == clone_load_.end() ? 0 : it->second;
    };
    t.in_flight.push_back(load(primary));
    for (int r : set.ready) t.in_flight.push_back(load(r));
    t.digest = set.digest;
    t.rebuilt = set.rebuilt;
    t.error = set.error;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace pvs::lifecycle
