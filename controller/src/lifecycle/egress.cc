// Egress and the L2 guard, per node: what its agent should hold (granted, bound), grant and revoke,
// the one quarantine of an address whose revoke failed, and the SYNC that makes the agent's
// set exactly the desired one.
#include "core.h"
#include "pvesandbox/common/log.h"

namespace pvs::lifecycle {

Status ManagerCore::grant(Node& n, Ipv4Address address) {
  std::lock_guard lock(n.agent_mu);
  n.granted.insert(address);
  auto ttl = static_cast<std::uint32_t>(cfg_.internet_lease.count());
  if (auto r = n.agent.allow(address, ttl); !r) {
    // The agent may have committed before the failure reached us: the address stays out of
    // the desired set, and the next SYNC removes it if it got in.
    n.granted.erase(address);
    if (!n.agent.revoke(address)) quarantine(n, address);
    return r;
  }
  return {};
}

Status ManagerCore::ungrant(Node& n, Ipv4Address address) {
  std::lock_guard lock(n.agent_mu);
  n.granted.erase(address);
  if (auto r = n.agent.revoke(address); !r) {
    quarantine(n, address);
    log::warn("revoke of " + address.to_string() +
              " failed, address quarantined: " + r.error().message);
    return r;
  }
  return {};
}

// Never ignored: an address the agent may still hold is kept out of the address pool until a
// SYNC proves the set no longer has it (sync_agent).
void ManagerCore::quarantine(Node& n, Ipv4Address address) {
  n.quarantine.insert(address);
  n.quarantined = n.quarantine.size();
  n.addrs->quarantine(address);
}

Status ManagerCore::bind(Node& n, const proto::Binding& binding) {
  std::lock_guard lock(n.agent_mu);
  n.bound[binding.port] = binding;
  auto r = n.agent.bind(binding);
  if (!r) n.bound.erase(binding.port);
  return r;
}

void ManagerCore::unbind(Node& n, const std::string& port) {
  std::lock_guard lock(n.agent_mu);
  n.bound.erase(port);
  if (auto r = n.agent.unbind(port); !r)
    log::warn("unbind of " + port + " failed (reconcile retries): " + r.error().message);
}

Status ManagerCore::sync_agent(Node& n, const std::set<std::string>& keep_ports) {
  std::lock_guard lock(n.agent_mu);
  std::vector<proto::Grant> grants;
  auto ttl = static_cast<std::uint32_t>(cfg_.internet_lease.count());
  for (auto a : n.granted) grants.push_back(proto::Grant{a, ttl});
  if (auto r = n.agent.sync(grants); !r) return fail(r.error());
  // The set is now exactly granted_: every quarantined address not in it is confirmed gone.
  std::set<Ipv4Address> live;
  {
    std::lock_guard reg(mu_);
    for (auto& [id, sb] : registry_)
      if (&sb->node() == &n) live.insert(sb->address());
  }
  for (auto a : n.quarantine) {
    if (n.granted.count(a)) continue;
    if (live.count(a))
      n.addrs->mark_used(a);
    else
      n.addrs->release_quarantined(a);
  }
  n.quarantine.clear();
  n.quarantined = 0;

  auto current = n.agent.bindings();
  if (!current) return fail(current.error());
  std::map<std::string, proto::Binding> have;
  for (auto& b : *current) have[b.port] = b;
  for (auto& [port, b] : have) {
    if (!n.bound.count(port) && !keep_ports.count(port)) {
      if (auto r = n.agent.unbind(port); !r) return r;
    }
  }
  for (auto& [port, b] : n.bound) {
    auto it = have.find(port);
    if (it == have.end() || !(it->second == b)) {
      if (auto r = n.agent.bind(b); !r) return r;
    }
  }
  return {};
}

}  // namespace pvs::lifecycle
