// The life of one query: intake (budget, checks, FairQueue), ASK, upstream, PAIR, answer. The
// event loop and the sockets are in resolver_io.cc.
#include "resolver.h"

#include <algorithm>
#include <chrono>

#include "mono_clock.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/protocol.h"

namespace pvs::resolver {
namespace {

constexpr std::size_t kUdpMax = 512;  // no EDNS: classic UDP size

}  // namespace

Resolver::Resolver(ResolverConfig config)
    : config_(std::move(config)),
      fair_(config_.max_inflight, config_.max_inflight_per_source, config_.max_queued_per_source) {
  if (config_.egress_log) {
    log_ = std::make_unique<EgressLog>(EgressLog::Limits{config_.egress_log_window_ms,
                                                         config_.egress_log_max_names,
                                                         config_.egress_log_max_sources});
  }
}

void Resolver::log_decision(const Job& job, bool allowed, const std::vector<dns::Record>& answer) {
  if (!log_) return;
  EgressDecision d{job.source, job.query.name, allowed, job.entry, {}};
  for (const auto& rec : answer) {
    if (rec.address) d.answer.push_back(*rec.address);
  }
  // A window's first decision goes out at the loop's next turn, after the answer.
  if (auto now = log_->record(d, mono_ms())) first_lines_.push_back(std::move(*now));
}

void Resolver::flush_log(std::int64_t now_ms) {
  if (!log_) return;
  for (const auto& line : first_lines_) send_log_line(line);
  first_lines_.clear();
  for (const auto& line : log_->take(now_ms, flush_all_.exchange(false))) send_log_line(line);
}

void Resolver::send_log_line(const proto::EgressLogLine& line) {
  ++stats_.log_lines;
  agent().call(proto::format_egress_log(line), [this](Result<proto::Reply> r) {
    if (!r || !r->ok) ++stats_.log_failed;
  });
}

bool Resolver::admit(Ipv4Address source) {
  if (config_.queries_per_second == 0) return true;
  std::int64_t now = mono_ms();
  double rate = config_.queries_per_second;
  double burst = 2.0 * rate;
  if (buckets_.size() > 65536) buckets_.clear();  // a bound on memory, not a policy
  auto [it, fresh] = buckets_.try_emplace(source.to_uint(), Bucket{burst, now});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(burst, b.tokens + static_cast<double>(now - b.last_ms) * rate / 1000.0);
    b.last_ms = now;
  }
  if (b.tokens < 1.0) {
    ++stats_.limited;
    return false;
  }
  b.tokens -= 1.0;
  return true;
}

std::vector<std::uint8_t> Resolver::refuse(const Job& job, dns::Rcode rcode) {
  ++(rcode == dns::Rcode::kRefused ? stats_.refused : stats_.failed);
  return dns::build_answer(job.query, rcode, {}, 0, kUdpMax);
}

AgentLink& Resolver::agent() {
  // The least busy of the shared connections.
  return **std::min_element(agents_.begin(), agents_.end(), [](const auto& a, const auto& b) {
    return a->pending() < b->pending();
  });
}

void Resolver::intake(Ipv4Address source, std::span<const std::uint8_t> wire, std::uint64_t tcp,
                      const sockaddr_in& from) {
  if (!admit(source)) return;  // over its budget: dropped, never amplified
  ++stats_.queries;
  std::optional<std::uint16_t> qid;
  auto query = dns::parse_query(wire, &qid);
  Job job{source, {}, tcp, from, {}};
  if (!query) {
    if (!qid) return;
    ++stats_.refused;
    send_reply(job, dns::build_header_only(*qid, dns::Rcode::kFormErr));
    return;
  }
  job.query = std::move(*query);
  if (job.query.klass != dns::kClassIn ||
      (job.query.type != dns::kTypeA && job.query.type != dns::kTypeAaaa) ||
      !proto::is_valid_egress_name(job.query.name, false)) {
    send_reply(job, refuse(job, dns::Rcode::kRefused));
    return;
  }
  std::uint64_t id = next_id_++;
  switch (fair_.submit(source.to_uint(), id)) {
    case FairQueue::Admit::kDropped: ++stats_.limited; return;
    case FairQueue::Admit::kQueued: jobs_.emplace(id, std::move(job)); return;
    case FairQueue::Admit::kStart:
      jobs_.emplace(id, std::move(job));
      start_job(id);
      return;
  }
}

void Resolver::start_job(std::uint64_t id) {
  const Job& job = jobs_.at(id);
  agent().call("ASK " + job.source.to_string() + " " + job.query.name,
               [this, id](Result<proto::Reply> asked) { on_ask(id, std::move(asked)); });
}

