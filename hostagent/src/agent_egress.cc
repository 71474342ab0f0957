// Egress by domain (#20): EGRESS, EGRESSES, ASK, PAIR; the kernel's egress_listed and
// egress_pairs sets. Lists are desired state (journalled); pairs live only in the kernel, with
// timeouts, mirrored in pairs_ for limits and for tightening (docs/agent.md "Egress").
#include <algorithm>
#include <set>

#include "agent.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/public_suffix.h"

namespace pvs::agent {
namespace {

// The ruleset's NON_INTERNET (nftables/sandbox.nft): never a pair destination.
constexpr std::pair<std::uint32_t, int> kNonInternet[] = {
    {0x00000000, 8},  {0x0a000000, 8},  {0x64400000, 10}, {0x7f000000, 8},
    {0xa9fe0000, 16}, {0xac100000, 12}, {0xc0000000, 24}, {0xc0a80000, 16},
    {0xc6120000, 15}, {0xe0000000, 4},  {0xf0000000, 4},
};

bool in_block(Ipv4Address address, std::uint32_t network, int prefix) {
  std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
  return (address.to_uint() & mask) == network;
}

bool list_covers(const proto::EgressList& list, const PairKey& pair,
                 const std::vector<std::string>& names) {
  if (std::find(list.ports.begin(), list.ports.end(), pair.port) == list.ports.end()) return false;
  return std::any_of(names.begin(), names.end(), [&](const std::string& name) {
    return std::any_of(list.names.begin(), list.names.end(), [&](const std::string& pattern) {
      return proto::egress_name_matches(pattern, name);
    });
  });
}

bool names_listed(const proto::EgressList& list, std::string_view name) {
  return std::any_of(list.names.begin(), list.names.end(), [&](const std::string& pattern) {
    return proto::egress_name_matches(pattern, name);
  });
}

// True when `next` allows everything `prev` allowed (no pair can lose its cover).
bool only_widens(const proto::EgressList& prev, const proto::EgressList& next) {
  auto has = [](const auto& items, const auto& item) {
    return std::find(items.begin(), items.end(), item) != items.end();
  };
  return std::all_of(prev.ports.begin(), prev.ports.end(),
                     [&](auto p) { return has(next.ports, p); }) &&
         std::all_of(prev.names.begin(), prev.names.end(),
                     [&](const auto& n) { return has(next.names, n); });
}

// Names kept per pair: enough for the names sharing one address (CDNs) in practice; a pair
// whose further names are forgotten is cut by a tightening that removes the kept ones (fails
// closed; the resolver adds it back at the next query of a still-listed name).
constexpr std::size_t kMaxNamesPerPair = 8;

}  // namespace

bool Agent::resolver_only(const Peer& peer) const {
  auto has = [](const std::vector<uid_t>& uids, uid_t uid) {
    return std::find(uids.begin(), uids.end(), uid) != uids.end();
  };
  return has(config_.resolver_uids, peer.uid) && !has(config_.allowed_uids, peer.uid);
}

Status Agent::check_destination(Ipv4Address destination) const {
  bool non_internet = std::any_of(std::begin(kNonInternet), std::end(kNonInternet),
                                  [&](auto b) { return in_block(destination, b.first, b.second); });
  if (non_internet || config_.sandbox_cidr.contains(destination)) {
    return fail(
        ErrorCode::kPermissionDenied,
        "destination not allowed: " + destination.to_string() + " is not a public unicast address");
  }
  return {};
}

void Agent::prune_pairs(std::int64_t now_ms) {
  std::erase_if(pairs_, [&](const auto& item) { return item.second.expiry_ms <= now_ms; });
}

std::size_t Agent::pairs_of(Ipv4Address source) const {
  auto it = pairs_.lower_bound(PairKey{source, Ipv4Address(0), 0});
  std::size_t n = 0;
  for (; it != pairs_.end() && it->first.source == source; ++it) ++n;
  return n;
}

Result<std::vector<PairKey>> Agent::kernel_pairs(std::optional<Ipv4Address> source) {
  auto elements = backend_->list(egress_pairs_);
  if (!elements) return fail(elements.error());
  std::vector<PairKey> out;
  for (const auto& e : *elements) {
    auto pair = decode_pair_key(e.key);
    if (pair && (!source || pair->source == *source)) out.push_back(*pair);
  }
  return out;
}

std::string Agent::do_egress(const Peer& peer, const proto::EgressRequest& r) {
  std::string what = "verb=" + proto::format_request(r).substr(0, 200);
  auto reply = [&]() -> std::string {
    if (auto ok = check_address(r.address); !ok) return error_reply(ok.error());
    if (auto why = r.list ? egress_wildcards_problem(r.list->names) : ""; !why.empty())
      return error_reply(Error{ErrorCode::kInvalidArgument, why});
    auto current = desired_.egress.find(r.address);
    if (r.list && current == desired_.egress.end() &&
        desired_.egress.size() >= config_.max_elements) {
      return error_reply(Error{ErrorCode::kTooLarge, "too many egress lists: max_elements " +
                                                         std::to_string(config_.max_elements)});
    }
    // The pairs this change cuts: all of the source's when off; when the list narrows, those
    // no longer covered (a pair whose names are unknown counts as not covered).
    std::vector<RawElement> cut;
    bool narrows =
        !r.list || (current != desired_.egress.end() && !only_widens(current->second, *r.list));
    if (narrows) {
      auto kernel = kernel_pairs(r.address);
      if (!kernel) return error_reply(missing_error(kernel.error(), egress_pairs_));
      for (const auto& pair : *kernel) {
        auto known = pairs_.find(pair);
        bool keep =
            r.list && known != pairs_.end() && list_covers(*r.list, pair, known->second.names);
        if (!keep) cut.push_back(RawElement{pair_key(pair), std::nullopt});
      }
    }
    // A new list of an unlisted source starts with nothing recorded of the address (its last
    // holder's refusals and bucket; cleared when that list went, unless that failed). Unlisted,
    // the source adds nothing to those sets until the batch below lists it.
    if (r.list && current == desired_.egress.end()) clear_refused(r.address);
    Batch batch;
    RawElement source{ipv4_key(r.address), std::nullopt};
    if (r.list) {
      batch.add(egress_listed_, {source});
    } else {
      batch.destroy(egress_listed_, {source});
    }
    std::vector<PairKey> cut_keys;
    for (const auto& e : cut) cut_keys.push_back(*decode_pair_key(e.key));
    batch.destroy(egress_pairs_, std::move(cut));
    if (auto ok = commit(batch, egress_listed_); !ok) return error_reply(ok.error());
    for (const auto& key : cut_keys) pairs_.erase(key);
    if (r.list) {
      desired_.egress[r.address] = *r.list;
      journal_pending_ += egress_record(r.address, &*r.list);
    } else if (current != desired_.egress.end()) {
      desired_.egress.erase(current);
      egress_log_.erase(r.address);  // its egress log goes with its list
      journal_pending_ += egress_record(r.address, nullptr);
    }
    // So do its refused connections and bucket: unlisted now, the source adds no more of them.
    if (!r.list) clear_refused(r.address);
    ++changes_;
    return proto::format_ok();
  }();
  log_change(peer, what, reply);
  return reply;
}

std::string Agent::do_egresses() {
  std::vector<proto::EgressEntry> entries;
  entries.reserve(desired_.egress.size());
  for (const auto& [source, list] : desired_.egress) entries.push_back({source, list});
  return proto::format_ok(proto::format_egresses_payload(entries));
}

std::string Agent::do_ask(const proto::AskRequest& r) {
  auto it = desired_.egress.find(r.address);
  if (it == desired_.egress.end() || !names_listed(it->second, r.name)) {
    return proto::format_ok(proto::format_ask_payload({false, {}, ""}));
  }
  std::string entry;  // the first entry that matches, for the resolver's egress log
  for (const auto& pattern : it->second.names) {
    if (proto::egress_name_matches(pattern, r.name)) {
      entry = pattern;
      break;
    }
  }
  return proto::format_ok(proto::format_ask_payload({true, it->second.ports, entry}));
}

std::string Agent::do_pair(const Peer& peer, const proto::PairRequest& r) {
  if (auto ok = check_address(r.address); !ok) return error_reply(ok.error());
  auto it = desired_.egress.find(r.address);
  if (it == desired_.egress.end() || !names_listed(it->second, r.name)) {
    return error_reply(
        Error{ErrorCode::kPermissionDenied,
              "name not allowed: " + r.name + " is not on the list of " + r.address.to_string()});
  }
  for (auto dst : r.destinations) {
    if (auto ok = check_destination(dst); !ok) return error_reply(ok.error());
  }
  std::int64_t now = unix_now_ms();
  prune_pairs(now);
  const auto& ports = it->second.ports;
  std::size_t fresh = 0;
  for (auto dst : r.destinations) {
    for (auto port : ports) fresh += pairs_.contains(PairKey{r.address, dst, port}) ? 0 : 1;
  }
  std::size_t have = pairs_of(r.address);
  // #32: max_pairs is shared by the listed sources; each holds at most its share (rounded up),
  // so the sandboxes of one tenant cannot fill the set and leave every other one SERVFAIL.
  std::size_t listed = std::max<std::size_t>(1, desired_.egress.size());
  std::size_t share = (config_.max_pairs + listed - 1) / listed;
  std::size_t cap = std::min<std::size_t>(config_.max_pairs_per_source, share);
  if (have + fresh > cap || pairs_.size() + fresh > config_.max_pairs) {
    std::string reply = error_reply(Error{
        ErrorCode::kTooLarge,
        "too many pairs: " + r.address.to_string() + " has " + std::to_string(have) +
            " (max_pairs_per_source " + std::to_string(config_.max_pairs_per_source) +
            ", share of max_pairs " + std::to_string(share) + " among " + std::to_string(listed) +
            " listed, max_pairs " + std::to_string(config_.max_pairs) + " with " +
            std::to_string(pairs_.size()) + " in use)"});
    log_change(peer, "verb=PAIR address=" + r.address.to_string() + " name=" + r.name, reply);
    return reply;
  }
  std::uint32_t ttl =
      std::clamp(r.ttl_seconds, config_.pair_ttl_floor_seconds, config_.pair_ttl_cap_seconds);
  std::int64_t expiry = now + std::int64_t{ttl} * 1000;
  std::vector<RawElement> old, add;
  std::vector<std::pair<PairKey, std::int64_t>> updates;
  for (auto dst : r.destinations) {
    for (auto port : ports) {
      PairKey key{r.address, dst, port};
      auto known = pairs_.find(key);
      std::int64_t until =
          known == pairs_.end() ? expiry : std::max(expiry, known->second.expiry_ms);
      old.push_back(RawElement{pair_key(key), std::nullopt});
      add.push_back(RawElement{pair_key(key), static_cast<std::uint64_t>(until - now)});
      updates.emplace_back(key, until);
    }
  }
  // Destroy + add in one batch: refreshes the timeout on every kernel, atomically.
  Batch batch;
  batch.destroy(egress_pairs_, std::move(old));
  batch.add(egress_pairs_, std::move(add));
  if (auto ok = commit(batch, egress_pairs_); !ok) return error_reply(ok.error());
  for (const auto& [key, until] : updates) {
    auto& info = pairs_[key];
    info.expiry_ms = until;
    if (std::find(info.names.begin(), info.names.end(), r.name) == info.names.end()) {
      if (info.names.size() >= kMaxNamesPerPair) info.names.erase(info.names.begin());
      info.names.push_back(r.name);
    }
  }
  log::debug("pair " + r.address.to_string() + " " + r.name + " x" +
             std::to_string(updates.size()) + " ttl=" + std::to_string(ttl));
  return proto::format_ok(std::to_string(updates.size()));
}

Status Agent::reapply_egress() {
  auto listed = backend_->info(egress_listed_);
  auto pairs = backend_->info(egress_pairs_);
  if (!listed || !listed->set_present || !pairs || !pairs->set_present) return {};
  auto kernel = backend_->list(egress_pairs_);
  if (!kernel) return fail(kernel.error());
  std::int64_t now = unix_now_ms();
  std::vector<RawElement> sources, stale;
  for (const auto& [source, list] : desired_.egress) {
    sources.push_back(RawElement{ipv4_key(source), std::nullopt});
  }
  std::map<PairKey, std::int64_t> present;  // -> expiry
  for (const auto& element : *kernel) {
    auto decoded = decode_pair_key(element.key);
    if (!decoded) continue;
    const PairKey& pair = *decoded;
    auto it = desired_.egress.find(pair.source);
    bool allowed = it != desired_.egress.end() &&
                   std::find(it->second.ports.begin(), it->second.ports.end(), pair.port) !=
                       it->second.ports.end();
    if (allowed) {
      present[pair] = now + static_cast<std::int64_t>(element.expires_in_ms.value_or(0));
    } else {
      stale.push_back(RawElement{pair_key(pair), std::nullopt});
    }
  }
  Batch batch;
  batch.flush(egress_listed_);
  batch.add(egress_listed_, std::move(sources));
  batch.destroy(egress_pairs_, std::move(stale));
  if (auto ok = backend_->commit(batch); !ok) {
    log::error("re-apply of the egress sets failed: " + ok.error().message);
    return ok;
  }
  // Pairs the kernel has and we did not know (a restart) get unknown names and the kernel's
  // time left.
  std::erase_if(pairs_, [&](const auto& item) { return !present.contains(item.first); });
  for (const auto& [pair, until] : present) {
    pairs_.try_emplace(pair, PairInfo{until, {}}).first->second.expiry_ms = until;
  }
  return {};
}

Result<bool> Agent::egress_drifted() {
  auto info = backend_->info(egress_listed_);
  if (!info) return fail(info.error());
  if (!info->set_present) return false;
  auto elements = backend_->list(egress_listed_);
  if (!elements) return fail(elements.error());
  std::set<Ipv4Address> kernel;
  for (const auto& e : *elements) {
    if (auto address = decode_ipv4_key(e.key)) kernel.insert(*address);
  }
  if (kernel.size() != desired_.egress.size()) return true;
  for (const auto& [source, list] : desired_.egress) {
    if (!kernel.contains(source)) return true;
  }
  return false;
}

std::string Agent::do_egress_log(const proto::EgressLogRequest& r) {
  (r.line.allowed ? decisions_allowed_ : decisions_refused_) += r.line.count;
  // Only sources with a list are kept (their number is bounded by the lists), and their last
  // kMaxEgressLogLines lines.
  if (!desired_.egress.contains(r.line.source)) {
    egress_log_.erase(r.line.source);
    return proto::format_ok();
  }
  auto& lines = egress_log_[r.line.source];
  // The resolver sends a window's first decision of a name at once and the rest of the window
  // at its end: one line of the same name, decision and window takes both.
  auto same = std::find_if(lines.rbegin(), lines.rend(), [&](const proto::EgressLogLine& l) {
    return l.name == r.line.name && l.allowed == r.line.allowed && l.window_ms == r.line.window_ms;
  });
  if (same != lines.rend()) {
    same->count += r.line.count;
    if (!r.line.entry.empty()) same->entry = r.line.entry;
    if (!r.line.to.empty()) same->to = r.line.to;
    return proto::format_ok();
  }
  lines.push_back(r.line);
  if (lines.size() > kMaxEgressLogLines) lines.pop_front();
  return proto::format_ok();
}

std::string Agent::do_egress_log_query(const proto::EgressLogQuery& r) const {
  auto it = egress_log_.find(r.address);
  if (it == egress_log_.end()) return proto::format_ok(proto::format_egress_log_payload({}));
  return proto::format_ok(proto::format_egress_log_payload({it->second.begin(), it->second.end()}));
}

}  // namespace pvs::agent
