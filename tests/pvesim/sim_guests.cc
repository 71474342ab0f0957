// pvesim's handlers for one CT: its config, resize, start/stop/shutdown/reboot, interfaces,
// destroy.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "pvesandbox/common/log.h"
#include "sim_impl.h"

namespace pvesim {

void Simulator::Impl::update_config(Call& c) {
  Container& ct = need(c, vmid_param(c));
  ParamMap changes;
  for (const auto& [k, v] : c.params)
    if (k != "node" && k != "vmid" && k != "digest" && k != "delete" && k != "revert")
      changes[k] = v;
  auto deletes = split_list(param(c, "delete"));
  if (changes.empty() && deletes.empty() && !c.params.count("revert"))
    throw fail500("no options specified");
  // Feature flags other than nesting: root@pam only; tokens never.
  if (changes.count("features")) {
    std::map<std::string, std::string> want, have;
    std::string error;
    parse_property_string(changes["features"], "", &want, &error);
    if (ct.config.count("features"))
      parse_property_string(ct.config["features"], "", &have, &error);
    std::set<std::string> keys;
    for (const auto& [k, v] : want) keys.insert(k);
    for (const auto& [k, v] : have) keys.insert(k);
    for (const auto& k : keys) {
      if (k == "nesting") continue;
      if (want[k] != have[k])
        throw ApiFail{403,
                      "Permission check failed (changing feature flags (except nesting) is "
                      "only allowed for root@pam)",
                      {}};
    }
  }
  check_unlocked(ct);
  if (c.params.count("digest") && param(c, "digest") != digest_of(ct))
    throw fail500("detected modified configuration - file changed by other user? Try again.");
  if (changes.count("unprivileged") && changes["unprivileged"] != ct.config["unprivileged"])
    throw fail500("unable to modify read-only option: 'unprivileged'");
  if (auto e = volumes->check_update(c.user, ct.vmid, ct.config, changes, deletes))
    throw ApiFail{e.status, e.message, e.errors};
  for (const auto& d : deletes) {
    if (d == "memory" || d == "rootfs" || d == "ostype")
      throw fail400("delete", "unable to delete required option '" + d + "'");
    if (changes.count(d))
      throw fail400(d, "unable to delete and set the same option at the same time");
  }
  if (c.params.count("revert"))
    for (const auto& r : split_list(param(c, "revert"))) {
      ct.pending.erase(r);
      ct.pending_delete.erase(r);
    }
  // A stopped CT gets everything at once; a running one what Proxmox hot-plugs, the rest
  // waits in [pve:pending] for the next start. Mount point volumes go through `volumes`.
  std::vector<std::string> volume_deletes;
  ParamMap volume_changes;
  for (const auto& d : deletes) {
    ct.pending.erase(d);
    if (!ct.running || hot_applied(ct, d)) {
      if (is_mp_key(d) || is_unused_key(d))
        volume_deletes.push_back(d);
      else
        ct.config.erase(d);
      ct.pending_delete.erase(d);
    } else {
      ct.pending_delete.insert(d);
    }
  }
  for (auto& [k, v] : changes) {
    if (k == "tags") v = normalize_tags(v);
    ct.pending_delete.erase(k);
    if (!ct.running || hot_applied(ct, k)) {
      (is_mp_key(k) ? volume_changes[k] : ct.config[k]) = v;
      ct.pending.erase(k);
    } else {
      ct.pending[k] = v;
    }
  }
  std::vector<std::string> log;
  if (ct.running && (changes.count("cpuunits") ||
                     std::find(deletes.begin(), deletes.end(), "cpuunits") != deletes.end())) {
    auto units = ct.config.count("cpuunits") ? std::atoll(ct.config["cpuunits"].c_str()) : 0;
    if (auto error = backend->set_cpu_units(ct.vmid, units); !error.empty()) log.push_back(error);
  }
  auto e = volumes->apply(ct.node, ct.vmid, ct.config, volume_deletes, volume_changes, &log);
  warn_all(ct, log);
  if (e) throw ApiFail{e.status, e.message, e.errors};
}

// Warnings of a synchronous API call (Proxmox's go to the syslog).
void Simulator::Impl::warn_all(const Container& ct, const std::vector<std::string>& lines) {
  for (const auto& line : lines)
    pvs::log::warn("pvesim: CT " + std::to_string(ct.vmid) + ": " + line);
}

std::string Simulator::Impl::resize(Call& c) {
  const std::string node = node_of(c);
  Container& ct = need(c, vmid_param(c));
  check_unlocked(ct);
  std::string disk = param(c, "disk"), size = param(c, "size"), volid;
  uint64_t current = rootfs_size(ct), target = 0;
  if (disk != "rootfs") {  // a mount point's volume (its owner only)
    if (auto e =
            volumes->check_resize(node, ct.vmid, ct.config, disk, size, &volid, &current, &target))
      throw ApiFail{e.status, e.message, e.errors};
  } else {
    bool grow = !size.empty() && size[0] == '+';
    uint64_t amount = 0;
    if (!parse_size(grow ? size.substr(1) : size, &amount))
      throw fail400("size", "unable to parse size '" + size + "'");
    target = grow ? current + amount : amount;
    if (target < current) throw fail500("unable to shrink disk size");
    if (target == current) throw fail500("disk is already at specified size");
  }
  int vmid = ct.vmid;
  auto work = [this, vmid, volid, target] {
    return volid.empty() ? "" : backend->resize_volume(vmid, volid, target);
  };
  auto done = [this, node, vmid, disk, volid, target] {
    Container* n = find_on(node, vmid);
    if (!n) return conf_missing(node, vmid);
    if (!volid.empty()) volumes->set_size(node, volid, target);
    auto& value = n->config[disk];
    auto pos = value.find("size=");
    if (pos != std::string::npos) {
      auto end = value.find(',', pos);
      value.replace(pos, end == std::string::npos ? std::string::npos : end - pos,
                    "size=" + format_disk_size(target));
    } else {
      value += ",size=" + format_disk_size(target);
    }
    return std::string();
  };
  return start_task("resize", std::to_string(vmid), c.user, node, done, nullptr, work);
}

std::string Simulator::Impl::start(Call& c) {
  const std::string node = node_of(c);
  int vmid = vmid_param(c);
  if (flag(c, "skiplock") && c.user.rfind("root@pam", 0) != 0)
    throw fail400("skiplock", "Only root may use this option.");
  Container* ct = find_on(node, vmid);
  if (ct && ct->running) throw fail500("CT " + std::to_string(vmid) + " already running");
  // The namespace and sshd of the netns backend take a while: that part runs without the
  // state lock, so the API keeps answering (as pveproxy does while a CT starts).
  struct Start {
    bool skip = false;
    std::map<std::string, std::string> config;
    std::string ipv4;
  };
  auto st = std::make_shared<Start>();
  auto pre = [this, node, vmid, st] {
    Container* n = find_on(node, vmid);
    if (!n) return conf_missing(node, vmid);
    std::string lock = lock_of(*n);
    if (!lock.empty()) return "CT is locked (" + lock + ")";
    if (config_int(*n, "template", 0))
      return std::string("you can't start a CT if it's a template");
    st->skip = n->running;
    if (!st->skip) apply_pending(*n);  // vm_start: vmconfig_apply_pending
    if (auto e = volumes->check_start(node, n->config); !e.empty() && !st->skip) return e;
    st->config = n->config;
    st->ipv4 = ipv4_of(*n);
    return std::string();
  };
  auto work = [this, vmid, st] {
    if (st->skip) return std::string();
    std::string error = backend->start(vmid, st->config, st->ipv4);
    if (!error.empty())
      return "startup for container '" + std::to_string(vmid) + "' failed: " + error;
    return std::string();
  };
  auto finish = [this, node, vmid, st] {
    Container* n = find_on(node, vmid);
    if (!n) {  // destroyed meanwhile
      if (!st->skip) backend->stop(vmid);
      return conf_missing(node, vmid);
    }
    if (!st->skip) {
      n->running = true;
      n->started = Clock::now();
      n->started_unix = unix_now();
    }
    return std::string();
  };
  return start_task("vzstart", std::to_string(vmid), c.user, node, finish, pre, work);
}

std::string Simulator::Impl::stop_like(Call& c) {
  const std::string node = node_of(c);
  int vmid = vmid_param(c);
  Container& ct = need(c, vmid);
  std::string kind = c.endpoint->path.substr(c.endpoint->path.rfind('/') + 1);
  if (!ct.running)
    throw fail500((kind == "reboot" ? "VM " : "CT ") + std::to_string(vmid) + " not running");
  std::string type = kind == "stop" ? "vzstop" : kind == "shutdown" ? "vzshutdown" : "vzreboot";
  bool skiplock = flag(c, "skiplock");
  if (type != "vzreboot") {
    auto skip = std::make_shared<bool>(false);
    auto pre = [this, node, vmid, skiplock, skip] {
      Container* n = find_on(node, vmid);
      if (!n) return conf_missing(node, vmid);
      std::string lock = lock_of(*n);
      if (!lock.empty() && lock != "mounted" && !skiplock) return "CT is locked (" + lock + ")";
      *skip = !n->running;
      return std::string();
    };
    auto work = [this, vmid, skip] {
      if (!*skip) backend->stop(vmid);
      return std::string();
    };
    auto finish = [this, node, vmid, skip] {
      Container* n = find_on(node, vmid);
      if (n && !*skip) {
        n->running = false;
        release_lease(*n);
      }
      return std::string();
    };
    return start_task(type, std::to_string(vmid), c.user, node, finish, pre, work);
  }
  return start_task(type, std::to_string(vmid), c.user, node, [this, node, vmid, type, skiplock] {
    Container* n = find_on(node, vmid);
    if (!n) return conf_missing(node, vmid);
    std::string lock = lock_of(*n);
    if (!lock.empty() && lock != "mounted" && !skiplock) return "CT is locked (" + lock + ")";
    if (!n->running) return std::string();
    backend->stop(vmid);
    if (type == "vzreboot") {
      std::string error = backend->start(vmid, n->config, ipv4_of(*n));
      if (!error.empty()) {
        n->running = false;
        return error;
      }
      n->started = Clock::now();
      n->started_unix = unix_now();
      return std::string();
    }
    n->running = false;
    release_lease(*n);
    return std::string();
  });
}

Var Simulator::Impl::interfaces(Container& ct) {
  if (!ct.running) return Var();  // {"data":null}
  auto live = backend->interfaces(ct.vmid);
  bool dhcp_done =
      Clock::now() - ct.started >= std::chrono::milliseconds(options.interfaces_delay_ms);
  Array::Ptr a = new Array;
  for (const auto& iface : live) {
    Object::Ptr o = new Object;
    o->set("name", iface.name);
    o->set("hwaddr", iface.hwaddr);
    o->set("hardware-address", iface.hwaddr);
    Array::Ptr addrs = new Array;
    std::string inet, inet6;
    for (const auto& addr : iface.addresses) {
      bool v6 = addr.find(':') != std::string::npos;
      if (!v6 && iface.name != "lo" && !dhcp_done) continue;
      Object::Ptr ao = new Object;
      auto slash = addr.find('/');
      ao->set("ip-address", addr.substr(0, slash));
      ao->set("ip-address-type", v6 ? "inet6" : "inet");
      ao->set("prefix", std::stoi(addr.substr(slash + 1)));
      addrs->add(ao);
      (v6 ? inet6 : inet) = addr;  // only the last one of a family is kept
    }
    o->set("ip-addresses", addrs);
    if (!inet.empty()) o->set("inet", inet);
    if (!inet6.empty()) o->set("inet6", inet6);
    a->add(o);
  }
  return a;
}

std::string Simulator::Impl::destroy(Call& c) {
  const std::string node = node_of(c);
  int vmid = vmid_param(c);
  Container& ct = need(c, vmid);
  if (config_int(ct, "protection", 0))
    throw fail500("can't remove CT " + std::to_string(vmid) + " - protection mode enabled");
  check_unlocked(ct);
  bool force = flag(c, "force"), unreferenced = flag(c, "destroy-unreferenced-disks");
  if (ct.running && !force)
    throw fail500("unable to destroy CT " + std::to_string(vmid) + " - container is running");
  ct.config["lock"] = "destroyed";
  auto upid = std::make_shared<std::string>();
  *upid = start_task("vzdestroy", std::to_string(vmid), c.user, node, [=, this] {
    Container* n = find_on(node, vmid);
    if (!n) return conf_missing(node, vmid);
    // The worker checks again under the config flock: a start that ran meanwhile wins.
    if (n->running && !force) {
      n->config.erase("lock");
      return "unable to destroy CT " + std::to_string(vmid) + " - container is running";
    }
    if (n->running) {
      backend->stop(vmid);
      n->running = false;
    }
    // destroy_lxc_container: the volumes the CT owns are freed, the others stay (logged).
    auto& log = tasks[*upid].log;
    if (auto e = volumes->destroy(node, vmid, {n->config, n->pending}, unreferenced, &log);
        !e.empty()) {
      n->config.erase("lock");
      return e;
    }
    backend->destroy(vmid);
    release_lease(*n);
    for (auto& [id, pool] : pools) pool.members.erase(vmid);
    cts.erase(vmid);
    return std::string();
  });
  return *upid;
}

}  // namespace pvesim
