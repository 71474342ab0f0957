#include "pvesandbox/common/protocol.h"

#include <charconv>
#include <unordered_set>

#include "protocol_internal.h"
#include "pvesandbox/common/text.h"

namespace pvs::proto {
using namespace detail;
namespace {

// Checks the framing rules shared by requests and replies.
Status check_line(std::string_view line, std::size_t max) {
  if (line.size() > max) {
    return fail(ErrorCode::kTooLarge, "line longer than " + std::to_string(max) + " bytes");
  }
  if (line.empty()) return fail(bad("empty line"));
  for (std::size_t i = 0; i < line.size(); ++i) {
    auto c = static_cast<unsigned char>(line[i]);
    if (c < 0x20 || c >= 0x7f) {
      std::string what = c == 0      ? "NUL byte"
                         : c == '\r' ? "carriage return"
                         : c == '\t' ? "tab"
                         : c >= 0x80 ? "non-ASCII byte"
                                     : "control byte";
      return fail(bad(what + " at offset " + std::to_string(i)));
    }
  }
  if (line.front() == ' ' || line.back() == ' ') return fail(bad("leading or trailing space"));
  if (line.find("  ") != std::string_view::npos)
    return fail(bad("fields separated by more than one space"));
  return {};
}

}  // namespace

namespace detail {

Error bad(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

std::vector<std::string_view> split(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    auto space = text.find(' ');
    out.push_back(text.substr(0, space));
    if (space == std::string_view::npos) break;
    text.remove_prefix(space + 1);
  }
  return out;
}

Result<std::uint64_t> parse_decimal(std::string_view text, std::uint64_t min, std::uint64_t max,
                                    std::string_view what) {
  bool digits = !text.empty() && text.size() <= 20;
  for (char c : text) digits = digits && c >= '0' && c <= '9';
  if (!digits || (text.size() > 1 && text[0] == '0')) {
    return fail(bad("invalid " + std::string(what) + " " + pvs::quoted(text) +
                    ": expected a decimal number without leading zeros"));
  }
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || value < min || value > max) {
    return fail(bad("invalid " + std::string(what) + " " + pvs::quoted(text) + ": must be " +
                    std::to_string(min) + "-" + std::to_string(max)));
  }
  return value;
}

Status expect_arity(const std::vector<std::string_view>& fields, std::size_t min, std::size_t max,
                    std::string_view usage) {
  std::size_t args = fields.size() - 1;
  if (args < min || args > max) {
    return fail(bad("wrong number of arguments: usage: " + std::string(usage)));
  }
  return {};
}

}  // namespace detail

