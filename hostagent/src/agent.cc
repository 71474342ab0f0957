#include "agent.h"

#include <netinet/in.h>  // glibc's in.h before the kernel's (linux/netfilter.h includes it)

#include <linux/netfilter.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"

namespace pvs::agent {
namespace {

// Leases within this margin of their end may legitimately differ between the kernel's clock and
// ours; drift detection ignores them.
constexpr std::int64_t kLeaseMarginMs = 2000;

std::string iso_time(std::int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Agent::Agent(AgentConfig config, std::unique_ptr<SetBackend> backend)
    : config_(std::move(config)),
      backend_(std::move(backend)),
      store_(config_.state_file, config_.state_fsync),
      dhcp_(config_.dhcp_hosts_dir) {
  set_ = SetRef{config_.family_number(), config_.table, config_.set};
  port_mac_ = SetRef{NFPROTO_BRIDGE, config_.l2_table, config_.port_mac_set};
  port_ip4_ = SetRef{NFPROTO_BRIDGE, config_.l2_table, config_.port_ip4_set};
  egress_listed_ = SetRef{config_.family_number(), config_.table, config_.egress_listed_set};
  egress_pairs_ = SetRef{config_.family_number(), config_.table, config_.egress_pairs_set};
  egress_refused_ = SetRef{config_.family_number(), config_.table, "egress_refused"};
  egress_refused_last_ = SetRef{config_.family_number(), config_.table, "egress_refused_last"};
  egress_refused_rate_ = SetRef{config_.family_number(), config_.table, "egress_refused_rate"};
  proxy_routes_ = SetRef{config_.family_number(), config_.table, "proxy_routes"};
  started_ms_ = unix_now_ms();
}

Status Agent::start() {
  auto loaded = store_.open();
  if (!loaded) return fail(loaded.error());
  if (*loaded) {
    desired_ = std::move(**loaded);
    std::size_t expired = desired_.prune(unix_now_ms());
    log::info("state file " + config_.state_file + ": " + std::to_string(desired_.grants.size()) +
              " grants, " + std::to_string(desired_.bindings.size()) + " bindings" +
              (expired > 0 ? ", " + std::to_string(expired) + " expired leases dropped" : ""));
    if (auto ok = reapply("start"); !ok) log::warn("re-apply at start: " + ok.error().message);
  } else {
    // First start: the kernel's current elements become the desired state.
    auto elements = backend_->list(set_);
    std::int64_t now = unix_now_ms();
    if (elements) {
      for (const auto& e : *elements) {
        auto address = decode_ipv4_key(e.key);
        if (!address || !check_address(*address)) continue;
        std::optional<std::int64_t> expiry;
        if (e.expires_in_ms) expiry = now + static_cast<std::int64_t>(*e.expires_in_ms);
        desired_.grants[*address] = expiry;
      }
    }
    if (auto bindings = kernel_bindings(nullptr, nullptr); bindings) {
      for (const auto& b : *bindings) desired_.bindings[b.port] = b;
    }
    log::info("no state file " + config_.state_file + ": adopted " +
              std::to_string(desired_.grants.size()) + " grants and " +
              std::to_string(desired_.bindings.size()) + " bindings from the kernel");
    // Makes the kernel equal what was adopted (drops elements the policy does not allow).
    if (auto ok = reapply("first start"); !ok)
      log::warn("re-apply at start: " + ok.error().message);
  }
  if (dhcp_.enabled()) {
    bool created = false;
    if (auto ok = dhcp_.ensure_dir(&created); !ok) {
      log::error("dhcp_hosts_dir: " + ok.error().message);
    } else if (created) {
      log::warn("dhcp_hosts_dir " + dhcp_.dir() +
                " did not exist and was created: restart dnsmasq, which watches only a "
                "directory that existed when it started");
    }
    if (auto ok = mirror_dhcp_hosts(); ok) {
      log::info("dhcp_hosts_dir " + dhcp_.dir() + ": " + std::to_string(desired_.bindings.size()) +
                " reservations");
    }
  }
  snapshot_needed_ = true;  // fold the journal into a fresh snapshot
  if (auto gen = backend_->generation(); gen) verified_generation_ = *gen;
  return persist();
}

Status Agent::persist() {
  if (!state_dirty()) return {};
  constexpr std::size_t kMaxJournal = 4 * 1024 * 1024;
  Status ok = snapshot_needed_ || store_.journal_bytes() > kMaxJournal
                  ? store_.snapshot(desired_)
                  : store_.append(journal_pending_);
  if (!ok) {
    if (!state_error_) log::error("cannot write the state file: " + ok.error().message);
    state_error_ = true;
    snapshot_needed_ = true;  // the journal may be incomplete now: rewrite it all next time
    return ok;
  }
  state_error_ = false;
  snapshot_needed_ = false;
  journal_pending_.clear();
  return {};
}

Status Agent::check_address(Ipv4Address address) const {
  const Cidr& cidr = config_.sandbox_cidr;
  std::string why;
  if (!cidr.contains(address)) {
    why = "outside " + cidr.to_string();
  } else if (address == cidr.network()) {
    why = "the network address of " + cidr.to_string();
  } else if (address == cidr.broadcast()) {
    why = "the broadcast address of " + cidr.to_string();
  } else if (address == config_.gateway) {
    why = "the gateway";
  } else {
    return {};
  }
  return fail(ErrorCode::kPermissionDenied,
              "address not allowed: " + address.to_string() + " is " + why);
}

Error Agent::missing_error(const Error& error, const SetRef& set) {
  verified_generation_.reset();  // look again at the next tick
  if (error.code == ErrorCode::kNotFound) {
    return Error{ErrorCode::kConflict,
                 "ruleset missing: " + set.to_string() + " (" + error.message + ")"};
  }
  if (error.code == ErrorCode::kInvalidArgument) {
    return Error{ErrorCode::kInternal, "nftables rejected the change: " + error.message};
  }
  return error;
}

Status Agent::commit(const Batch& batch, const SetRef& set) {
  auto ok = backend_->commit(batch);
  if (!ok) return fail(missing_error(ok.error(), set));
  return ok;
}

std::string Agent::error_reply(const Error& error) {
  return proto::format_error(proto::reply_code_for(error), error.message);
}

void Agent::log_change(const Peer& peer, std::string_view what, const std::string& reply) {
  std::string line = "change uid=" + std::to_string(peer.uid) + " pid=" + std::to_string(peer.pid) +
                     " " + std::string(what) + " result=";
  line += reply.size() > 120 ? reply.substr(0, 120) + "..." : reply;
  if (reply.starts_with("OK")) {
    log::info(line);
  } else {
    log::warn(line);
  }
}

std::string Agent::handle(const Peer& peer, std::string_view line) {
  auto request = proto::parse_request(line);
  if (!request) return error_reply(request.error());
  return handle(peer, *request);
}

std::string Agent::handle(const Peer& peer, const proto::Request& request) {
  if (resolver_only(peer) && !std::holds_alternative<proto::HelloRequest>(request) &&
      !std::holds_alternative<proto::AskRequest>(request) &&
      !std::holds_alternative<proto::PairRequest>(request) &&
      !std::holds_alternative<proto::EgressLogRequest>(request) &&
      !std::holds_alternative<proto::StatusRequest>(request)) {
    return proto::format_error(proto::ReplyCode::kForbidden,
                               "not authorized: a resolver uid may send only HELLO, ASK, PAIR, "
                               "ELOG and STATUS");
  }
  return std::visit(
      [&](const auto& r) -> std::string {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, proto::HelloRequest>) {
          if (r.version != proto::kProtocolVersion) {
            return proto::format_error(proto::ReplyCode::kBadRequest,
                                       "unsupported protocol version " + std::to_string(r.version) +
                                           ", this agent speaks 1");
          }
          return proto::format_ok(proto::format_hello_payload(PVS_VERSION));
        } else if constexpr (std::is_same_v<T, proto::AllowRequest>) {
          return do_allow(peer, r);
        } else if constexpr (std::is_same_v<T, proto::RevokeRequest>) {
          return do_revoke(peer, r);
        } else if constexpr (std::is_same_v<T, proto::SyncRequest>) {
          return do_sync(peer, r);
        } else if constexpr (std::is_same_v<T, proto::ListRequest>) {
          return do_list();
        } else if constexpr (std::is_same_v<T, proto::BindRequest>) {
          return do_bind(peer, r);
        } else if constexpr (std::is_same_v<T, proto::UnbindRequest>) {
          return do_unbind(peer, r);
        } else if constexpr (std::is_same_v<T, proto::BindingsRequest>) {
          return do_bindings();
        } else if constexpr (std::is_same_v<T, proto::EgressRequest>) {
          return do_egress(peer, r);
        } else if constexpr (std::is_same_v<T, proto::EgressesRequest>) {
          return do_egresses();
        } else if constexpr (std::is_same_v<T, proto::AskRequest>) {
          return do_ask(r);
        } else if constexpr (std::is_same_v<T, proto::PairRequest>) {
          return do_pair(peer, r);
        } else if constexpr (std::is_same_v<T, proto::EgressLogRequest>) {
          return do_egress_log(r);
        } else if constexpr (std::is_same_v<T, proto::EgressLogQuery>) {
          return do_egress_log_query(r);
        } else if constexpr (std::is_same_v<T, proto::EgressRefusedQuery>) {
          return do_egress_refused(r);
        } else if constexpr (std::is_same_v<T, proto::RouteRequest>) {
          return do_route(peer, r);
        } else if constexpr (std::is_same_v<T, proto::UnrouteRequest>) {
          return do_unroute(peer, r);
        } else {
          static_assert(std::is_same_v<T, proto::StatusRequest>);
          return do_status();
        }
      },
      request);
}

std::string Agent::do_allow(const Peer& peer, const proto::AllowRequest& r) {
  const auto& grant = r.grant;
  std::string what = "verb=ALLOW address=" + grant.address.to_string() +
                     " ttl=" + (grant.ttl_seconds ? std::to_string(*grant.ttl_seconds) : "none");
  auto reply = [&]() -> std::string {
    if (auto ok = check_address(grant.address); !ok) return error_reply(ok.error());
    if (!desired_.grants.contains(grant.address) &&
        desired_.grants.size() >= config_.max_elements) {
      return error_reply(Error{ErrorCode::kTooLarge, "set is full: max_elements " +
                                                         std::to_string(config_.max_elements)});
    }
    if (grant.ttl_seconds && set_has_timeout_ != true) {
      auto info = backend_->info(set_);
      if (!info) return error_reply(info.error());
      if (!info->set_present) {
        return error_reply(Error{ErrorCode::kConflict, "ruleset missing: " + set_.to_string()});
      }
      set_has_timeout_ = info->has_timeout;
      if (!info->has_timeout) {
        return error_reply(
            Error{ErrorCode::kInvalidArgument, "ttl not supported: set " + set_.to_string() +
                                                   " is not declared with 'flags timeout'"});
      }
    }
    RawElement element{ipv4_key(grant.address), std::nullopt};
    if (grant.ttl_seconds) element.timeout_ms = std::uint64_t{*grant.ttl_seconds} * 1000;
    // Destroy + add in one batch: refreshes (or removes) a lease on every kernel.
    Batch batch;
    batch.destroy(set_, {RawElement{element.key, std::nullopt}});
    batch.add(set_, {element});
    if (auto ok = commit(batch, set_); !ok) return error_reply(ok.error());
    std::optional<std::int64_t> expiry;
    if (grant.ttl_seconds) expiry = unix_now_ms() + std::int64_t{*grant.ttl_seconds} * 1000;
    desired_.grants[grant.address] = expiry;
    ++changes_;
    journal_pending_ += "grant " + grant.address.to_string() + " " +
                        (expiry ? std::to_string(*expiry) : "-") + "\n";
    return proto::format_ok();
  }();
  log_change(peer, what, reply);
  return reply;
}

std::string Agent::do_revoke(const Peer& peer, const proto::RevokeRequest& r) {
  std::string what = "verb=REVOKE address=" + r.address.to_string();
  auto reply = [&]() -> std::string {
    if (auto ok = check_address(r.address); !ok) return error_reply(ok.error());
    // The revoke sticks even if the kernel part fails: a revoked address is never re-applied.
    if (desired_.grants.erase(r.address) > 0) {
      ++changes_;
      journal_pending_ += "revoke " + r.address.to_string() + "\n";
    }
    Batch batch;
    batch.destroy(set_, {RawElement{ipv4_key(r.address), std::nullopt}});
    if (auto ok = commit(batch, set_); !ok) return error_reply(ok.error());
    return proto::format_ok();
  }();
  log_change(peer, what, reply);
  return reply;
}

std::string Agent::do_sync(const Peer& peer, const proto::SyncRequest& r) {
  std::string what = "verb=SYNC count=" + std::to_string(r.grants.size());
  auto reply = [&]() -> std::string {
    if (r.grants.size() > config_.max_elements) {
      return error_reply(Error{ErrorCode::kTooLarge,
                               "too many addresses: " + std::to_string(r.grants.size()) +
                                   " > max_elements " + std::to_string(config_.max_elements)});
    }
    bool any_ttl = false;
    std::vector<RawElement> elements;
    elements.reserve(r.grants.size());
    for (const auto& grant : r.grants) {
      if (auto ok = check_address(grant.address); !ok) return error_reply(ok.error());
      RawElement e{ipv4_key(grant.address), std::nullopt};
      if (grant.ttl_seconds) {
        e.timeout_ms = std::uint64_t{*grant.ttl_seconds} * 1000;
        any_ttl = true;
      }
      elements.push_back(std::move(e));
    }
    if (any_ttl && set_has_timeout_ != true) {
      auto info = backend_->info(set_);
      if (!info) return error_reply(info.error());
      if (!info->set_present) {
        return error_reply(Error{ErrorCode::kConflict, "ruleset missing: " + set_.to_string()});
      }
      set_has_timeout_ = info->has_timeout;
      if (!info->has_timeout) {
        return error_reply(
            Error{ErrorCode::kInvalidArgument, "ttl not supported: set " + set_.to_string() +
                                                   " is not declared with 'flags timeout'"});
      }
    }
    Batch batch;
    batch.flush(set_);
    batch.add(set_, std::move(elements));
    if (auto ok = commit(batch, set_); !ok) return error_reply(ok.error());
    std::int64_t now = unix_now_ms();
    // The new grants, sorted (the first of duplicates wins), go into the map in order, reusing
    // the old map's nodes: no allocation or rebalancing search per address.
    std::vector<std::pair<Ipv4Address, std::optional<std::int64_t>>> sorted;
    sorted.reserve(r.grants.size());
    for (const auto& grant : r.grants) {
      std::optional<std::int64_t> expiry;
      if (grant.ttl_seconds) expiry = now + std::int64_t{*grant.ttl_seconds} * 1000;
      sorted.emplace_back(grant.address, expiry);
    }
    auto by_address = [](const auto& a, const auto& b) { return a.first < b.first; };
    std::stable_sort(sorted.begin(), sorted.end(), by_address);
    sorted.erase(std::unique(sorted.begin(), sorted.end(),
                             [](const auto& a, const auto& b) { return a.first == b.first; }),
                 sorted.end());
    auto old = std::move(desired_.grants);
    desired_.grants.clear();
    for (const auto& [address, expiry] : sorted) {
      if (old.empty()) {
        desired_.grants.emplace_hint(desired_.grants.end(), address, expiry);
        continue;
      }
      auto node = old.extract(old.begin());
      node.key() = address;
      node.mapped() = expiry;
      desired_.grants.insert(desired_.grants.end(), std::move(node));
    }
    // One journal group (one append, one fdatasync) instead of a snapshot (temp file + fsync +
    // rename + directory fsync: two flushes); the journal is compacted when it grows.
    append_sync_records(&journal_pending_, desired_.grants);
    ++changes_;
    return proto::format_ok(std::to_string(r.grants.size()));
  }();
  log_change(peer, what, reply);
  return reply;
}

std::string Agent::do_list() {
  auto elements = backend_->list(set_);
  if (!elements) return error_reply(missing_error(elements.error(), set_));
  std::vector<proto::Grant> grants;
  grants.reserve(elements->size());
  for (const auto& e : *elements) {
    auto address = decode_ipv4_key(e.key);
    if (!address) continue;
    proto::Grant g{*address, std::nullopt};
    if (e.expires_in_ms) {
      auto seconds = (*e.expires_in_ms + 999) / 1000;
      g.ttl_seconds =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(seconds, proto::kMaxTtlSeconds));
    }
    grants.push_back(g);
  }
  std::sort(grants.begin(), grants.end(),
            [](const proto::Grant& a, const proto::Grant& b) { return a.address < b.address; });
  return proto::format_ok(proto::format_list_payload(grants));
}

std::string Agent::do_status() {
  proto::StatusFields fields;
  auto info = backend_->info(set_);
  if (!info) return error_reply(info.error());
  fields.emplace_back("table", info->table_present ? "present" : "missing");
  fields.emplace_back("set", info->set_present ? "present" : "missing");
  std::string elements = "0";
  if (info->set_present) {
    auto list = backend_->list(set_);
    if (list) elements = std::to_string(list->size());
  }
  fields.emplace_back("elements", elements);
  fields.emplace_back("timeout", info->set_present ? (info->has_timeout ? "yes" : "no") : "-");
  auto l2 = backend_->info(port_mac_);
  auto l2ip = backend_->info(port_ip4_);
  bool l2_ok = l2 && l2->set_present && l2ip && l2ip->set_present;
  fields.emplace_back("l2", l2_ok ? "present" : "missing");
  fields.emplace_back("desired", std::to_string(desired_.grants.size()));
  fields.emplace_back("bindings", std::to_string(desired_.bindings.size()));
  prune_pairs(unix_now_ms());
  fields.emplace_back("egress_sources", std::to_string(desired_.egress.size()));
  fields.emplace_back("pairs", std::to_string(pairs_.size()));
  // Without the egress_refused set (an older ruleset) the total stays where it was.
  (void)kernel_refused();
  fields.emplace_back("egress_decisions_allowed", std::to_string(decisions_allowed_));
  fields.emplace_back("egress_decisions_refused", std::to_string(decisions_refused_));
  fields.emplace_back("egress_connections_refused", std::to_string(refused_connections_));
  fields.emplace_back("destroy", backend_->destroy_supported() ? "native" : "emulated");
  auto gen = backend_->generation();
  fields.emplace_back("generation", gen ? std::to_string(*gen) : "-");
  fields.emplace_back("last_reapply", last_reapply_ms_ > 0 ? iso_time(last_reapply_ms_) : "never");
  fields.emplace_back("reapplies", std::to_string(reapplies_));
  fields.emplace_back("state", state_error_ ? "error" : "ok");
  fields.emplace_back("dhcp_hosts", !dhcp_.enabled() ? "off" : dhcp_dirty_ ? "error" : "ok");
  fields.emplace_back("clients", std::to_string(clients_));
  fields.emplace_back("uptime", std::to_string((unix_now_ms() - started_ms_) / 1000));
  fields.emplace_back("version", PVS_VERSION);
  return proto::format_ok(proto::format_status_payload(fields));
}

Status Agent::reapply(std::string_view reason) {
  std::int64_t now = unix_now_ms();
  desired_.prune(now);  // expired leases are dropped again on load: no record needed
  Status result;
  auto info = backend_->info(set_);
  if (info && info->set_present) {
    set_has_timeout_ = info->has_timeout;
    std::vector<RawElement> elements;
    elements.reserve(desired_.grants.size());
    for (const auto& [address, expiry] : desired_.grants) {
      RawElement e{ipv4_key(address), std::nullopt};
      if (expiry) e.timeout_ms = static_cast<std::uint64_t>(*expiry - now);
      elements.push_back(std::move(e));
    }
    Batch batch;
    batch.flush(set_);
    batch.add(set_, std::move(elements));
    if (auto ok = backend_->commit(batch); !ok) {
      log::error("re-apply of " + set_.to_string() + " failed: " + ok.error().message);
      result = fail(ok.error());
    }
  } else if (!info) {
    result = fail(info.error());
  }
  auto mac_info = backend_->info(port_mac_);
  auto ip_info = backend_->info(port_ip4_);
  if (mac_info && mac_info->set_present && ip_info && ip_info->set_present) {
    std::vector<RawElement> macs, ips;
    for (const auto& [port, b] : desired_.bindings) {
      macs.push_back(RawElement{port_mac_key(port, b.mac), std::nullopt});
      ips.push_back(RawElement{port_ip4_key(port, b.address), std::nullopt});
    }
    Batch batch;
    batch.flush(port_mac_);
    batch.flush(port_ip4_);
    batch.add(port_mac_, std::move(macs));
    batch.add(port_ip4_, std::move(ips));
    if (auto ok = backend_->commit(batch); !ok) {
      log::error("re-apply of bridge bindings failed: " + ok.error().message);
      if (result) result = fail(ok.error());
    }
  }
  if (auto ok = reapply_egress(); !ok && result) result = fail(ok.error());
  last_reapply_ms_ = now;
  ++reapplies_;
  log::warn("re-applied desired state (" + std::string(reason) +
            "): " + std::to_string(desired_.grants.size()) + " grants, " +
            std::to_string(desired_.bindings.size()) + " bindings");
  return result;
}

Result<bool> Agent::drifted() {
  std::int64_t now = unix_now_ms();
  auto info = backend_->info(set_);
  if (!info) return fail(info.error());
  if (!info->set_present) return false;  // nothing to apply to; checked again later
  set_has_timeout_ = info->has_timeout;
  auto elements = backend_->list(set_);
  if (!elements) return fail(elements.error());
  std::set<Ipv4Address> kernel;
  for (const auto& e : *elements) {
    auto address = decode_ipv4_key(e.key);
    if (!address) continue;
    // An element about to expire may already be gone from our side.
    if (e.expires_in_ms && static_cast<std::int64_t>(*e.expires_in_ms) < kLeaseMarginMs &&
        !desired_.grants.contains(*address)) {
      continue;
    }
    kernel.insert(*address);
  }
  for (const auto& [address, expiry] : desired_.grants) {
    bool near_end = expiry && *expiry - now < kLeaseMarginMs;
    if (!kernel.contains(address) && !near_end) return true;
    kernel.erase(address);
  }
  if (!kernel.empty()) return true;

  auto mac_info = backend_->info(port_mac_);
  auto ip_info = backend_->info(port_ip4_);
  if (mac_info && mac_info->set_present && ip_info && ip_info->set_present) {
    std::vector<RawElement> macs, ips;
    auto bindings = kernel_bindings(&macs, &ips);
    if (!bindings) return fail(bindings.error());
    if (macs.size() != desired_.bindings.size() || ips.size() != desired_.bindings.size() ||
        bindings->size() != desired_.bindings.size()) {
      return true;
    }
    for (const auto& b : *bindings) {
      auto it = desired_.bindings.find(b.port);
      if (it == desired_.bindings.end() || !(it->second == b)) return true;
    }
  }
  return egress_drifted();
}

void Agent::tick() {
  desired_.prune(unix_now_ms());
  prune_pairs(unix_now_ms());
  if (dhcp_dirty_) (void)mirror_dhcp_hosts();
  if (backend_->stats().lost_acks != lost_acks_seen_) {
    lost_acks_seen_ = backend_->stats().lost_acks;
    verified_generation_.reset();
  }
  auto gen = backend_->generation();
  if (!gen) {
    log::warn("reading the ruleset generation: " + gen.error().message);
    return;
  }
  if (verified_generation_ == *gen) return;
  auto drift = drifted();
  if (!drift) {
    log::warn("drift check: " + drift.error().message);
    return;
  }
  if (*drift) {
    log::warn("drift detected: the kernel's sets differ from the desired state");
    (void)reapply("drift");
    gen = backend_->generation();
    if (!gen) return;
  }
  verified_generation_ = *gen;
}

}  // namespace pvs::agent
