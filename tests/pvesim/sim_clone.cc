// pvesim's handlers that copy a CT's state: clone, template, snapshots.
#include <algorithm>
#include <ctime>
#include <memory>
#include <sstream>

#include "sim_impl.h"

namespace pvesim {

namespace {

std::vector<std::string> split_list_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

}  // namespace

// New random MACs for every net<N> (pve-container's clone_vm).
void Simulator::Impl::renew_macs(std::map<std::string, std::string>& config) {
  for (auto& [k, v] : config) {
    if (k.rfind("net", 0) != 0 || k.size() <= 3 || !std::isdigit(static_cast<unsigned char>(k[3])))
      continue;
    std::string out;
    bool replaced = false;
    for (const auto& part : split_list_commas(v)) {
      std::string item = part;
      if (part.rfind("hwaddr=", 0) == 0) {
        item = "hwaddr=" + random_mac();
        replaced = true;
      }
      out += (out.empty() ? "" : ",") + item;
    }
    if (!replaced) out += ",hwaddr=" + random_mac();
    v = out;
  }
}

std::string Simulator::Impl::clone(Call& c) {
  int src = vmid_param(c), newid = vmid_param(c, "newid");
  const std::string node = node_of(c);
  Container& source = need(c, src);
  std::string pool = param(c, "pool");
  if (!pool.empty() && !pools.count(pool))
    throw ApiFail{403, "Permission check failed (pool '" + pool + "' does not exist)", {}};
  if (Container* taken = find(newid))
    throw fail500("CT " + std::to_string(newid) + " already exists on node '" + taken->node + "'");
  // With `target`, the config is made here and moved to the target when the task ends.
  auto target = cluster->clone_target(node, param(c, "target"), volume_storages(source.config),
                                      param(c, "storage"));
  if (!target.error.empty()) throw fail500(target.error);
  bool is_template = config_int(source, "template", 0) != 0;
  bool full = c.params.count("full") ? flag(c, "full") : !is_template;
  if (!full && c.params.count("storage"))
    throw fail500("parameter 'storage' not allowed for linked clones");
  // pve-container's order: the snapshot, then (per volume) a full clone of a running CT.
  std::string snapname = param(c, "snapname");
  auto snap = std::find_if(source.snapshots.begin(), source.snapshots.end(),
                           [&](const Snapshot& s) { return s.name == snapname; });
  if (!snapname.empty() && snap == source.snapshots.end())
    throw fail500("snapshot '" + snapname + "' does not exist");
  if (full && source.running && !c.params.count("snapname"))
    throw fail500("Full clone of a running container is only possible from a snapshot");
  if (auto e = Volumes::refusal("clone", snapname.empty() ? source.config : snap->config);
      !e.empty())
    throw fail500(e);
  check_unlocked(source);
  source.config["lock"] = "disk";
  Container ct;
  ct.vmid = newid;
  ct.node = node;
  ct.created = Clock::now();
  ct.config = snapname.empty() ? source.config : snap->config;  // the snapshot's, as Proxmox
  ct.config.erase("template");
  ct.config["lock"] = "create";
  renew_macs(ct.config);
  if (c.params.count("hostname")) ct.config["hostname"] = param(c, "hostname");
  if (c.params.count("description")) ct.config["description"] = param(c, "description");
  auto rootfs = ct.config.find("rootfs");
  std::string source_volume;
  if (rootfs != ct.config.end()) {
    auto comma = rootfs->second.find(',');
    source_volume = rootfs->second.substr(0, comma);
    std::string rest = comma == std::string::npos ? "" : rootfs->second.substr(comma);
    // A linked clone stays on the template's storage, a full one goes to `storage` if given.
    std::string sid = param(c, "storage", source_volume.substr(0, source_volume.find(':')));
    rootfs->second = sid + ":vm-" + std::to_string(newid) + "-disk-0" + rest;
  }
  ct.firewall = source.firewall;
  cts[newid] = std::move(ct);
  backend->place(newid, node);
  // The storage step (the lxc backend's overlay or copy) runs without the state lock.
  auto storage_error = std::make_shared<std::string>();
  auto work = [this, src, newid, full, snapname, config = cts[newid].config, storage_error] {
    *storage_error = backend->clone(src, newid, full, snapname, config);
    return std::string();
  };
  auto done = [this, src, newid, pool, to = target.node, storage_error] {
    Container* s = find(src);
    Container* n = find(newid);
    if (s && lock_of(*s) == "disk") s->config.erase("lock");
    bool failing = false;
    for (const auto& [type, msg] : options.fail_tasks)
      if (type == "vzclone" && !is_warnings(msg)) failing = true;
    if (failing || !storage_error->empty()) {  // the worker frees the new volumes and config
      cts.erase(newid);
      backend->destroy(newid);
      return storage_error->empty() ? std::string() : "clone failed: " + *storage_error;
    }
    if (n) {
      if (!pool.empty() && pools.count(pool)) pools[pool].members.insert(newid);
      if (lock_of(*n) == "create") n->config.erase("lock");
      n->node = to;  // PVE::LXC::Config->move_config_to_node
      backend->place(newid, to);
    }
    return std::string();
  };
  std::string upid = start_task("vzclone", std::to_string(src), c.user, node, done, nullptr, work);
  tasks[upid].log.push_back(std::string(full ? "create full clone" : "create linked clone") +
                            " of mount point rootfs (" + source_volume + ")");
  return upid;
}

// POST .../template: the checks under the config lock, then a `vztemplate` worker that turns
// each volume into a base volume (vm-N-disk-0 -> base-N-disk-0) and sets template=1. The API
// answers null: the caller sees the end only in the config (or the task list).
void Simulator::Impl::make_template(Call& c) {
  const std::string node = node_of(c);
  Container& ct = need(c, vmid_param(c));
  check_unlocked(ct);
  if (!ct.snapshots.empty())
    throw fail500("unable to create template, because CT contains snapshots");
  if (config_int(ct, "template", 0)) throw fail500("you can't convert a template to a template");
  if (ct.running) throw fail500("you can't convert a CT to template if the CT is running");
  int vmid = ct.vmid;
  start_task("vztemplate", std::to_string(vmid), c.user, node, [this, node, vmid] {
    Container* n = find_on(node, vmid);
    if (!n) return conf_missing(node, vmid);
    if (n->running) return std::string("you can't convert a CT to template if the CT is running");
    if (auto e = Volumes::refusal("template", n->config); !e.empty()) return e;
    auto rootfs = n->config.find("rootfs");
    const std::string from = ":vm-" + std::to_string(vmid) + "-disk-";
    if (rootfs != n->config.end())
      if (auto pos = rootfs->second.find(from); pos != std::string::npos)
        rootfs->second.replace(pos, from.size(), ":base-" + std::to_string(vmid) + "-disk-");
    n->config["template"] = "1";
    return std::string();
  });
}

Array::Ptr Simulator::Impl::snapshot_list(Container& ct) {
  Array::Ptr a = new Array;
  for (const auto& s : ct.snapshots) {
    Object::Ptr o = new Object;
    o->set("name", s.name);
    o->set("description", s.description);
    o->set("snaptime", static_cast<Poco::Int64>(s.snaptime));
    if (!s.parent.empty()) o->set("parent", s.parent);
    a->add(o);
  }
  Object::Ptr current = new Object;
  current->set("name", "current");
  current->set("description", "You are here!");
  current->set("running", ct.running ? 1 : 0);
  current->set("digest", digest_of(ct));
  if (!ct.snapshots.empty()) current->set("parent", ct.snapshots.back().name);
  a->add(current);
  return a;
}

std::string Simulator::Impl::snapshot_create(Call& c) {
  const std::string node = node_of(c);
  int vmid = vmid_param(c);
  std::string name = param(c, "snapname");
  if (name == "current" || name == "vzdump")
    throw fail500("unable to use snapshot name '" + name + "' (reserved name)");
  std::string description = param(c, "description");
  return start_task("vzsnapshot", std::to_string(vmid), c.user, node,
                    [this, node, vmid, name, description] {
                      Container* n = find_on(node, vmid);
                      if (!n) return conf_missing(node, vmid);
                      for (const auto& s : n->snapshots)
                        if (s.name == name) return "snapshot name '" + name + "' already used";
                      if (config_int(*n, "template", 0))
                        return std::string("you can't take a snapshot if it's a template");
                      std::string lock = lock_of(*n);
                      if (!lock.empty()) return "CT is locked (" + lock + ")";
                      if (auto e = Volumes::refusal("snapshot", n->config); !e.empty()) return e;
                      Snapshot s;
                      s.name = name;
                      s.description = description;
                      s.snaptime = std::time(nullptr);
                      s.parent = n->snapshots.empty() ? "" : n->snapshots.back().name;
                      s.config = n->config;
                      // The volume's snapshot (lxc backend: a copy of its writable layer).
                      if (auto e = backend->snapshot(vmid, name); !e.empty()) return e;
                      n->snapshots.push_back(std::move(s));
                      return std::string();
                    });
}

std::string Simulator::Impl::snapshot_delete(Call& c) {
  const std::string node = node_of(c);
  int vmid = vmid_param(c);
  std::string name = param(c, "snapname");
  return start_task("vzdelsnapshot", std::to_string(vmid), c.user, node, [this, node, vmid, name] {
    Container* n = find_on(node, vmid);
    if (!n) return conf_missing(node, vmid);
    std::string lock = lock_of(*n);
    if (!lock.empty()) return "CT is locked (" + lock + ")";
    auto it = std::find_if(n->snapshots.begin(), n->snapshots.end(),
                           [&](const Snapshot& s) { return s.name == name; });
    if (it == n->snapshots.end()) return "snapshot '" + name + "' does not exist";
    std::string parent = it->parent;
    for (auto& s : n->snapshots)
      if (s.parent == name) s.parent = parent;
    n->snapshots.erase(it);
    backend->delete_snapshot(vmid, name);
    return std::string();
  });
}

std::string Simulator::Impl::snapshot_rollback(Call& c) {
  const std::string node = node_of(c);
  int vmid = vmid_param(c);
  std::string name = param(c, "snapname");
  bool start_after = flag(c, "start");
  return start_task("vzrollback", std::to_string(vmid), c.user, node,
                    [this, node, vmid, name, start_after] {
                      Container* n = find_on(node, vmid);
                      if (!n) return conf_missing(node, vmid);
                      std::string lock = lock_of(*n);
                      if (!lock.empty()) return "CT is locked (" + lock + ")";
                      auto it = std::find_if(n->snapshots.begin(), n->snapshots.end(),
                                             [&](const Snapshot& s) { return s.name == name; });
                      if (it == n->snapshots.end()) return "snapshot '" + name + "' does not exist";
                      if (n->running) {
                        backend->stop(vmid);
                        n->running = false;
                      }
                      if (auto e = backend->rollback(vmid, name); !e.empty()) return e;
                      n->config = it->config;
                      if (start_after) {
                        std::string error = backend->start(vmid, n->config, ipv4_of(*n));
                        if (!error.empty()) return error;
                        n->running = true;
                        n->started = Clock::now();
                        n->started_unix = unix_now();
                      }
                      return std::string();
                    });
}

}  // namespace pvesim
