// Egress and the L2 guard: what the agent should hold (granted_, bound_), grant and revoke,
// the one quarantine of an address whose revoke failed, and the SYNC that makes the agent's
// set exactly the desired one.
#include "core.h"
#include "pvesandbox/common/log.h"

namespace pvs::lifecycle {

Status ManagerCore::grant(Ipv4Address address) {
  std::lock_guard lock(agent_mu_);
  granted_.insert(address);
  auto ttl = static_cast<std::uint32_t>(cfg_.internet_lease.count());
  if (auto r = agent_.allow(address, ttl); !r) {
    // The agent may have committed before the failure reached us: the address stays out of
    // the desired set, and the next SYNC removes it if it got in.
    granted_.erase(address);
    if (!agent_.revoke(address)) quarantine(address);
    return r;
  }
  return {};
}

Status ManagerCore::ungrant(Ipv4Address address) {
  std::lock_guard lock(agent_mu_);
  granted_.erase(address);
  if (auto r = agent_.revoke(address); !r) {
    quarantine(address);
    log::warn("revoke of " + address.to_string() +
              " failed, address quarantined: " + r.error().message);
    return r;
  }
  return {};
}

// Never ignored: an address the agent may still hold is kept out of the address pool until a
// SYNC proves the set no longer has it (sync_agent).
void ManagerCore::quarantine(Ipv4Address address) {
  quarantine_.insert(address);
  quarantined_ = quarantine_.size();
  addrs_->quarantine(address);
}

Status ManagerCore::bind(const proto::Binding& binding) {
  std::lock_guard lock(agent_mu_);
  bound_[binding.port] = binding;
  auto r = agent_.bind(binding);
  if (!r) bound_.erase(binding.port);
  return r;
}

void ManagerCore::unbind(const std::string& port) {
  std::lock_guard lock(agent_mu_);
  bound_.erase(port);
  if (auto r = agent_.unbind(port); !r)
    log::warn("unbind of " + port + " failed (reconcile retries): " + r.error().message);
}

Status ManagerCore::sync_agent(const std::set<std::string>& keep_ports) {
  std::lock_guard lock(agent_mu_);
  std::vector<proto::Grant> grants;
  auto ttl = static_cast<std::uint32_t>(cfg_.internet_lease.count());
  for (auto a : granted_) grants.push_back(proto::Grant{a, ttl});
  if (auto r = agent_.sync(grants); !r) return fail(r.error());
  // The set is now exactly granted_: every quarantined address not in it is confirmed gone.
  std::set<Ipv4Address> live;
  {
    std::lock_guard reg(mu_);
    for (auto& [id, sb] : registry_) live.insert(sb->address());
  }
  for (auto a : quarantine_) {
    if (granted_.count(a)) continue;
    if (live.count(a))
      addrs_->mark_used(a);
    else
      addrs_->release_quarantined(a);
  }
  quarantine_.clear();
  quarantined_ = 0;

  auto current = agent_.bindings();
  if (!current) return fail(current.error());
  std::map<std::string, proto::Binding> have;
  for (auto& b : *current) have[b.port] = b;
  for (auto& [port, b] : have) {
    if (!bound_.count(port) && !keep_ports.count(port)) {
      if (auto r = agent_.unbind(port); !r) return r;
    }
  }
  for (auto& [port, b] : bound_) {
    auto it = have.find(port);
    if (it == have.end() || !(it->second == b)) {
      if (auto r = agent_.bind(b); !r) return r;
    }
  }
  return {};
}

}  // namespace pvs::lifecycle
