// The egress log's JSON and the refused names (egress_log_view.h).
#include "api/sandboxes/egress_log_view.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "http/json.h"
#include "http/request_context.h"
#include "policy/canonical.h"
#include "policy/egress_access.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {

namespace {

template <typename T>
bool parse_number(std::string_view text, T* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

bool allows(const Egress& egress, std::string_view name) {
  if (egress.mode != Egress::Mode::kAllowlist) return egress.mode == Egress::Mode::kOn;
  return std::any_of(egress.list.names.begin(), egress.list.names.end(),
                     [&](const std::string& entry) { return egress_name_covered(name, entry); });
}

// Refusal counts per name over every window of the log, the most refused first.
std::vector<std::pair<std::string, std::uint64_t>> most_refused(const EgressLog& log,
                                                                std::size_t max,
                                                                const Egress* allowed_now) {
  std::map<std::string, std::uint64_t> counts;
  for (const auto& l : log.names) {
    if (l.allowed || l.name == "*") continue;
    if (allowed_now && allows(*allowed_now, l.name)) continue;
    counts[l.name] += l.count;
  }
  std::vector<std::pair<std::string, std::uint64_t>> out(counts.begin(), counts.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.size() > max) out.resize(max);
  return out;
}

std::string protocol_name(const proto::RefusedConnection& c) {
  if (c.others) return "*";
  if (c.protocol == 6) return "tcp";
  if (c.protocol == 17) return "udp";
  return std::to_string(c.protocol);
}

}  // namespace

ApiResult<EgressLogFilter> parse_egress_log_filter(std::string_view since, std::string_view limit) {
  EgressLogFilter f;
  if (!since.empty() && (!parse_number(since, &f.since_ms) || f.since_ms < 0)) {
    return tl::unexpected(bad_request("since: unix milliseconds (a non-negative integer)"));
  }
  if (!limit.empty() &&
      (!parse_number(limit, &f.limit) || f.limit < 1 || f.limit > kMaxEgressLogLimit)) {
    return tl::unexpected(
        bad_request("limit: an integer in [1, " + std::to_string(kMaxEgressLogLimit) + "]"));
  }
  return f;
}

std::string egress_log_json(const EgressLog& log, const EgressLogFilter& filter) {
  std::vector<const proto::EgressLogLine*> lines;
  for (const auto& l : log.names) {
    if (l.window_ms >= filter.since_ms) lines.push_back(&l);
  }
  if (lines.size() > filter.limit) lines.erase(lines.begin(), lines.end() - filter.limit);
  JsonWriter w;
  w.begin_object().key("names").begin_array();
  EgressLog shown;
  for (const auto* l : lines) {
    w.begin_object().key("name").value(l->name);
    w.key("decision").value(l->allowed ? "allow" : "refuse").key("count").value(l->count);
    w.key("window_start").value(iso_time(l->window_ms / 1000));
    w.key("window_start_ms").value(l->window_ms).key("entry");
    l->entry.empty() ? w.null() : w.value(l->entry);
    w.key("addresses").begin_array();
    for (const auto& a : l->to) w.value(a.to_string());
    w.end_array().end_object();
    shown.names.push_back(*l);
  }
  w.end_array().key("refused").begin_array();
  for (const auto& name : refused_names(shown, kMaxEgressLogLimit)) w.value(name);
  w.end_array().key("connections").begin_array();
  for (const auto& c : log.connections) {
    if (c.last_ms < filter.since_ms) continue;
    w.begin_object().key("address");
    c.others ? w.null() : w.value(c.destination.to_string());
    w.key("port").value(static_cast<int>(c.port)).key("protocol").value(protocol_name(c));
    w.key("count").value(c.count).key("first_seen").value(iso_time(c.first_ms / 1000));
    w.key("last_seen").value(iso_time(c.last_ms / 1000)).key("others").value(c.others);
    w.end_object();
  }
  w.end_array().end_object();
  return w.take();
}

std::vector<std::string> refused_names(const EgressLog& log, std::size_t max,
                                       const Egress* allowed_now) {
  std::vector<std::string> out;
  for (auto& [name, count] : most_refused(log, max, allowed_now)) out.push_back(name);
  return out;
}

std::string refusals_text(const EgressLog& log, std::size_t max, const Egress* allowed_now) {
  auto times = [](std::uint64_t n) { return std::to_string(n) + (n == 1 ? " time)" : " times)"); };
  std::string t;
  for (const auto& [name, count] : most_refused(log, max, allowed_now))
    t += (t.empty() ? "refused names: " : ", ") + name + " (" + times(count);
  std::string conns;
  auto add = [&conns](const std::string& item) {
    conns += (conns.empty() ? "connections refused: " : ", ") + item;
  };
  std::uint64_t others = 0;
  for (const auto& c : log.connections) {
    if (c.others) {
      others += c.count;
    } else {
      add(c.destination.to_string() + ":" + std::to_string(c.port) + "/" + protocol_name(c) + " (" +
          times(c.count));
    }
  }
  if (others > 0) add("other destinations (" + times(others));
  if (!conns.empty()) t += (t.empty() ? "" : "; ") + conns;
  return t;
}

EgressLog egress_log_or_empty(Sandbox& sandbox) {
  auto log = sandbox.egress_log();
  if (log) return std::move(*log);
  log::warn("egress log of " + sandbox.id() + ": " + log.error().message);
  return {};
}

PolicyRequest internet_request(const EgressLog& log, const Egress& to) {
  PolicyRequest asked;
  asked.action = PolicyAction::kInternet;
  set_policy_egress(asked, to);
  asked.canonical = canonical_internet(to);
  asked.refused_names = refused_names(log);
  return asked;
}

}  // namespace pvs::service
