// The egress verbs of the agent protocol: EGRESS, EGRESSES, ASK, PAIR, ELOG, EGRESSLOG,
// EGRESSREFUSED and their payloads.
#include <algorithm>
#include <cstdint>
#include <unordered_set>

#include "protocol_internal.h"
#include "pvesandbox/common/text.h"

namespace pvs::proto {
using namespace detail;

namespace {

// "a/b/c" -> a, b, c (the items of EGRESSLOG's and EGRESSREFUSED's replies).
std::vector<std::string_view> slash_fields(std::string_view item) {
  std::vector<std::string_view> parts;
  for (std::size_t slash; (slash = item.find('/')) != std::string_view::npos;) {
    parts.push_back(item.substr(0, slash));
    item.remove_prefix(slash + 1);
  }
  parts.push_back(item);
  return parts;
}

bool is_ldh(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

// "80,443": 1-65535 each, at most kMaxEgressPorts, none twice.
Result<std::vector<std::uint16_t>> parse_ports(std::string_view text) {
  std::vector<std::uint16_t> ports;
  if (text.empty()) return fail(bad("empty port list"));
  while (true) {
    auto comma = text.find(',');
    auto port = parse_decimal(text.substr(0, comma), 1, 65535, "port");
    if (!port) return fail(port.error());
    if (std::find(ports.begin(), ports.end(), *port) != ports.end()) {
      return fail(bad("port " + std::to_string(*port) + " listed twice"));
    }
    ports.push_back(static_cast<std::uint16_t>(*port));
    if (ports.size() > kMaxEgressPorts) {
      return fail(bad("more than " + std::to_string(kMaxEgressPorts) + " ports"));
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return ports;
}

Result<std::vector<std::string>> parse_names(std::string_view text) {
  std::vector<std::string> names;
  if (text.empty()) return fail(bad("empty name list"));
  while (true) {
    auto comma = text.find(',');
    std::string_view name = text.substr(0, comma);
    if (!is_valid_egress_name(name, true)) {
      return fail(bad("invalid name " + pvs::quoted(name, 64) +
                      ": expected a lower-case DNS name of at least two labels, or *.<name>"));
    }
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return fail(bad("name " + std::string(name) + " listed twice"));
    }
    names.emplace_back(name);
    if (names.size() > kMaxEgressNames) {
      return fail(bad("more than " + std::to_string(kMaxEgressNames) + " names"));
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return names;
}

std::string join_ports(const std::vector<std::uint16_t>& ports) {
  std::string out;
  for (auto p : ports) {
    if (!out.empty()) out += ',';
    out += std::to_string(p);
  }
  return out;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ',';
    out += n;
  }
  return out;
}

Result<std::string> parse_plain_name(std::string_view name) {
  if (!is_valid_egress_name(name, false)) {
    return fail(bad("invalid name " + pvs::quoted(name, 64) +
                    ": expected a lower-case DNS name of at least two labels"));
  }
  return std::string(name);
}

Result<Ipv4Address> parse_address(std::string_view text) {
  auto address = Ipv4Address::parse(text);
  if (!address) return fail(bad(address.error().message));
  return *address;
}

Result<Request> parse_egress(const std::vector<std::string_view>& fields) {
  constexpr std::string_view kUsage = "EGRESS <ipv4> ports=<p>[,<p>...] names=<n>[,<n>...] | off";
  if (auto ok = expect_arity(fields, 2, 3, kUsage); !ok) return fail(ok.error());
  auto address = parse_address(fields[1]);
  if (!address) return fail(address.error());
  if (fields.size() == 3) {
    if (fields[2] != "off") return fail(bad("wrong arguments: usage: " + std::string(kUsage)));
    return EgressRequest{*address, std::nullopt};
  }
  if (!fields[2].starts_with("ports=") || !fields[3].starts_with("names=")) {
    return fail(bad("wrong arguments: usage: " + std::string(kUsage)));
  }
  auto ports = parse_ports(fields[2].substr(6));
  if (!ports) return fail(ports.error());
  auto names = parse_names(fields[3].substr(6));
  if (!names) return fail(names.error());
  return EgressRequest{*address, EgressList{std::move(*ports), std::move(*names)}};
}

Result<Request> parse_pair(const std::vector<std::string_view>& fields) {
  if (auto ok = expect_arity(fields, 4, 4, "PAIR <ipv4> <name> <dst>[,<dst>...] ttl=<seconds>");
      !ok) {
    return fail(ok.error());
  }
  PairRequest r;
  auto address = parse_address(fields[1]);
  if (!address) return fail(address.error());
  r.address = *address;
  auto name = parse_plain_name(fields[2]);
  if (!name) return fail(name.error());
  r.name = std::move(*name);
  std::string_view dsts = fields[3];
  while (true) {
    auto comma = dsts.find(',');
    auto dst = parse_address(dsts.substr(0, comma));
    if (!dst) return fail(dst.error());
    if (std::find(r.destinations.begin(), r.destinations.end(), *dst) != r.destinations.end()) {
      return fail(bad("destination " + dst->to_string() + " listed twice"));
    }
    r.destinations.push_back(*dst);
    if (r.destinations.size() > kMaxPairDestinations) {
      return fail(bad("more than " + std::to_string(kMaxPairDestinations) + " destinations"));
    }
    if (comma == std::string_view::npos) break;
    dsts.remove_prefix(comma + 1);
  }
  if (!fields[4].starts_with("ttl=")) {
    return fail(bad("unexpected argument " + pvs::quoted(fields[4]) + ": expected ttl=<seconds>"));
  }
  auto ttl = parse_decimal(fields[4].substr(4), 0, kMaxTtlSeconds, "ttl");
  if (!ttl) return fail(ttl.error());
  r.ttl_seconds = static_cast<std::uint32_t>(*ttl);
  return r;
}

}  // namespace

bool is_valid_egress_name(std::string_view name, bool allow_wildcard) {
  if (allow_wildcard && name.starts_with("*.")) name.remove_prefix(2);
  if (name.empty() || name.size() > 253) return false;
  std::size_t labels = 0;
  while (true) {
    auto dot = name.find('.');
    std::string_view label = name.substr(0, dot);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    if (!std::all_of(label.begin(), label.end(), is_ldh)) return false;
    ++labels;
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  return labels >= 2;
}

bool egress_name_matches(std::string_view pattern, std::string_view name) {
  if (pattern.starts_with("*.")) {
    std::string_view suffix = pattern.substr(1);  // ".github.com"
    return name.size() > suffix.size() && name.ends_with(suffix);
  }
  return pattern == name;
}

namespace detail {

std::optional<Result<Request>> parse_egress_request(const std::vector<std::string_view>& fields) {
  std::string_view verb = fields[0];
  if (verb == "EGRESS") return parse_egress(fields);
  if (verb == "EGRESSES") {
    if (auto ok = expect_arity(fields, 0, 0, "EGRESSES"); !ok) return fail(ok.error());
    return Result<Request>(EgressesRequest{});
  }
  if (verb == "ASK") {
    if (auto ok = expect_arity(fields, 2, 2, "ASK <ipv4> <name>"); !ok) return fail(ok.error());
    auto address = parse_address(fields[1]);
    if (!address) return fail(address.error());
    auto name = parse_plain_name(fields[2]);
    if (!name) return fail(name.error());
    return Result<Request>(AskRequest{*address, std::move(*name)});
  }
  if (verb == "PAIR") return parse_pair(fields);
  if (verb == "ELOG") {
    std::string line;
    for (auto f : fields) line += (line.empty() ? "" : " ") + std::string(f);
    auto l = parse_egress_log(line);
    if (!l) return fail(l.error());
    return Result<Request>(EgressLogRequest{std::move(*l)});
  }
  if (verb == "EGRESSLOG") {
    if (auto ok = expect_arity(fields, 1, 1, "EGRESSLOG <ipv4>"); !ok) return fail(ok.error());
    auto address = parse_address(fields[1]);
    if (!address) return fail(address.error());
    return Result<Request>(EgressLogQuery{*address});
  }
  if (verb == "EGRESSREFUSED") {
    if (auto ok = expect_arity(fields, 1, 1, "EGRESSREFUSED <ipv4>"); !ok) return fail(ok.error());
    auto address = parse_address(fields[1]);
    if (!address) return fail(address.error());
    return Result<Request>(EgressRefusedQuery{*address});
  }
  return std::nullopt;
}

std::string format_egress(const EgressRequest& r) {
  std::string out = "EGRESS " + r.address.to_string();
  if (!r.list) return out + " off";
  return out + " ports=" + join_ports(r.list->ports) + " names=" + join_names(r.list->names);
}

std::string format_ask(const AskRequest& r) {
  return "ASK " + r.address.to_string() + " " + r.name;
}

std::string format_pair(const PairRequest& r) {
  std::string out = "PAIR " + r.address.to_string() + " " + r.name + " ";
  for (std::size_t i = 0; i < r.destinations.size(); ++i) {
    if (i > 0) out += ',';
    out += r.destinations[i].to_string();
  }
  return out + " ttl=" + std::to_string(r.ttl_seconds);
}

}  // namespace detail

std::string format_egresses_payload(const std::vector<EgressEntry>& entries) {
  std::string out = std::to_string(entries.size());
  for (const auto& e : entries) {
    out += " " + e.address.to_string() + "=" + join_ports(e.list.ports) + "/" +
           join_names(e.list.names);
  }
  return out;
}

Result<std::vector<EgressEntry>> parse_egresses_payload(std::string_view payload) {
  auto items = counted_items(payload);
  if (!items) return fail(items.error());
  std::vector<EgressEntry> entries;
  std::unordered_set<Ipv4Address> seen;
  for (std::string_view item : *items) {
    auto eq = item.find('=');
    auto slash = item.find('/');
    if (eq == std::string_view::npos || slash == std::string_view::npos || slash < eq) {
      return fail(bad("invalid egress entry " + pvs::quoted(item, 64) +
                      ": expected <ipv4>=<ports>/<names>"));
    }
    auto address = parse_address(item.substr(0, eq));
    if (!address) return fail(address.error());
    if (!seen.insert(*address).second) {
      return fail(bad("address " + address->to_string() + " listed twice"));
    }
    auto ports = parse_ports(item.substr(eq + 1, slash - eq - 1));
    if (!ports) return fail(ports.error());
    auto names = parse_names(item.substr(slash + 1));
    if (!names) return fail(names.error());
    entries.push_back(EgressEntry{*address, EgressList{std::move(*ports), std::move(*names)}});
  }
  return entries;
}

std::string format_ask_payload(const AskAnswer& answer) {
  if (!answer.allow) return "deny";
  std::string out = "allow ports=" + join_ports(answer.ports);
  return answer.entry.empty() ? out : out + " entry=" + answer.entry;
}

Result<AskAnswer> parse_ask_payload(std::string_view payload) {
  if (payload == "deny") return AskAnswer{false, {}, ""};
  if (!payload.starts_with("allow ports=")) {
    return fail(bad("unexpected ASK reply " + pvs::quoted(payload, 64)));
  }
  payload.remove_prefix(12);
  std::string entry;
  if (auto space = payload.find(' '); space != std::string_view::npos) {
    std::string_view rest = payload.substr(space + 1);
    if (!rest.starts_with("entry=") || !is_valid_egress_name(rest.substr(6), true))
      return fail(bad("unexpected ASK reply field " + pvs::quoted(rest, 64)));
    entry = std::string(rest.substr(6));
    payload = payload.substr(0, space);
  }
  auto ports = parse_ports(payload);
  if (!ports) return fail(ports.error());
  return AskAnswer{true, std::move(*ports), std::move(entry)};
}

std::string format_egress_log(const EgressLogLine& l) {
  std::string out = "ELOG " + l.source.to_string() + " " + l.name + " " +
                    (l.allowed ? "allow" : "refuse") + " n=" + std::to_string(l.count) +
                    " at=" + std::to_string(l.window_ms) +
                    " entry=" + (l.entry.empty() ? "-" : l.entry) + " to=";
  if (l.to.empty()) return out + "-";
  for (std::size_t i = 0; i < l.to.size(); ++i) out += (i ? "," : "") + l.to[i].to_string();
  return out;
}

namespace {

// "key=value" with the key `key`: its value.
Result<std::string_view> field_value(std::string_view field, std::string_view key) {
  if (field.size() <= key.size() || !field.starts_with(key) || field[key.size()] != '=')
    return fail(bad("expected " + std::string(key) + "=..., got " + pvs::quoted(field, 64)));
  return field.substr(key.size() + 1);
}

Result<std::vector<Ipv4Address>> parse_log_addresses(std::string_view text) {
  std::vector<Ipv4Address> to;
  if (text == "-") return to;
  while (true) {
    auto comma = text.find(',');
    auto a = parse_address(text.substr(0, comma));
    if (!a) return fail(a.error());
    to.push_back(*a);
    if (to.size() > kMaxPairDestinations) return fail(bad("too many addresses"));
    if (comma == std::string_view::npos) return to;
    text.remove_prefix(comma + 1);
  }
}

}  // namespace

Result<EgressLogLine> parse_egress_log(std::string_view line) {
  auto fields = split(line);
  if (fields.size() != 8 || fields[0] != "ELOG")
    return fail(bad("expected ELOG <ipv4> <name>|* allow|refuse n= at= entry= to="));
  EgressLogLine l;
  auto source = parse_address(fields[1]);
  if (!source) return fail(source.error());
  l.source = *source;
  if (fields[2] != "*" && !is_valid_egress_name(fields[2], false))
    return fail(bad("invalid name " + pvs::quoted(fields[2], 64)));
  l.name = std::string(fields[2]);
  if (fields[3] != "allow" && fields[3] != "refuse") return fail(bad("expected allow or refuse"));
  l.allowed = fields[3] == "allow";
  auto n = field_value(fields[4], "n");
  if (!n) return fail(n.error());
  auto count = parse_decimal(*n, 1, UINT64_MAX, "n");
  if (!count) return fail(count.error());
  l.count = *count;
  auto at = field_value(fields[5], "at");
  if (!at) return fail(at.error());
  auto ms = parse_decimal(*at, 0, INT64_MAX, "at");
  if (!ms) return fail(ms.error());
  l.window_ms = static_cast<std::int64_t>(*ms);
  auto entry = field_value(fields[6], "entry");
  if (!entry) return fail(entry.error());
  if (*entry != "-" && !is_valid_egress_name(*entry, true))
    return fail(bad("invalid entry " + pvs::quoted(*entry, 64)));
  if (*entry != "-") l.entry = std::string(*entry);
  auto to = field_value(fields[7], "to");
  if (!to) return fail(to.error());
  auto addresses = parse_log_addresses(*to);
  if (!addresses) return fail(addresses.error());
  l.to = std::move(*addresses);
  return l;
}

std::string format_egress_log_payload(const std::vector<EgressLogLine>& lines) {
  std::string out = std::to_string(lines.size());
  for (const auto& l : lines) {
    out += " " + l.name + "/" + (l.allowed ? "allow" : "refuse") + "/" + std::to_string(l.count) +
           "/" + std::to_string(l.window_ms) + "/" + (l.entry.empty() ? "-" : l.entry) + "/";
    if (l.to.empty()) out += "-";
    for (std::size_t i = 0; i < l.to.size(); ++i) out += (i ? "," : "") + l.to[i].to_string();
  }
  return out;
}

Result<std::vector<EgressLogLine>> parse_egress_log_payload(Ipv4Address source,
                                                            std::string_view payload) {
  auto items = counted_items(payload);
  if (!items) return fail(items.error());
  std::vector<EgressLogLine> lines;
  for (std::string_view item : *items) {
    auto parts = slash_fields(item);
    if (parts.size() != 6) return fail(bad("invalid egress log item: expected 6 fields"));
    std::string line = "ELOG " + source.to_string() + " " + std::string(parts[0]) + " " +
                       std::string(parts[1]) + " n=" + std::string(parts[2]) +
                       " at=" + std::string(parts[3]) + " entry=" + std::string(parts[4]) +
                       " to=" + std::string(parts[5]);
    auto l = parse_egress_log(line);
    if (!l) return fail(l.error());
    lines.push_back(std::move(*l));
  }
  return lines;
}

namespace {

std::string protocol_text(const RefusedConnection& c) {
  if (c.others) return "*";
  if (c.protocol == 6) return "tcp";
  if (c.protocol == 17) return "udp";
  return std::to_string(c.protocol);
}

// "<ipv4>:<port>/<proto>/<count>/<first>/<last>"
Result<RefusedConnection> parse_refused_item(std::string_view item) {
  auto parts = slash_fields(item);
  if (parts.size() != 5) return fail(bad("invalid refused item: expected 5 fields"));
  RefusedConnection c;
  std::size_t colon = parts[0].rfind(':');
  if (colon == std::string_view::npos) return fail(bad("invalid refused item: expected ip:port"));
  auto address = parse_address(parts[0].substr(0, colon));
  if (!address) return fail(address.error());
  auto port = parse_decimal(parts[0].substr(colon + 1), 0, 65535, "port");
  if (!port) return fail(port.error());
  c.destination = *address;
  c.port = static_cast<std::uint16_t>(*port);
  if (parts[1] == "*") {
    c.others = true;
    if (c.destination != Ipv4Address(0) || c.port != 0)
      return fail(bad("invalid refused item: the rest is 0.0.0.0:0"));
  } else if (parts[1] == "tcp" || parts[1] == "udp") {
    c.protocol = parts[1] == "tcp" ? 6 : 17;
  } else {
    auto protocol = parse_decimal(parts[1], 0, 255, "protocol");
    if (!protocol) return fail(protocol.error());
    c.protocol = static_cast<std::uint8_t>(*protocol);
  }
  auto count = parse_decimal(parts[2], 1, UINT64_MAX, "count");
  if (!count) return fail(count.error());
  auto first = parse_decimal(parts[3], 0, INT64_MAX, "first");
  if (!first) return fail(first.error());
  auto last = parse_decimal(parts[4], 0, INT64_MAX, "last");
  if (!last) return fail(last.error());
  c.count = *count;
  c.first_ms = static_cast<std::int64_t>(*first);
  c.last_ms = static_cast<std::int64_t>(*last);
  if (c.last_ms < c.first_ms) return fail(bad("invalid refused item: last before first"));
  return c;
}

}  // namespace

std::string format_egress_refused_payload(const std::vector<RefusedConnection>& items) {
  std::string out = std::to_string(items.size());
  for (const auto& c : items) {
    out += " " + c.destination.to_string() + ":" + std::to_string(c.port) + "/" + protocol_text(c) +
           "/" + std::to_string(c.count) + "/" + std::to_string(c.first_ms) + "/" +
           std::to_string(c.last_ms);
  }
  return out;
}

Result<std::vector<RefusedConnection>> parse_egress_refused_payload(std::string_view payload) {
  auto items = counted_items(payload);
  if (!items) return fail(items.error());
  if (items->size() > kMaxRefusedPerReply + 1)
    return fail(bad("too many refused items: at most " + std::to_string(kMaxRefusedPerReply + 1)));
  std::vector<RefusedConnection> out;
  for (std::string_view item : *items) {
    auto c = parse_refused_item(item);
    if (!c) return fail(c.error());
    out.push_back(*c);
  }
  return out;
}

}  // namespace pvs::proto