namespace {

Result<std::uint32_t> parse_ttl(std::string_view text, std::uint32_t min) {
  auto value = parse_decimal(text, min, kMaxTtlSeconds, "ttl");
  if (!value) return fail(value.error());
  return static_cast<std::uint32_t>(*value);
}

// "<ipv4>" or "<ipv4>@<seconds>"; `min_ttl` is 1 for leases asked for and 0 for time left.
Result<Grant> parse_grant(std::string_view token, std::uint32_t min_ttl) {
  Grant grant;
  auto at = token.find('@');
  auto address = Ipv4Address::parse(token.substr(0, at));
  if (!address) return fail(bad(address.error().message));
  grant.address = *address;
  if (at != std::string_view::npos) {
    auto ttl = parse_ttl(token.substr(at + 1), min_ttl);
    if (!ttl) return fail(ttl.error());
    grant.ttl_seconds = *ttl;
  }
  return grant;
}

std::string format_grant(const Grant& grant) {
  std::string out = grant.address.to_string();
  if (grant.ttl_seconds) out += "@" + std::to_string(*grant.ttl_seconds);
  return out;
}

Result<std::string> parse_port(std::string_view text) {
  if (!is_valid_port_name(text)) {
    return fail(bad("invalid port " + pvs::quoted(text) +
                    ": expected a Proxmox container port veth<vmid>i<n> or fwpr<vmid>p<n>"));
  }
  return std::string(text);
}

Result<Binding> parse_binding_fields(std::string_view port, std::string_view mac,
                                     std::string_view address) {
  auto p = parse_port(port);
  if (!p) return fail(p.error());
  auto m = MacAddress::parse(mac);
  if (!m) return fail(bad(m.error().message));
  if (!m->is_unicast()) {
    return fail(bad("invalid MAC address " + pvs::quoted(mac) + ": must be unicast and not zero"));
  }
  auto a = Ipv4Address::parse(address);
  if (!a) return fail(bad(a.error().message));
  return Binding{*p, *m, *a};
}

// ROUTE <ipv4> <port> <seconds> / UNROUTE <ipv4> <port>.
Result<Request> parse_route(const std::vector<std::string_view>& fields) {
  bool route = fields[0] == "ROUTE";
  if (auto ok = route ? expect_arity(fields, 3, 3, "ROUTE <ipv4> <port> <seconds>")
                      : expect_arity(fields, 2, 2, "UNROUTE <ipv4> <port>");
      !ok) {
    return fail(ok.error());
  }
  auto address = Ipv4Address::parse(fields[1]);
  if (!address) return fail(bad(address.error().message));
  auto port = parse_decimal(fields[2], 1, 65535, "port");
  if (!port) return fail(port.error());
  if (!route) return UnrouteRequest{*address, static_cast<std::uint16_t>(*port)};
  auto seconds = parse_decimal(fields[3], 1, kMaxRouteSeconds, "seconds");
  if (!seconds) return fail(seconds.error());
  return RouteRequest{*address, static_cast<std::uint16_t>(*port),
                      static_cast<std::uint32_t>(*seconds)};
}

bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

bool is_valid_port_name(std::string_view port) {
  if (port.size() > 15) return false;  // IFNAMSIZ - 1
  char separator;
  if (port.starts_with("veth")) {
    separator = 'i';
  } else if (port.starts_with("fwpr")) {
    separator = 'p';
  } else {
    return false;
  }
  std::string_view rest = port.substr(4);
  auto sep = rest.find(separator);
  if (sep == std::string_view::npos) return false;
  auto vmid = parse_decimal(rest.substr(0, sep), 100, 999'999'999, "vmid");
  auto index = parse_decimal(rest.substr(sep + 1), 0, 31, "index");
  return vmid.has_value() && index.has_value();
}

Result<Request> parse_request(std::string_view line) {
  if (auto ok = check_line(line, kMaxRequestLine); !ok) return fail(ok.error());
  auto fields = split(line);
  std::string_view verb = fields[0];

  if (verb == "HELLO") {
    if (auto ok = expect_arity(fields, 1, 1, "HELLO <version>"); !ok) return fail(ok.error());
    auto version = parse_decimal(fields[1], 1, 1'000'000, "protocol version");
    if (!version) return fail(version.error());
    return HelloRequest{static_cast<int>(*version)};
  }
  if (verb == "ALLOW") {
    if (auto ok = expect_arity(fields, 1, 2, "ALLOW <ipv4> [ttl=<seconds>]"); !ok) {
      return fail(ok.error());
    }
    auto address = Ipv4Address::parse(fields[1]);
    if (!address) return fail(bad(address.error().message));
    AllowRequest request{Grant{*address, std::nullopt}};
    if (fields.size() == 3) {
      if (!fields[2].starts_with("ttl=")) {
        return fail(
            bad("unexpected argument " + pvs::quoted(fields[2]) + ": expected ttl=<seconds>"));
      }
      auto ttl = parse_ttl(fields[2].substr(4), 1);
      if (!ttl) return fail(ttl.error());
      request.grant.ttl_seconds = *ttl;
    }
    return request;
  }
  if (verb == "REVOKE") {
    if (auto ok = expect_arity(fields, 1, 1, "REVOKE <ipv4>"); !ok) return fail(ok.error());
    auto address = Ipv4Address::parse(fields[1]);
    if (!address) return fail(bad(address.error().message));
    return RevokeRequest{*address};
  }
  if (verb == "SYNC") {
    SyncRequest request;
    request.grants.reserve(fields.size() - 1);
    std::unordered_set<Ipv4Address> seen;
    for (std::size_t i = 1; i < fields.size(); ++i) {
      auto grant = parse_grant(fields[i], 1);
      if (!grant) return fail(grant.error());
      if (!seen.insert(grant->address).second) {
        return fail(bad("duplicate address " + grant->address.to_string() + " in SYNC"));
      }
      request.grants.push_back(*grant);
    }
    return request;
  }
  if (verb == "LIST") {
    if (auto ok = expect_arity(fields, 0, 0, "LIST"); !ok) return fail(ok.error());
    return ListRequest{};
  }
  if (verb == "BIND") {
    if (auto ok = expect_arity(fields, 3, 3, "BIND <port> <mac> <ipv4>"); !ok) {
      return fail(ok.error());
    }
    auto binding = parse_binding_fields(fields[1], fields[2], fields[3]);
    if (!binding) return fail(binding.error());
    return BindRequest{*binding};
  }
  if (verb == "UNBIND") {
    if (auto ok = expect_arity(fields, 1, 1, "UNBIND <port>"); !ok) return fail(ok.error());
    auto port = parse_port(fields[1]);
    if (!port) return fail(port.error());
    return UnbindRequest{*port};
  }
  if (verb == "BINDINGS") {
    if (auto ok = expect_arity(fields, 0, 0, "BINDINGS"); !ok) return fail(ok.error());
    return BindingsRequest{};
  }
  if (verb == "STATUS") {
    if (auto ok = expect_arity(fields, 0, 0, "STATUS"); !ok) return fail(ok.error());
    return StatusRequest{};
  }
  if (verb == "ROUTE" || verb == "UNROUTE") return parse_route(fields);
  if (auto egress = parse_egress_request(fields)) return std::move(*egress);
  return fail(bad("unknown verb " + pvs::quoted(verb, 16)));
}

namespace {

struct RequestFormatter {
  std::string operator()(const HelloRequest& r) const {
    return "HELLO " + std::to_string(r.version);
  }
  std::string operator()(const AllowRequest& r) const {
    std::string out = "ALLOW " + r.grant.address.to_string();
    if (r.grant.ttl_seconds) out += " ttl=" + std::to_string(*r.grant.ttl_seconds);
    return out;
  }
  std::string operator()(const RevokeRequest& r) const { return "REVOKE " + r.address.to_string(); }
  std::string operator()(const SyncRequest& r) const {
    std::string out = "SYNC";
    out.reserve(r.grants.size() * 18 + 4);
    for (const auto& grant : r.grants) out += " " + format_grant(grant);
    return out;
  }
  std::string operator()(const ListRequest&) const { return "LIST"; }
  std::string operator()(const BindRequest& r) const {
    return "BIND " + r.binding.port + " " + r.binding.mac.to_string() + " " +
           r.binding.address.to_string();
  }
  std::string operator()(const UnbindRequest& r) const { return "UNBIND " + r.port; }
  std::string operator()(const BindingsRequest&) const { return "BINDINGS"; }
  std::string operator()(const StatusRequest&) const { return "STATUS"; }
  std::string operator()(const EgressRequest& r) const { return format_egress(r); }
  std::string operator()(const EgressesRequest&) const { return "EGRESSES"; }
  std::string operator()(const AskRequest& r) const { return format_ask(r); }
  std::string operator()(const PairRequest& r) const { return format_pair(r); }
  std::string operator()(const EgressLogRequest& r) const { return format_egress_log(r.line); }
  std::string operator()(const EgressLogQuery& r) const {
    return "EGRESSLOG " + r.address.to_string();
  }
  std::string operator()(const EgressRefusedQuery& r) const {
    return "EGRESSREFUSED " + r.address.to_string();
  }
  std::string operator()(const RouteRequest& r) const {
    return "ROUTE " + r.address.to_string() + " " + std::to_string(r.port) + " " +
           std::to_string(r.seconds);
  }
  std::string operator()(const UnrouteRequest& r) const {
    return "UNROUTE " + r.address.to_string() + " " + std::to_string(r.port);
  }
};

}  // namespace

std::string format_request(const Request& request) {
  return std::visit(RequestFormatter{}, request);
}

std::string_view verb_name(const Request& request) {
  static constexpr std::string_view kNames[] = {
      "HELLO",  "ALLOW",    "REVOKE",    "SYNC",          "LIST",     "BIND",
      "UNBIND", "BINDINGS", "STATUS",    "EGRESS",        "EGRESSES", "ASK",
      "PAIR",   "ELOG",     "EGRESSLOG", "EGRESSREFUSED", "ROUTE",    "UNROUTE"};
  static_assert(std::size(kNames) == std::variant_size_v<Request>);
  return kNames[request.index()];
}

// ---- replies ------------------------------------------------------------------------------

Result<Reply> parse_reply(std::string_view line) {
  if (auto ok = check_line(line, kMaxReplyLine); !ok) return fail(ok.error());
  if (line == "OK") return Reply{true, 0, ""};
  if (line.starts_with("OK ")) return Reply{true, 0, std::string(line.substr(3))};
  if (line.starts_with("ERR ")) {
    std::string_view rest = line.substr(4);
    auto space = rest.find(' ');
    auto code = parse_decimal(rest.substr(0, space), 100, 599, "error code");
    if (!code) return fail(code.error());
    std::string message =
        space == std::string_view::npos ? "" : std::string(rest.substr(space + 1));
    return Reply{false, static_cast<int>(*code), std::move(message)};
  }
  return fail(bad("reply is neither OK nor ERR: " + pvs::quoted(line)));
}

std::string format_ok(std::string_view payload) {
  if (payload.empty()) return "OK";
  std::string out = "OK ";
  out += payload;
  return out;
}

std::string format_error(ReplyCode code, std::string_view message) {
  constexpr std::size_t kMaxMessage = 512;
  std::string out = "ERR " + std::to_string(static_cast<int>(code));
  std::string clean;
  for (char c : message.substr(0, kMaxMessage)) {
    auto u = static_cast<unsigned char>(c);
    clean += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  // Keep the line well-formed: no leading, trailing or doubled spaces.
  std::string squeezed;
  for (char c : clean) {
    if (c == ' ' && (squeezed.empty() || squeezed.back() == ' ')) continue;
    squeezed += c;
  }
  while (!squeezed.empty() && squeezed.back() == ' ') squeezed.pop_back();
  if (!squeezed.empty()) out += " " + squeezed;
  return out;
}

ReplyCode reply_code_for(const Error& error) {
  switch (error.code) {
    case ErrorCode::kInvalidArgument: return ReplyCode::kBadRequest;
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kUnauthenticated: return ReplyCode::kForbidden;
    case ErrorCode::kConflict:
    case ErrorCode::kNotFound: return ReplyCode::kConflict;
    case ErrorCode::kTooLarge: return ReplyCode::kTooLarge;
    default: return ReplyCode::kInternal;
  }
}

Error error_from_reply(const Reply& reply) {
  ErrorCode code = ErrorCode::kInternal;
  switch (reply.code) {
    case 400: code = ErrorCode::kInvalidArgument; break;
    case 403: code = ErrorCode::kPermissionDenied; break;
    case 409: code = ErrorCode::kConflict; break;
    case 413: code = ErrorCode::kTooLarge; break;
    default: break;
  }
  return Error{code, "agent: " + std::to_string(reply.code) + " " + reply.text};
}

std::string format_hello_payload(std::string_view agent_version) {
  return "pve-sandbox-agent " + std::string(agent_version) +
         " proto=" + std::to_string(kProtocolVersion);
}

Result<HelloInfo> parse_hello_payload(std::string_view payload) {
  auto fields = split(payload);
  if (fields.size() != 3 || fields[0] != "pve-sandbox-agent" || !fields[2].starts_with("proto=")) {
    return fail(bad("unexpected HELLO reply " + pvs::quoted(payload)));
  }
  auto proto = parse_decimal(fields[2].substr(6), 1, 1'000'000, "protocol version");
  if (!proto) return fail(proto.error());
  return HelloInfo{std::string(fields[1]), static_cast<int>(*proto)};
}

Result<std::uint64_t> parse_count_payload(std::string_view payload) {
  return parse_decimal(payload, 0, UINT32_MAX, "count");
}

std::string format_list_payload(const std::vector<Grant>& grants) {
  std::string out = std::to_string(grants.size());
  out.reserve(grants.size() * 18 + 8);
  for (const auto& grant : grants) out += " " + format_grant(grant);
  return out;
}

// "<n> item item ...": checks that n matches the number of items.
Result<std::vector<std::string_view>> detail::counted_items(std::string_view payload) {
  if (payload.empty()) return fail(bad("missing count"));
  auto fields = split(payload);
  auto count = parse_decimal(fields[0], 0, UINT32_MAX, "count");
  if (!count) return fail(count.error());
  if (*count != fields.size() - 1) {
    return fail(bad("count " + std::to_string(*count) + " does not match " +
                    std::to_string(fields.size() - 1) + " items"));
  }
  fields.erase(fields.begin());
  return fields;
}

Result<std::vector<Grant>> parse_list_payload(std::string_view payload) {
  auto items = counted_items(payload);
  if (!items) return fail(items.error());
  std::vector<Grant> grants;
  grants.reserve(items->size());
  for (auto item : *items) {
    auto grant = parse_grant(item, 0);
    if (!grant) return fail(grant.error());
    grants.push_back(*grant);
  }
  return grants;
}

std::string format_bindings_payload(const std::vector<Binding>& bindings) {
  std::string out = std::to_string(bindings.size());
  for (const auto& b : bindings) {
    out += " " + b.port + "=" + b.mac.to_string() + "/" + b.address.to_string();
  }
  return out;
}

Result<std::vector<Binding>> parse_bindings_payload(std::string_view payload) {
  auto items = counted_items(payload);
  if (!items) return fail(items.error());
  std::vector<Binding> bindings;
  bindings.reserve(items->size());
  for (auto item : *items) {
    auto eq = item.find('=');
    auto slash = item.find('/');
    if (eq == std::string_view::npos || slash == std::string_view::npos || slash < eq) {
      return fail(bad("invalid binding " + pvs::quoted(item) + ": expected <port>=<mac>/<ipv4>"));
    }
    auto binding = parse_binding_fields(item.substr(0, eq), item.substr(eq + 1, slash - eq - 1),
                                        item.substr(slash + 1));
    if (!binding) return fail(binding.error());
    bindings.push_back(*binding);
  }
  return bindings;
}

std::string format_status_payload(const StatusFields& fields) {
  std::string out;
  for (const auto& [key, value] : fields) {
    if (!out.empty()) out += ' ';
    out += key + "=" + value;
  }
  return out;
}

Result<StatusFields> parse_status_payload(std::string_view payload) {
  StatusFields fields;
  if (payload.empty()) return fields;
  for (auto item : split(payload)) {
    auto eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    bool key_ok = eq != std::string_view::npos && !key.empty();
    for (char c : key) key_ok = key_ok && is_key_char(c);
    if (!key_ok)
      return fail(bad("invalid STATUS field " + pvs::quoted(item) + ": expected key=value"));
    if (find_field(fields, key)) return fail(bad("duplicate STATUS field " + pvs::quoted(key)));
    fields.emplace_back(std::string(key), std::string(item.substr(eq + 1)));
  }
  return fields;
}

std::optional<std::string_view> find_field(const StatusFields& fields, std::string_view key) {
  for (const auto& [k, v] : fields) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

}  // namespace pvs::proto
