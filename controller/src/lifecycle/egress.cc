// Egress and the L2 guard, per node: what its agent should hold (granted, listed, bound), grant
// and revoke, allowlists and the order of egress changes, the one quarantine of an address
// whose revoke failed, and the SYNC (and EGRESSES pass) that makes the agent hold exactly the
// desired state.
#include "core.h"
#include "pvesandbox/common/log.h"

namespace pvs::lifecycle {
namespace {

bool is_listed(Node& n, Ipv4Address address) {
  std::lock_guard lock(n.agent_mu);
  return n.listed.count(address) > 0;
}

}  // namespace

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

Status ManagerCore::list(Node& n, Ipv4Address address, const EgressList& list) {
  std::lock_guard lock(n.agent_mu);
  std::optional<EgressList> before;
  if (auto it = n.listed.find(address); it != n.listed.end()) before = it->second;
  n.listed[address] = list;
  if (auto r = n.agent.egress(address, list); !r) {
    // The agent may have taken the new list: back to the old one, or to none.
    if (before) {
      n.listed[address] = *before;
      if (!n.agent.egress(address, *before)) quarantine(n, address);
    } else {
      n.listed.erase(address);
      if (!n.agent.egress_off(address)) quarantine(n, address);
    }
    return r;
  }
  return {};
}

Status ManagerCore::unlist(Node& n, Ipv4Address address) {
  std::lock_guard lock(n.agent_mu);
  n.listed.erase(address);
  if (auto r = n.agent.egress_off(address); !r) {
    quarantine(n, address);
    log::warn("EGRESS off of " + address.to_string() +
              " failed, address quarantined: " + r.error().message);
    return r;
  }
  return {};
}

Status ManagerCore::revoke_all(Node& n, Ipv4Address address) {
  Status result = ungrant(n, address);
  if (is_listed(n, address)) {
    if (auto r = unlist(n, address); !r && result) result = r;
  }
  return result;
}

// on: ALLOW, then EGRESS off. allowlist: EGRESS, then REVOKE. off: REVOKE, then EGRESS off.
// A listed address in the ALLOW set reaches only its list (the ruleset checks pairs first), so
// no step is wider than the end states.
Status ManagerCore::change_egress(Node& n, Ipv4Address address, const Egress& from,
                                  const Egress& to, bool* in_effect) {
  *in_effect = false;
  bool was_listed = from.allowlist() || is_listed(n, address);
  switch (to.mode) {
    case Egress::Mode::kOn:
      if (auto r = grant(n, address); !r) return r;
      *in_effect = true;
      return was_listed ? unlist(n, address) : Status{};
    case Egress::Mode::kAllowlist:
      if (auto r = list(n, address, to.list); !r) return r;
      *in_effect = true;
      return from.mode == Egress::Mode::kOn ? ungrant(n, address) : Status{};
    case Egress::Mode::kOff: break;
  }
  *in_effect = true;  // what is left is at most narrower than `from`
  Status r = ungrant(n, address);
  if (was_listed) {
    if (auto u = unlist(n, address); !u && r) r = u;
  }
  return r;
}

Status ManagerCore::start_egress(Step& s, const CreateOptions& o) {
  auto e = create_egress(o);
  if (!e) return fail(e.error());
  if (e->mode == Egress::Mode::kOff) return {};
  s.granted = true;  // rollback revokes (and unlists) even if the verb failed half-way
  if (auto h = hook("internet"); !h) return h;
  if (e->allowlist()) return list(*s.node, *s.address, e->list);
  return grant(*s.node, *s.address);
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
  std::optional<Ipv4Address> address;
  {
    std::lock_guard lock(n.agent_mu);
    if (auto it = n.bound.find(port); it != n.bound.end()) address = it->second.address;
    n.bound.erase(port);
    if (auto r = n.agent.unbind(port); !r)
      log::warn("unbind of " + port + " failed (reconcile retries): " + r.error().message);
  }
  // The agent dropped the address's routes. Not under agent_mu: the route table calls the agent
  // under its own lock.
  if (address) n.routes.forget(*address);
}

Status ManagerCore::sync_agent(Node& n, const std::set<std::string>& keep_ports) {
  std::lock_guard lock(n.agent_mu);
  std::vector<proto::Grant> grants;
  auto ttl = static_cast<std::uint32_t>(cfg_.internet_lease.count());
  if (!n.recovered) {
    // A sandbox not adopted yet is in none of granted, listed and bound: a SYNC would take its
    // grant, its list and its binding away (docs/architecture.md, "Recovery").
    for (auto a : n.granted)
      if (auto r = n.agent.allow(a, ttl); !r) return r;
    return {};
  }
  for (auto a : n.granted) grants.push_back(proto::Grant{a, ttl});
  if (auto r = n.agent.sync(grants); !r) return fail(r.error());
  if (auto r = sync_lists(n); !r) return r;
  // The set is now exactly granted, the lists exactly listed: every quarantined address in
  // neither is confirmed gone.
  std::set<Ipv4Address> live;
  {
    std::lock_guard reg(mu_);
    for (auto& [id, sb] : registry_)
      if (&sb->node() == &n) live.insert(sb->address());
  }
  for (auto a : n.quarantine) {
    if (n.granted.count(a) || n.listed.count(a)) continue;
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

// EGRESSES, then EGRESS for each list missing or different and EGRESS off for each extra.
// Once per agent connection a STATUS tells whether the agent has the verbs at all: one from
// before #20 (no egress_sources field) holds no lists, so there is nothing to compare while no
// sandbox of the node wants one (and no failed call is counted against it).
Status ManagerCore::sync_lists(Node& n) {
  if (n.egress_probed != n.agent.connects()) {
    if (auto st = n.agent.status()) {
      auto sources = proto::find_field(*st, "egress_sources");
      n.egress_verbs = sources.has_value();
      n.egress_probed = n.agent.connects();
    }
  }
  if (!n.egress_verbs && n.listed.empty()) return {};
  auto have = n.agent.egresses();
  if (!have) {
    if (have.error().code == ErrorCode::kInvalidArgument && n.listed.empty()) return {};
    return fail(have.error());
  }
  for (auto& [address, list] : *have) {
    if (n.listed.count(address)) continue;
    if (auto r = n.agent.egress_off(address); !r) return r;
  }
  for (auto& [address, list] : n.listed) {
    auto it = have->find(address);
    if (it != have->end() && it->second == list) continue;
    if (auto r = n.agent.egress(address, list); !r) return r;
  }
  return {};
}

}  // namespace pvs::lifecycle
