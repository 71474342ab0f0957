#include "e2b/control_wire.h"

#include <algorithm>
#include <cctype>

#include "api/ports/port_proxy.h"
#include "core/observability/audit.h"
#include "http/json.h"
#include "pvesandbox/common/text.h"
#include "pvesandbox/egress.h"
#include "pvesandbox/template_recipe.h"

namespace pvs::service::e2b {
namespace {

constexpr std::string_view kAllTraffic = "0.0.0.0/0";

// allow_internet_access, network.allowOut and network.denyOut as our egress (see docs/e2b.md).
ApiResult<EgressRequest> egress_from(std::optional<bool> allow_internet,
                                     const std::optional<std::vector<std::string>>& allow_out,
                                     const std::optional<std::vector<std::string>>& deny_out) {
  bool deny_all = false;
  for (const auto& d : deny_out.value_or(std::vector<std::string>{})) {
    if (d != kAllTraffic)
      return tl::unexpected(unsupported(
          "network.denyOut entry \"" + d + "\"",
          "egress is closed except for what is allowed; the only deny rule accepted is " +
              std::string(kAllTraffic) + " (all traffic)"));
    deny_all = true;
  }
  EgressRequest r;
  if (allow_internet == true && !deny_all) {
    r.kind = EgressRequest::Kind::kOn;
    return r;
  }
  for (const auto& entry : allow_out.value_or(std::vector<std::string>{})) {
    if (entry == kAllTraffic) {
      r.kind = EgressRequest::Kind::kOn;
      r.names.clear();
      return r;
    }
    if (egress_entry_is_address(entry))
      return tl::unexpected(unsupported(
          "network.allowOut entry \"" + entry + "\"",
          "egress allowlists are by DNS name (enforced by the node's resolver); give a domain "
          "such as \"pypi.org\" or \"*.github.com\", or " +
              std::string(kAllTraffic) + " for all"));
    std::string name = ascii_lower(entry);
    if (auto ok = validate_egress_name(name); !ok)
      return tl::unexpected(bad_request("network.allowOut: " + ok.error().message));
    if (std::find(r.names.begin(), r.names.end(), name) == r.names.end()) r.names.push_back(name);
  }
  if (r.names.size() > kMaxEgressNames)
    return tl::unexpected(
        bad_request("network.allowOut: at most " + std::to_string(kMaxEgressNames) + " names"));
  if (!r.names.empty()) r.kind = EgressRequest::Kind::kAllow;
  return r;
}

// The fields of a `network` object we do not serve: each refused by name.
void refuse_network_extras(JsonBody& net, JsonBody& outer) {
  static const char* kUnsupported[] = {"egressProxy", "rules", "httpsPorts"};
  for (const char* f : kUnsupported)
    if (net.has(f))
      outer.reject(std::string("network.") + f,
                   "not supported by pve-sandbox (egress is an allowlist of DNS names)");
  (void)net.boolean("allowPublicTraffic");  // a create's is read by read_network
}

// network.* of a create or an update; sets *explicit_egress when allowOut was given.
std::optional<EgressRequest> read_network(JsonBody& body, std::optional<bool> allow_internet,
                                          bool* explicit_egress, PortAccess* ports) {
  std::optional<std::vector<std::string>> allow_out, deny_out;
  if (auto net = body.object("network")) {
    if (ports) {
      ports->public_traffic = net->boolean("allowPublicTraffic").value_or(false);
      if (auto mask = net->string("maskRequestHost", 255)) {
        if (auto st = ports::check_host_mask(*mask); !st)
          body.reject("network.maskRequestHost", st.error().message);
        ports->mask_host = *mask;
      }
    }
    allow_out = net->string_list("allowOut", 256, kMaxEgressName + 2);
    deny_out = net->string_list("denyOut", 256, 64);
    refuse_network_extras(*net, body);
    if (auto err = net->finish()) body.reject("network", err->message);
  } else if (body.type_of("network") != "" && body.type_of("network") != "object") {
    body.reject("network", "must be an object");
  }
  if (explicit_egress) *explicit_egress = allow_internet.has_value() || allow_out.has_value();
  auto egress = egress_from(allow_internet, allow_out, deny_out);
  if (!egress) {
    body.reject("network", egress.error().message);
    return std::nullopt;
  }
  return *egress;
}

std::optional<std::string> uri_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else if (c == '%') {
      auto hex = [](char h) -> int {
        if (h >= '0' && h <= '9') return h - '0';
        h = static_cast<char>(std::tolower(static_cast<unsigned char>(h)));
        return h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
      };
      if (i + 2 >= text.size()) return std::nullopt;
      int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

ApiError unsupported(const std::string& what, const std::string& why) {
  return bad_request(what + " is not supported by pve-sandbox: " + why);
}

bool is_e2b_api_key(std::string_view key) {
  constexpr std::string_view kPrefix = "e2b_";
  if (key.substr(0, kPrefix.size()) != kPrefix) return false;
  auto hex = key.substr(kPrefix.size());
  if (hex.size() < 8 || hex.size() > 128) return false;
  return std::all_of(hex.begin(), hex.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::optional<std::string> sandbox_from_host(std::string_view host) {
  constexpr std::string_view kPrefix = "49983-";
  if (host.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  host.remove_prefix(kPrefix.size());
  auto dot = host.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= host.size()) return std::nullopt;
  std::string id(host.substr(0, dot));
  if (!is_sandbox_id(id)) return std::nullopt;
  return id;
}

std::optional<std::string> envd_host_sandbox(std::string_view host, std::string_view domain) {
  auto p = port_host(host, domain);
  if (!p || p->port != kEnvdPort) return std::nullopt;
  return p->sandbox;
}

std::optional<PortHost> port_host(std::string_view host, std::string_view domain) {
  if (auto colon = host.rfind(':'); colon != std::string_view::npos) host = host.substr(0, colon);
  auto dash = host.find('-');
  auto dot = host.find('.');
  if (dash == std::string_view::npos || dash == 0 || dash > 5 || dot == std::string_view::npos ||
      dot < dash)
    return std::nullopt;
  std::uint32_t port = 0;
  for (char c : host.substr(0, dash)) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (host[0] == '0' || port == 0 || port > 65535) return std::nullopt;
  std::string id(host.substr(dash + 1, dot - dash - 1));
  if (!is_sandbox_id(id)) return std::nullopt;
  std::string_view rest = host.substr(dot + 1);
  if (rest.size() != domain.size()) return std::nullopt;
  for (std::size_t i = 0; i < domain.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(rest[i])) != domain[i]) return std::nullopt;
  return PortHost{std::move(id), static_cast<std::uint16_t>(port)};
}

bool is_template_id(std::string_view id) {
  if (id.empty() || id.size() > 64 || !std::isalnum(static_cast<unsigned char>(id[0])))
    return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

ApiResult<NewSandbox> parse_new_sandbox(std::string_view text, const NewSandboxLimits& limits) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  NewSandbox r;
  r.template_id = body->string("templateID", 64).value_or(std::string(kDefaultTemplate));
  if (!is_template_id(r.template_id))
    body->reject("templateID", "must be 1-64 of [A-Za-z0-9._-], starting with a letter or digit");
  r.create.ttl_seconds =
      static_cast<int>(body->integer("timeout", 0, limits.max_ttl_seconds).value_or(0));
  // lifecycle {onTimeout, autoResume} as the SDK sends it (docs/e2b.md, "Pause and resume").
  r.create.pause_on_expiry = body->boolean("autoPause").value_or(false);
  if (body->boolean("autoPauseMemory").value_or(false))
    body->reject("autoPauseMemory",
                 "pve-sandbox pauses in the filesystem mode only (files are kept, processes "
                 "end): use onTimeout {action: 'pause', keepMemory: false}, or 'pause'");
  if (auto resume = body->object("autoResume")) {
    r.create.auto_resume = resume->boolean("enabled").value_or(false);
    if (auto err = resume->finish()) body->reject("autoResume", err->message);
  }
  if (r.create.auto_resume && !r.create.pause_on_expiry)
    body->reject("autoResume", "needs autoPause (lifecycle.onTimeout 'pause')");
  (void)body->boolean("secure");  // always: every data-plane call needs envdAccessToken
  for (const char* f : {"mcp", "iam"})
    if (body->has(f)) body->reject(f, "not supported by pve-sandbox");
  // volumeMounts [{name, path}]: the key's volumes by name, read-write (docs/e2b.md, Volumes).
  for (auto& v : body->object_list("volumeMounts", 64).value_or(std::vector<JsonBody>{})) {
    VolumeMount& m = r.create.volumes.emplace_back();
    m.volume = v.string("name", 63).value_or("");
    m.path = v.string("path", 200).value_or("");
    if (auto err = v.finish()) {
      body->reject("volumeMounts", err->message);
      break;
    }
    if (!valid_volume_name(m.volume) || m.path.empty()) {
      body->reject("volumeMounts", "each needs a volume's \"name\" and a \"path\"");
      break;
    }
  }
  if (auto md = body->string_map("metadata", kMaxLabels, kMaxLabelValue)) {
    r.create.labels = std::move(*md);
    if (auto e = client_label_error(r.create.labels))
      body->reject("metadata", *e + " (metadata are pve-sandbox labels)");
  }
  if (auto env = body->string_map("envVars", kMaxEnvEntries, kMaxEnvValueBytes)) {
    r.env_vars = std::move(*env);
    for (const auto& [k, v] : r.env_vars)
      if (!is_env_name(k)) body->reject("envVars", "\"" + k + "\" is not a variable name");
  }
  auto allow_internet = body->boolean("allow_internet_access");
  if (auto egress = read_network(*body, allow_internet, &r.internet_explicit, &r.ports))
    r.create.internet = *egress;
  if (auto err = body->finish()) return tl::unexpected(*err);
  return r;
}

ApiResult<int> parse_timeout(std::string_view text, int max_ttl_seconds) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  auto t = body->integer("timeout", 0, max_ttl_seconds);
  if (!t && !body->finish()) body->reject("timeout", "required (seconds from now)");
  if (auto err = body->finish()) return tl::unexpected(*err);
  return std::max<int>(1, static_cast<int>(*t));
}

ApiResult<int> parse_connect(std::string_view text, int max_ttl_seconds) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  // The spec requires it; the SDK leaves it out when connect() gets no timeoutMs.
  auto t = body->integer("timeout", 0, max_ttl_seconds);
  (void)body->boolean("memory");  // false: reboot on resume, which every resume here is
  if (auto err = body->finish()) return tl::unexpected(*err);
  return t ? std::max<int>(1, static_cast<int>(*t)) : 0;
}

ApiResult<PauseMode> parse_pause(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  if (body->boolean("memory").value_or(false))
    body->reject("memory",
                 "keepMemory: true is not supported by pve-sandbox: a pause keeps the file "
                 "system only (processes end); pass keepMemory: false");
  return finish(*body, PauseMode::kFilesystem);
}

ApiResult<EgressRequest> parse_network_update(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  // The update's allowOut/denyOut sit at the top level; read_network wants them in "network".
  std::optional<std::vector<std::string>> allow_out = body->string_list("allowOut", 256, 255);
  std::optional<std::vector<std::string>> deny_out = body->string_list("denyOut", 256, 64);
  auto allow_internet = body->boolean("allow_internet_access");
  refuse_network_extras(*body, *body);
  if (body->has("maskRequestHost"))
    body->reject("maskRequestHost", "set when the sandbox is created, not changed after");
  if (auto err = body->finish()) return tl::unexpected(*err);
  auto egress = egress_from(allow_internet, allow_out, deny_out);
  if (!egress) return tl::unexpected(egress.error());
  return *egress;
}

namespace {

// limit (1..100) or nextToken (an offset this server issued) of a listing.
ApiResult<bool> page_param(const std::string& key, const std::string& value, std::size_t& limit,
                           std::size_t& offset) {
  auto digits = [](std::string_view v, std::size_t most) {
    return !v.empty() && v.size() <= most &&
           std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (key == "limit") {
    auto n = uri_decode(value, false);
    if (!n || !digits(*n, 4) || std::stoi(*n) < 1 || std::stoi(*n) > 100)
      return tl::unexpected(bad_request("limit: must be an integer in [1, 100]"));
    limit = static_cast<std::size_t>(std::stoi(*n));
  } else {
    if (!digits(value, 9))
      return tl::unexpected(bad_request("nextToken: not a token this server issued"));
    offset = static_cast<std::size_t>(std::stoul(value));
  }
  return true;
}

}  // namespace

ApiResult<SnapshotQuery> parse_snapshot_query(
    const std::multimap<std::string, std::string>& query) {
  SnapshotQuery q;
  for (const auto& [key, value] : query) {
    if (key == "limit" || key == "nextToken") {
      if (auto st = page_param(key, value, q.limit, q.offset); !st)
        return tl::unexpected(st.error());
    } else if (key == "sandboxID") {
      q.sandbox_id = value;
    } else if (key == "name") {
      q.name = value;
    } else {
      return tl::unexpected(bad_request(key.substr(0, 64) + ": unknown query parameter"));
    }
  }
  return q;
}

ApiResult<ForkRequest> parse_fork(std::string_view text, int max_fork, int max_ttl) {
  auto body = JsonBody::parse(text.empty() ? std::string_view("{}") : text);
  if (!body) return tl::unexpected(body.error());
  ForkRequest r;
  r.count = static_cast<int>(body->integer("count", 1, max_fork).value_or(1));
  r.ttl_seconds = static_cast<int>(body->integer("timeout", 1, max_ttl).value_or(kForkTimeout));
  if (auto err = body->finish()) return tl::unexpected(*err);
  return r;
}

ApiResult<std::string> parse_snapshot(std::string_view text) {
  auto body = JsonBody::parse(text.empty() ? std::string_view("{}") : text);
  if (!body) return tl::unexpected(body.error());
  std::string name;
  if (auto v = body->string("name", 32)) {
    if (!valid_template_name(*v))
      body->reject("name",
                   "pve-sandbox names snapshots as templates: 1-32 of [a-z0-9-], a "
                   "letter first");
    name = *v;
  }
  if (auto err = body->finish()) return tl::unexpected(*err);
  return name;
}

ApiResult<ListQuery> parse_list_query(const std::multimap<std::string, std::string>& query) {
  ListQuery q;
  for (const auto& [key, value] : query) {
    if (key == "metadata") {
      std::string_view rest = value;
      while (!rest.empty()) {
        auto amp = rest.find('&');
        std::string_view pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view{} : rest.substr(amp + 1);
        auto eq = pair.find('=');
        auto k = uri_decode(pair.substr(0, eq), true);
        auto v = uri_decode(eq == std::string_view::npos ? "" : pair.substr(eq + 1), true);
        // The SDK encodes each key and value before URLSearchParams encodes the pairs.
        if (k) k = uri_decode(*k, false);
        if (v) v = uri_decode(*v, false);
        if (!k || !v || k->empty() || eq == std::string_view::npos)
          return tl::unexpected(bad_request("metadata: expected key=value pairs joined by &"));
        q.metadata[*k] = *v;
      }
    } else if (key == "state") {
      // "running,paused" (form style, not exploded).
      q.running = value.empty() || value.find("running") != std::string::npos;
      q.paused = value.empty() || value.find("paused") != std::string::npos;
    } else if (key == "template") {
      q.template_id = value;
    } else if (key == "limit" || key == "nextToken") {
      if (auto st = page_param(key, value, q.limit, q.offset); !st)
        return tl::unexpected(st.error());
    } else if (key != "order" && key != "startedAfter") {
      return tl::unexpected(bad_request(key + ": unknown query parameter"));
    }
  }
  return q;
}

ApiResult<MetricsQuery> parse_metrics_query(const std::multimap<std::string, std::string>& query) {
  MetricsQuery q;
  for (const auto& [key, value] : query) {
    if (key != "start" && key != "end")
      return tl::unexpected(bad_request(key + ": unknown query parameter"));
    bool digits =
        !value.empty() && value.size() <= 12 &&
        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) return tl::unexpected(bad_request(key + ": expected unix seconds"));
    (key == "start" ? q.start : q.end) = std::stoll(value);
  }
  if (q.start && q.end && *q.start > *q.end)
    return tl::unexpected(bad_request("start: after end (no time range)"));
  return q;
}

std::string next_token(std::size_t offset) {
  return std::to_string(offset);
}

}  // namespace pvs::service::e2b
