// The agent's bridge-port bindings: BIND, UNBIND, BINDINGS, the kernel's port_mac/port_ip4
// elements and the dnsmasq reservation mirror; and ROUTE/UNROUTE, the port proxy's routes to a
// bound address. The grant verbs are in agent.cc.
#include <algorithm>
#include <map>

#include "agent.h"
#include "pvesandbox/common/log.h"

namespace pvs::agent {

Status Agent::kernel_port_elements(const std::string& port, std::vector<RawElement>* macs,
                                   std::vector<RawElement>* ips) {
  auto current = kernel_bindings(macs, ips);
  if (!current) return fail(current.error());
  std::erase_if(*macs, [&](const RawElement& e) {
    auto d = decode_port_mac_key(e.key);
    return !d || d->first != port;
  });
  std::erase_if(*ips, [&](const RawElement& e) {
    auto d = decode_port_ip4_key(e.key);
    return !d || d->first != port;
  });
  return {};
}

Result<std::vector<proto::Binding>> Agent::kernel_bindings(std::vector<RawElement>* mac_elements,
                                                           std::vector<RawElement>* ip_elements) {
  auto macs = backend_->list(port_mac_);
  if (!macs) return fail(missing_error(macs.error(), port_mac_));
  auto ips = backend_->list(port_ip4_);
  if (!ips) return fail(missing_error(ips.error(), port_ip4_));
  std::map<std::string, MacAddress> mac_of;
  std::map<std::string, Ipv4Address> ip_of;
  for (const auto& e : *macs) {
    if (auto d = decode_port_mac_key(e.key)) {
      mac_of.emplace(d->first, d->second);
      if (mac_elements != nullptr) mac_elements->push_back(RawElement{e.key, std::nullopt});
    }
  }
  for (const auto& e : *ips) {
    if (auto d = decode_port_ip4_key(e.key)) {
      ip_of.emplace(d->first, d->second);
      if (ip_elements != nullptr) ip_elements->push_back(RawElement{e.key, std::nullopt});
    }
  }
  std::vector<proto::Binding> out;
  for (const auto& [port, mac] : mac_of) {
    auto ip = ip_of.find(port);
    if (ip != ip_of.end()) out.push_back(proto::Binding{port, mac, ip->second});
  }
  return out;
}

std::string Agent::do_bind(const Peer& peer, const proto::BindRequest& r) {
  const auto& b = r.binding;
  std::string what = "verb=BIND port=" + b.port + " mac=" + b.mac.to_string() +
                     " address=" + b.address.to_string();
  auto reply = [&]() -> std::string {
    if (auto ok = check_address(b.address); !ok) return error_reply(ok.error());
    for (const auto& [port, other] : desired_.bindings) {
      if (port != b.port && other.address == b.address) {
        return error_reply(Error{ErrorCode::kConflict, "address " + b.address.to_string() +
                                                           " is bound to port " + port +
                                                           ": UNBIND it first"});
      }
    }
    if (!desired_.bindings.contains(b.port) && desired_.bindings.size() >= config_.max_bindings) {
      return error_reply(Error{ErrorCode::kTooLarge, "too many bindings: max_bindings " +
                                                         std::to_string(config_.max_bindings)});
    }
    // Replace: remove whatever the kernel has for this port, then add the new pair.
    std::vector<RawElement> old_macs, old_ips;
    if (auto ok = kernel_port_elements(b.port, &old_macs, &old_ips); !ok) {
      return error_reply(ok.error());
    }
    // The DHCP reservation first: a port that is let through must also get its address. If it
    // cannot be written, nothing changes.
    if (dhcp_.enabled()) {
      if (auto ok = dhcp_.write(b); !ok) {
        return error_reply(Error{ErrorCode::kIo, "dhcp reservation: " + ok.error().message});
      }
    }
    Batch batch;
    batch.destroy(port_mac_, std::move(old_macs));
    batch.destroy(port_ip4_, std::move(old_ips));
    batch.add(port_mac_, {RawElement{port_mac_key(b.port, b.mac), std::nullopt}});
    batch.add(port_ip4_, {RawElement{port_ip4_key(b.port, b.address), std::nullopt}});
    if (auto ok = backend_->commit(batch); !ok) {
      if (dhcp_.enabled()) {
        // Back to what the port had: its previous binding's reservation, or none.
        auto previous = desired_.bindings.find(b.port);
        auto undo = previous != desired_.bindings.end() ? dhcp_.write(previous->second)
                                                        : dhcp_.remove(b.port);
        if (!undo) {
          log::warn("dhcp_hosts_dir: undoing " + b.port + ": " + undo.error().message);
          dhcp_dirty_ = true;
        }
      }
      return error_reply(missing_error(ok.error(), port_mac_));
    }
    desired_.bindings[b.port] = b;
    ++changes_;
    journal_pending_ +=
        "bind " + b.port + " " + b.mac.to_string() + " " + b.address.to_string() + "\n";
    return proto::format_ok();
  }();
  log_change(peer, what, reply);
  return reply;
}

std::string Agent::do_unbind(const Peer& peer, const proto::UnbindRequest& r) {
  std::string what = "verb=UNBIND port=" + r.port;
  auto reply = [&]() -> std::string {
    std::optional<Ipv4Address> address;
    if (auto it = desired_.bindings.find(r.port); it != desired_.bindings.end())
      address = it->second.address;
    if (desired_.bindings.erase(r.port) > 0) {
      ++changes_;
      journal_pending_ += "unbind " + r.port + "\n";
    }
    // A reservation left behind is harmless (the L2 guard drops the unbound port's frames, and
    // the controller derives a MAC from its address, so it can only ever be re-bound as it was),
    // but the directory is tidied up at the next mirror.
    if (dhcp_.enabled()) {
      if (auto ok = dhcp_.remove(r.port); !ok) {
        log::warn("dhcp_hosts_dir: " + ok.error().message);
        dhcp_dirty_ = true;
      }
    }
    std::vector<RawElement> old_macs, old_ips;
    if (auto ok = kernel_port_elements(r.port, &old_macs, &old_ips); !ok) {
      return error_reply(ok.error());
    }
    for (const auto& e : old_ips)
      if (auto d = decode_port_ip4_key(e.key); d && !address) address = d->second;
    Batch batch;
    batch.destroy(port_mac_, std::move(old_macs));
    batch.destroy(port_ip4_, std::move(old_ips));
    if (auto ok = commit(batch, port_mac_); !ok) return error_reply(ok.error());
    bool still_bound =
        address && std::any_of(desired_.bindings.begin(), desired_.bindings.end(),
                               [&](const auto& b) { return b.second.address == *address; });
    if (address && !still_bound) drop_routes(*address);
    return proto::format_ok();
  }();
  log_change(peer, what, reply);
  return reply;
}

std::string Agent::do_bindings() {
  auto bindings = kernel_bindings(nullptr, nullptr);
  if (!bindings) return error_reply(bindings.error());
  return proto::format_ok(proto::format_bindings_payload(*bindings));
}

// A route is kernel state only (not journalled, not re-applied): it lives at most its timeout,
// and the controller asks again for a connection that outlives half of it.
std::string Agent::do_route(const Peer& peer, const proto::RouteRequest& r) {
  std::string what = "verb=ROUTE address=" + r.address.to_string() +
                     " port=" + std::to_string(r.port) + " seconds=" + std::to_string(r.seconds);
  auto reply = [&]() -> std::string {
    if (auto ok = check_address(r.address); !ok) return error_reply(ok.error());
    bool bound = std::any_of(desired_.bindings.begin(), desired_.bindings.end(),
                             [&](const auto& b) { return b.second.address == r.address; });
    if (!bound) {
      return error_reply(Error{
          ErrorCode::kPermissionDenied,
          "address not bound: " + r.address.to_string() + " is bound to no sandbox port (BIND)"});
    }
    RawElement element{route_key(r.address, r.port), std::uint64_t{r.seconds} * 1000};
    // Destroy + add in one batch: a new timeout on every kernel, with no gap between.
    Batch batch;
    batch.destroy(proxy_routes_, {RawElement{element.key, std::nullopt}});
    batch.add(proxy_routes_, {element});
    if (auto ok = commit(batch, proxy_routes_); !ok) return error_reply(ok.error());
    return proto::format_ok();
  }();
  log_change(peer, what, reply);
  return reply;
}

// Idempotent, and allowed for an address no longer bound (its sandbox went first).
std::string Agent::do_unroute(const Peer& peer, const proto::UnrouteRequest& r) {
  std::string what =
      "verb=UNROUTE address=" + r.address.to_string() + " port=" + std::to_string(r.port);
  auto reply = [&]() -> std::string {
    if (auto ok = check_address(r.address); !ok) return error_reply(ok.error());
    Batch batch;
    batch.destroy(proxy_routes_, {RawElement{route_key(r.address, r.port), std::nullopt}});
    if (auto ok = commit(batch, proxy_routes_); !ok) return error_reply(ok.error());
    return proto::format_ok();
  }();
  log_change(peer, what, reply);
  return reply;
}

void Agent::drop_routes(Ipv4Address address) {
  auto elements = backend_->list(proxy_routes_);
  if (!elements) {
    log::debug("proxy_routes of " + address.to_string() + " left to their timeouts: " +
               missing_error(elements.error(), proxy_routes_).message);
    return;
  }
  std::vector<RawElement> gone;
  for (const auto& e : *elements)
    if (auto d = decode_route_key(e.key); d && d->first == address)
      gone.push_back({e.key, std::nullopt});
  if (gone.empty()) return;
  Batch batch;
  batch.destroy(proxy_routes_, std::move(gone));
  if (auto ok = commit(batch, proxy_routes_); !ok)
    log::warn("proxy_routes of " + address.to_string() +
              " left to their timeouts: " + ok.error().message);
}

Status Agent::mirror_dhcp_hosts() {
  if (!dhcp_.enabled()) return {};
  auto ok = dhcp_.mirror(desired_.bindings);
  if (!ok) {
    if (!dhcp_dirty_) log::error("dhcp_hosts_dir: " + ok.error().message + " (retrying)");
    dhcp_dirty_ = true;
    return ok;
  }
  if (dhcp_dirty_) log::info("dhcp_hosts_dir " + dhcp_.dir() + ": in step with the bindings");
  dhcp_dirty_ = false;
  return {};
}

}  // namespace pvs::agent
