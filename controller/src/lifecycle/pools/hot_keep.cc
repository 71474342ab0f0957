// Hot pool members during reconcile: a member this process holds is kept while it runs and its
// config is the one it had when it became ready; after a restart a running member is adopted
// only if its profile still exists unchanged, it is bound as a sandbox of ours would be, and it
// answers over SSH on its own recorded host key. Everything else is destroyed as an orphan.
#include <algorithm>

#include "core.h"
#include "pvesandbox/common/log.h"

namespace pvs::lifecycle {

bool ManagerCore::keep_hot(Node& n, const pve::ContainerStatus& ct, const pve::Config& conf,
                           const SandboxMetadata& md) {
  if (conf.count("lock")) return true;  // a task of somebody's runs on it: look again later
  auto digest = conf.count("digest") ? conf.at("digest") : "";
  {
    std::lock_guard lock(mu_);
    if (claimed_or_busy(ct.vmid)) return true;
    for (auto& h : hot_) {
      auto it = std::find_if(h.ready.begin(), h.ready.end(),
                             [&](const HotMember& m) { return m.vmid == ct.vmid; });
      if (it == h.ready.end()) continue;
      if (ct.status == "running" && (it->digest.empty() || it->digest == digest)) return true;
      log::info("hot member " + std::to_string(ct.vmid) + " replaced: " +
                (ct.status != "running" ? "it is " + ct.status : "its config changed"));
      if (it->ssh) it->ssh->close();
      h.ready.erase(it);
      ++h.replaced;
      hot_cv_.notify_all();
      return false;  // reap unbinds, destroys and releases it
    }
  }
  int profile = -1;
  auto m = adoptable_member(n, ct, conf, md, &profile);
  if (!m) return false;
  {
    std::lock_guard lock(n.agent_mu);
    n.bound[m->binding.port] = m->binding;  // the SYNC makes the agent hold it
  }
  std::lock_guard lock(mu_);
  auto& h = hot_[profile];
  if (claimed_or_busy(ct.vmid) ||
      static_cast<int>(h.ready.size()) + h.filling >= h.p.size) {  // filled meanwhile
    std::lock_guard agent(n.agent_mu);
    n.bound.erase(m->binding.port);
    return false;
  }
  h.disk_gb = m->disk_gb;
  h.ready.push_back(std::move(*m));
  log::info("adopted hot member " + std::to_string(ct.vmid) + " of " + h.p.name + " on " +
            n.cfg.name);
  return true;
}

// A running member of an unchanged profile, bound as ours would be, answering on its own key.
std::optional<ManagerCore::HotMember> ManagerCore::adoptable_member(Node& n,
                                                                    const pve::ContainerStatus& ct,
                                                                    const pve::Config& conf,
                                                                    const SandboxMetadata& md,
                                                                    int* profile) {
  if (ct.status != "running" || !md.address) return std::nullopt;
  auto label = md.labels.find(std::string(kPoolProfileLabel));
  auto tpl = md.labels.find(std::string(kPoolTemplateLabel));
  HotPoolProfile p;
  {
    std::lock_guard lock(mu_);
    for (std::size_t i = 0; i < hot_.size(); ++i)
      if (label != md.labels.end() && hot_[i].p.name == label->second && hot_[i].node == &n)
        *profile = static_cast<int>(i);
    if (*profile < 0) return std::nullopt;
    p = hot_[*profile].p;
    if (static_cast<int>(hot_[*profile].ready.size()) + hot_[*profile].filling >= p.size)
      return std::nullopt;
  }
  bool same_profile = tpl != md.labels.end() && tpl->second == std::to_string(p.template_vmid) &&
                      config_int(conf, "cores", 0) == p.cpus &&
                      config_int(conf, "memory", 0) == p.memory_mb;
  int disk_gb = conf.count("rootfs") ? size_gb(conf.at("rootfs")) : 0;
  if (!same_profile || (p.disk_gb != 0 && disk_gb != p.disk_gb)) return std::nullopt;
  auto net0 = parse_property_string(conf.count("net0") ? conf.at("net0") : "");
  auto mac = MacAddress::parse(net0["hwaddr"]);
  bool bound_as_ours = mac && *mac == mac_for(*md.address) && net0["bridge"] == n.cfg.bridge &&
                       (net0["firewall"] == "1") == cfg_.firewall &&
                       net0["ip"] == (cfg_.dhcp ? "dhcp"
                                                : md.address->to_string() + "/" +
                                                      std::to_string(n.cfg.sandbox_cidr.prefix()));
  if (!bound_as_ours) return std::nullopt;
  HotMember m{&n,
              ct.vmid,
              md.id,
              {port_name(ct.vmid, cfg_.firewall), *mac, *md.address},
              nullptr,
              md.host_key,
              conf.count("digest") ? conf.at("digest") : "",
              p.cpus,
              p.memory_mb,
              disk_gb,
              conf.count("cpuunits") > 0};
  if (cfg_.wait_for_ssh) {
    if (cfg_.per_sandbox_host_keys && !is_sha256_fingerprint(md.host_key)) return std::nullopt;
    SshConfig sc = cfg_.ssh;
    sc.host = md.address->to_string();
    sc.connect_timeout = std::min(sc.connect_timeout, milliseconds(3000));
    if (is_sha256_fingerprint(md.host_key)) {
      sc.host_key_policy = HostKeyPolicy::kPinned;
      sc.host_key_fingerprint = md.host_key;
    }
    m.ssh = std::make_shared<SshSession>(sc);
    if (auto r = m.ssh->connect(); !r) {
      log::info("hot member " + std::to_string(ct.vmid) + " not adopted: " + r.error().message);
      return std::nullopt;
    }
  }
  return m;
}

// Members whose container vanished behind our back: forgotten, their binding dropped.
void ManagerCore::forget_vanished_members(Node& n, const std::set<int>& hot_before,
                                          const std::set<int>& present) {
  std::vector<HotMember> gone;
  {
    std::lock_guard lock(mu_);
    for (auto& h : hot_) {
      if (h.node != &n) continue;
      for (auto it = h.ready.begin(); it != h.ready.end();) {
        if (hot_before.count(it->vmid) && !present.count(it->vmid)) {
          gone.push_back(std::move(*it));
          it = h.ready.erase(it);
          ++h.replaced;
        } else {
          ++it;
        }
      }
    }
    if (!gone.empty()) hot_cv_.notify_all();
  }
  for (auto& m : gone) {
    log::warn("hot member " + std::to_string(m.vmid) + " vanished from Proxmox; forgetting it");
    if (m.ssh) m.ssh->close();
    unbind(n, m.binding.port);
    vmids_.release(static_cast<std::uint32_t>(m.vmid));
    n.addrs->release(m.binding.address);
  }
}

}  // namespace pvs::lifecycle