void Resolver::on_ask(std::uint64_t id, Result<proto::Reply> asked) {
  const Job& job = jobs_.at(id);
  if (!asked || !asked->ok) {
    log::warn("ASK " + job.source.to_string() + " " + job.query.name + ": " +
              (asked ? asked->text : asked.error().message));
    return finish(id, refuse(job, dns::Rcode::kServFail));
  }
  auto verdict = proto::parse_ask_payload(asked->text);
  if (!verdict || !verdict->allow) {
    log_decision(job, false);
    return finish(id, refuse(job, dns::Rcode::kRefused));
  }
  jobs_.at(id).entry = verdict->entry;
  if (job.query.type == dns::kTypeAaaa) {  // IPv6 stays blocked: an empty answer, at once
    log_decision(job, true);
    ++stats_.answered;
    return finish(id, dns::build_answer(job.query, dns::Rcode::kNoError, {}, 0, kUdpMax));
  }
  upstream_->query(job.query.name, [this, id](Result<dns::Response> response) {
    on_upstream(id, std::move(response));
  });
}

void Resolver::on_upstream(std::uint64_t id, Result<dns::Response> response) {
  const Job& job = jobs_.at(id);
  if (!response) {
    log::warn("upstream for " + job.query.name + ": " + response.error().message);
    return finish(id, refuse(job, dns::Rcode::kServFail));
  }
  if (response->rcode != dns::Rcode::kNoError) {
    log_decision(job, true);
    ++stats_.answered;
    return finish(id, dns::build_answer(job.query, response->rcode, {}, 0, kUdpMax));
  }
  auto resolution = dns::follow_chain(*response, job.query.name);
  std::uint32_t ttl = std::min(resolution.min_ttl, config_.max_answer_ttl);
  std::size_t max_size = job.tcp != 0 ? 65535 : kUdpMax;
  // What fits the answer is what gets paired: no address is handed out without its pair.
  std::size_t fits = 0;
  (void)dns::build_answer(job.query, dns::Rcode::kNoError, resolution.chain, ttl, max_size, &fits);
  std::vector<dns::Record> records(resolution.chain.begin(), resolution.chain.begin() + fits);
  std::vector<Ipv4Address> addresses;
  for (const auto& rec : records) {
    if (rec.address && addresses.size() < proto::kMaxPairDestinations)
      addresses.push_back(*rec.address);
  }
  std::erase_if(records, [&](const dns::Record& rec) {
    return rec.address &&
           std::find(addresses.begin(), addresses.end(), *rec.address) == addresses.end();
  });
  if (addresses.empty()) return on_pair(id, proto::Reply{true, 0, ""}, std::move(records), ttl);
  proto::PairRequest pair{job.source, job.query.name, addresses, ttl};
  agent().call(proto::format_request(pair),
               [this, id, records = std::move(records), ttl](Result<proto::Reply> paired) mutable {
                 on_pair(id, std::move(paired), std::move(records), ttl);
               });
}

void Resolver::on_pair(std::uint64_t id, Result<proto::Reply> paired,
                       std::vector<dns::Record> records, std::uint32_t ttl) {
  const Job& job = jobs_.at(id);
  if (!paired || !paired->ok) {
    log::warn(
        "PAIR " + job.source.to_string() + " " + job.query.name + ": " +
        (paired ? std::to_string(paired->code) + " " + paired->text : paired.error().message));
    if (paired && paired->code == 403) log_decision(job, false);
    return finish(id, refuse(job, paired && paired->code == 403 ? dns::Rcode::kRefused
                                                                : dns::Rcode::kServFail));
  }
  ++stats_.answered;
  log_decision(job, true, records);
  log::debug("answer " + job.source.to_string() + " " + job.query.name +
             " records=" + std::to_string(records.size()) + " ttl=" + std::to_string(ttl));
  std::size_t max_size = job.tcp != 0 ? 65535 : kUdpMax;
  finish(id, dns::build_answer(job.query, dns::Rcode::kNoError, records, ttl, max_size));
}

void Resolver::finish(std::uint64_t id, std::optional<std::vector<std::uint8_t>> reply) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  Job job = std::move(it->second);
  jobs_.erase(it);
  if (reply && !stopping_) send_reply(job, *reply);
  if (stopping_) return;
  // Started by the loop, not from here: a chain of queries failing at once (agent down) must
  // not recurse.
  if (auto next = fair_.finish(job.source.to_uint())) runnable_.push_back(next->job);
}

}  // namespace pvs::resolver
