// Refused connection attempts of sources in allowlist mode (#38). The ruleset counts them in the
// kernel: egress_refused holds one element per (source . destination . protocol . port) with a
// counter, added at the first refusal (its time left tells when that was), egress_refused_last the
// same keys refreshed at every refusal (the last); a source's new destinations beyond its bound
// are counted in its others (destination 0.0.0.0, port 0). The agent reads both on request
// (EGRESSREFUSED) and for STATUS' totals (docs/agent.md "Refused connections").
#include <algorithm>

#include "agent.h"
#include "pvesandbox/common/log.h"

namespace pvs::agent {
namespace {

// When an element with `expires_in_ms` left of a `timeout_ms` timeout was last (re)set.
std::int64_t set_at(std::int64_t now_ms, std::uint64_t timeout_ms,
                    std::optional<std::uint64_t> expires_in_ms) {
  if (timeout_ms == 0 || !expires_in_ms) return now_ms;
  return now_ms - static_cast<std::int64_t>(timeout_ms - std::min(timeout_ms, *expires_in_ms));
}

}  // namespace

Result<std::vector<Agent::Refused>> Agent::kernel_refused() {
  auto info = backend_->info(egress_refused_);
  if (!info) return fail(info.error());
  if (!info->set_present) {
    return fail(ErrorCode::kConflict, "ruleset missing: " + egress_refused_.to_string());
  }
  auto counted = backend_->list(egress_refused_);
  if (!counted) return fail(counted.error());
  std::map<RefusedKey, std::int64_t> last;  // from egress_refused_last, if present
  auto last_info = backend_->info(egress_refused_last_);
  if (last_info && last_info->set_present) {
    if (auto elements = backend_->list(egress_refused_last_)) {
      std::int64_t now = unix_now_ms();
      for (const auto& e : *elements) {
        if (auto key = decode_refused_key(e.key))
          last[*key] = set_at(now, last_info->timeout_ms, e.expires_in_ms);
      }
    }
  }
  std::int64_t now = unix_now_ms();
  std::vector<Refused> out;
  out.reserve(counted->size());
  for (const auto& e : *counted) {
    auto key = decode_refused_key(e.key);
    if (!key || e.packets.value_or(0) == 0) continue;
    Refused r{*key, *e.packets, set_at(now, info->timeout_ms, e.expires_in_ms), 0};
    auto it = last.find(*key);
    r.last_ms = std::clamp(it == last.end() ? r.first_ms : it->second, r.first_ms, now);
    out.push_back(r);
  }
  count_refused(out);
  return out;
}

void Agent::count_refused(const std::vector<Refused>& all) {
  // An element seen before adds what its counter grew by; a new one (or one re-created after
  // its timeout, whose counter went down) adds its whole count.
  std::map<RefusedKey, std::uint64_t> seen;
  for (const auto& r : all) {
    auto it = refused_seen_.find(r.key);
    std::uint64_t before = it == refused_seen_.end() ? 0 : it->second;
    refused_connections_ += r.count >= before ? r.count - before : r.count;
    seen.emplace(r.key, r.count);
  }
  refused_seen_ = std::move(seen);
}

Status Agent::forget_refused(Ipv4Address source, Batch& batch) {
  // What the counters grew by since the last read still counts in STATUS' total.
  (void)kernel_refused();
  for (const SetRef* set : {&egress_refused_, &egress_refused_last_}) {
    auto info = backend_->info(*set);
    if (!info) return fail(info.error());
    if (!info->set_present) continue;
    auto elements = backend_->list(*set);
    if (!elements) return fail(elements.error());
    std::vector<RawElement> mine;
    for (const auto& e : *elements) {
      auto key = decode_refused_key(e.key);
      if (key && key->source == source) mine.push_back(RawElement{e.key, std::nullopt});
    }
    if (!mine.empty()) batch.destroy(*set, std::move(mine));
  }
  auto rate = backend_->info(egress_refused_rate_);
  if (!rate) return fail(rate.error());
  if (rate->set_present) batch.destroy(egress_refused_rate_, {{ipv4_key(source), std::nullopt}});
  return {};
}

void Agent::clear_refused(Ipv4Address source) {
  Batch batch;
  auto ok = forget_refused(source, batch);
  if (ok && !batch.empty()) ok = backend_->commit(batch);
  if (!ok)
    log::warn("clearing what the ruleset recorded of " + source.to_string() + ": " +
              ok.error().message);
}

std::string Agent::do_egress_refused(const proto::EgressRefusedQuery& q) {
  auto all = kernel_refused();
  if (!all) return error_reply(all.error());
  std::vector<proto::RefusedConnection> mine;
  // The rest: the source's others (destination 0.0.0.0, what the ruleset counted beyond the
  // source's bound of new destinations) and whatever is beyond the reply's bound.
  proto::RefusedConnection rest{Ipv4Address(0), 0, 0, true, 0, INT64_MAX, 0};
  auto add_to_rest = [&rest](const proto::RefusedConnection& c) {
    rest.count += c.count;
    rest.first_ms = std::min(rest.first_ms, c.first_ms);
    rest.last_ms = std::max(rest.last_ms, c.last_ms);
  };
  for (const auto& r : *all) {
    if (r.key.source != q.address) continue;
    proto::RefusedConnection c{r.key.destination, r.key.port, r.key.protocol, false,
                               r.count,           r.first_ms, r.last_ms};
    if (r.key.destination == Ipv4Address(0)) {
      add_to_rest(c);
    } else {
      mine.push_back(c);
    }
  }
  // The most recent first; beyond the bound, one item sums the rest.
  std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) {
    return std::tie(b.last_ms, b.count, a.destination, a.port, a.protocol) <
           std::tie(a.last_ms, a.count, b.destination, b.port, b.protocol);
  });
  if (mine.size() > proto::kMaxRefusedPerReply) {
    for (auto it = mine.begin() + proto::kMaxRefusedPerReply; it != mine.end(); ++it) {
      add_to_rest(*it);
    }
    mine.resize(proto::kMaxRefusedPerReply);
  }
  if (rest.count > 0) mine.push_back(rest);
  return proto::format_ok(proto::format_egress_refused_payload(mine));
}

}  // namespace pvs::agent
