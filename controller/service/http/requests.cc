#include "http/requests.h"

#include <charconv>

#include "http/json.h"
#include "pvesandbox/egress.h"
#include "pvesandbox/template_recipe.h"

namespace pvs::service {
namespace {

// {"allow": [...], "ports": [...]} or {"list": "..."} from `body` (the object itself); `where`
// prefixes the fields in messages ("internet." at create).
void read_allowlist(JsonBody& body, JsonBody& outer, const std::string& where, EgressRequest* r) {
  if (body.has("allow") == body.has("list"))
    return outer.reject(where + "allow", "give allow (a list of names) or list (a named list)");
  if (auto list = body.string("list", 64)) {
    if (!valid_egress_list_name(*list))
      return outer.reject(where + "list", "not a list name (1-64 of [a-z0-9._-])");
    r->kind = EgressRequest::Kind::kList;
    r->list = *list;
    if (body.has("ports")) return outer.reject(where + "ports", "a named list has its own ports");
  }
  if (auto names = body.string_list("allow", kMaxEgressNames, kMaxEgressName + 2)) {
    r->kind = EgressRequest::Kind::kAllow;
    r->names = *names;
    for (const auto& n : r->names)
      if (auto ok = validate_egress_name(n); !ok)
        return outer.reject(where + "allow", ok.error().message);
    if (r->names.empty()) return outer.reject(where + "allow", "names no name");
    if (auto ports = body.integer_list("ports", kMaxEgressPorts, 1, 65535))
      for (auto p : *ports) r->ports.push_back(static_cast<std::uint16_t>(p));
  }
  if (&body == &outer) return;  // the caller finishes it
  if (auto err = body.finish()) outer.reject(where.substr(0, where.size() - 1), err->message);
}

}  // namespace

std::string egress_request_json(const EgressRequest& r) {
  JsonWriter w;
  switch (r.kind) {
    case EgressRequest::Kind::kOff: return "false";
    case EgressRequest::Kind::kOn: return "true";
    case EgressRequest::Kind::kList:
      w.begin_object().key("list").value(r.list).end_object();
      return w.take();
    case EgressRequest::Kind::kAllow: break;
  }
  w.begin_object().key("allow").begin_array();
  for (const auto& n : r.names) w.value(n);
  w.end_array();
  if (!r.ports.empty()) {
    w.key("ports").begin_array();
    for (auto p : r.ports) w.value(static_cast<int>(p));
    w.end_array();
  }
  w.end_object();
  return w.take();
}

// The rules of pvs::validate_labels (sandbox_metadata.h), checked here too so that a bad label
// is a 400 before any Proxmox work starts.
std::optional<std::string> label_error(const std::map<std::string, std::string>& labels) {
  if (labels.size() > kMaxLabels) return "at most " + std::to_string(kMaxLabels) + " labels";
  for (const auto& [k, v] : labels) {
    bool ok = !k.empty() && k.size() <= kMaxLabelKey &&
              (std::islower(static_cast<unsigned char>(k[0])) ||
               std::isdigit(static_cast<unsigned char>(k[0])));
    for (char c : k) {
      ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                  c == '/' || c == '-');
    }
    if (!ok)
      return "key \"" + k.substr(0, 64) +
             "\" must be 1-63 of [a-z0-9._/-] starting with a letter or digit";
    if (v.size() > kMaxLabelValue) return "value of " + k + " longer than 128 bytes";
    for (char c : v) {
      if (c < 0x20 || c > 0x7e) return "value of " + k + " must be printable ASCII";
    }
  }
  return std::nullopt;
}

std::optional<std::string> client_label_error(const std::map<std::string, std::string>& labels) {
  if (auto e = label_error(labels)) return e;
  if (auto ok = validate_client_labels(labels); !ok) return ok.error().message;
  return std::nullopt;
}

bool is_sandbox_id(std::string_view id) {
  if (id.size() != 15 || id.substr(0, 3) != "sb-") return false;
  for (char c : id.substr(3)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool is_hostname(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

bool is_node_name(std::string_view s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-')) return false;
  }
  return true;
}

bool is_snapshot_name(std::string_view s) {
  if (s.size() < 2 || s.size() > 40) return false;
  if (!std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  }
  return s != "current";
}

bool is_env_name(std::string_view s) {
  if (s.empty() || s.size() > 128) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

ApiResult<std::string> validate_path(std::string_view path) {
  if (path.empty()) return tl::unexpected(bad_request("path: required"));
  if (path.size() > kMaxPathBytes) return tl::unexpected(bad_request("path: too long"));
  if (path[0] != '/') return tl::unexpected(bad_request("path: must be absolute"));
  if (path.find('\0') != std::string_view::npos) {
    return tl::unexpected(bad_request("path: must not contain NUL"));
  }
  // One spelling per file: the policy's path rules judge exactly what is written.
  for (std::string_view bad : {"//", "/./", "/../"}) {
    if (path.find(bad) != std::string_view::npos)
      return tl::unexpected(
          bad_request("path: must be canonical (no //, /./ or /../): " + std::string(bad)));
  }
  if (path.ends_with("/.") || path.ends_with("/.."))
    return tl::unexpected(bad_request("path: must be canonical (no trailing /. or /..)"));
  return std::string(path);
}

ApiResult<std::uint32_t> parse_mode(std::string_view text) {
  if (text.empty() || text.size() > 5) return tl::unexpected(bad_request("mode: octal, e.g. 0644"));
  std::uint32_t mode = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return tl::unexpected(bad_request("mode: octal, e.g. 0644"));
    mode = mode * 8 + static_cast<std::uint32_t>(c - '0');
  }
  if (mode > 07777) return tl::unexpected(bad_request("mode: at most 07777"));
  return mode;
}

ApiResult<std::size_t> parse_list_limit(std::string_view text) {
  if (text.empty()) return kDefaultListLimit;
  std::size_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > kMaxListLimit)
    return tl::unexpected(
        bad_request("limit: an integer in [1, " + std::to_string(kMaxListLimit) + "]"));
  return n;
}

ApiResult<std::map<std::string, std::string>> parse_selector(
    const std::vector<std::string>& params) {
  std::map<std::string, std::string> selector;
  for (const auto& p : params) {
    auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0) {
      return tl::unexpected(bad_request("label: expected key=value"));
    }
    selector[p.substr(0, eq)] = p.substr(eq + 1);
  }
  if (auto e = label_error(selector)) return tl::unexpected(bad_request("label: " + *e));
  return selector;
}

ApiResult<CreateRequest> parse_create(std::string_view text, const ServiceConfig& config) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  CreateRequest r;
  if (auto v = body->integer("cpus", 1, config.manager.max_cpus)) r.cpus = static_cast<int>(*v);
  if (auto v = body->integer("memory_mb", 64, config.manager.max_memory_mb)) {
    r.memory_mb = static_cast<int>(*v);
  }
  if (auto v = body->integer("disk_gb", 0, config.manager.max_disk_gb))
    r.disk_gb = static_cast<int>(*v);
  if (body->type_of("internet") == "object") {
    if (auto sub = body->object("internet")) read_allowlist(*sub, *body, "internet.", &r.internet);
  } else if (body->type_of("internet") == "other") {
    body->reject("internet", "must be true, false, {\"allow\": [names]} or {\"list\": name}");
  } else if (auto v = body->boolean("internet")) {
    r.internet.kind = *v ? EgressRequest::Kind::kOn : EgressRequest::Kind::kOff;
  }
  if (auto v = body->integer("ttl_seconds", 0, config.manager.max_ttl.count())) {
    r.ttl_seconds = static_cast<int>(*v);
  }
  if (auto v = body->string("on_expiry", 16)) {
    if (*v != "destroy" && *v != "pause")
      body->reject("on_expiry", "must be \"destroy\" or \"pause\"");
    r.pause_on_expiry = *v == "pause";
  }
  r.auto_resume = body->boolean("auto_resume").value_or(false);
  if (r.auto_resume && !r.pause_on_expiry)
    body->reject("auto_resume", "needs \"on_expiry\": \"pause\"");
  if (auto v = body->string_map("labels", kMaxLabels, kMaxLabelValue)) {
    r.labels = std::move(*v);
    if (auto e = client_label_error(r.labels)) body->reject("labels", *e);
  }
  if (auto v = body->string("hostname", 63)) {
    if (!is_hostname(*v)) {
      body->reject("hostname", "must be a DNS label: 1-63 of [a-z0-9-], no leading or trailing -");
    }
    r.hostname = *v;
  }
  if (auto v = body->string("profile", 32)) {
    if (!valid_pool_profile_name(*v)) body->reject("profile", "must be 1-32 of [a-z0-9-]");
    r.profile = *v;
  }
  if (auto v = body->string("template", 32)) {
    if (!valid_template_name(*v))
      body->reject("template", "must be 1-32 of [a-z0-9-], a letter first");
    r.template_name = *v;
  }
  if (auto v = body->string("node", 63)) {
    if (!is_node_name(*v)) body->reject("node", "must be a node name: 1-63 of [A-Za-z0-9-]");
    r.node = *v;
  }
  if (auto v = body->string_map("node_selector", kMaxLabels, kMaxLabelValue)) {
    r.node_selector = std::move(*v);
    if (auto e = label_error(r.node_selector)) body->reject("node_selector", *e);
  }
  for (auto& v : body->object_list("volumes", 64).value_or(std::vector<JsonBody>{})) {
    VolumeMount& m = r.volumes.emplace_back();
    m.volume = v.string("volume", 63).value_or("");
    m.path = v.string("path", 200).value_or("");
    m.read_only = v.boolean("read_only").value_or(false);
    if (auto err = v.finish()) {
      body->reject("volumes", err->message);
      break;
    }
    if (m.volume.empty() || m.path.empty()) {
      body->reject("volumes", "each needs \"volume\" (a name or id) and \"path\"");
      break;
    }
  }
  return finish(*body, std::move(r));
}

ApiResult<ExecRequest> parse_exec(std::string_view text, const ServiceConfig& config) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  ExecRequest r;
  if (auto v = body->string("command", kMaxCommandBytes)) {
    r.command = *v;
    if (r.command.empty()) body->reject("command", "must not be empty");
    if (r.command.find('\0') != std::string::npos) body->reject("command", "contains NUL");
  } else {
    body->reject("command", "required");
  }
  if (auto v = body->string("cwd", kMaxPathBytes)) {
    if (!v->empty() && (*v)[0] != '/') body->reject("cwd", "must be an absolute path");
    r.cwd = *v;
  }
  if (auto v = body->string_map("env", kMaxEnvEntries, kMaxEnvValueBytes)) {
    for (auto& [k, value] : *v) {
      if (!is_env_name(k)) body->reject("env." + k.substr(0, 64), "not a variable name");
      if (value.find('\0') != std::string::npos) body->reject("env." + k, "contains NUL");
      r.env.emplace_back(k, value);
    }
  }
  if (auto v = body->string("stdin", config.max_body_bytes)) r.stdin_data = std::move(*v);
  if (auto v = body->integer("timeout_seconds", 1, config.max_exec_timeout_seconds)) {
    r.timeout_seconds = static_cast<int>(*v);
  }
  return finish(*body, std::move(r));
}

ApiResult<EgressRequest> parse_internet(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  EgressRequest r;
  if (body->has("enabled")) {
    auto v = body->boolean("enabled");
    r.kind = v.value_or(false) ? EgressRequest::Kind::kOn : EgressRequest::Kind::kOff;
    return finish(*body, r);
  }
  if (!body->has("allow") && !body->has("list")) {
    body->reject("enabled", "required (true or false), or allow (a list of names) or list");
    return finish(*body, r);
  }
  read_allowlist(*body, *body, "", &r);  // the body itself is the allowlist
  return finish(*body, r);
}

ApiResult<int> parse_ttl(std::string_view text, const ServiceConfig& config) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  auto v = body->integer("ttl_seconds", 1, config.manager.max_ttl.count());
  if (!v && !body->finish()) body->reject("ttl_seconds", "required");
  return finish(*body, static_cast<int>(v.value_or(0)));
}

ApiResult<UsageWindow> parse_usage_window(std::string_view since, std::string_view until) {
  UsageWindow w;
  auto read = [](std::string_view text, std::int64_t* out) {
    if (text.empty()) return true;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return ec == std::errc() && end == text.data() + text.size() && *out >= 0;
  };
  if (!read(since, &w.since))
    return tl::unexpected(bad_request("since: unix seconds (a non-negative integer)"));
  if (!read(until, &w.until))
    return tl::unexpected(bad_request("until: unix seconds (a non-negative integer)"));
  if (w.since > w.until) return tl::unexpected(bad_request("since: after until"));
  return w;
}

ApiResult<PauseMode> parse_pause(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  PauseMode mode = PauseMode::kFilesystem;
  if (auto v = body->string("mode", 16)) {
    if (*v == "memory")
      mode = PauseMode::kMemory;
    else if (*v != "filesystem")
      body->reject("mode", "\"filesystem\" or \"memory\"");
  }
  return finish(*body, mode);
}

ApiResult<int> parse_resume(std::string_view text, const ServiceConfig& config) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  auto v = body->integer("ttl_seconds", 1, config.manager.max_ttl.count());
  return finish(*body, static_cast<int>(v.value_or(0)));
}

ApiResult<std::string> parse_capture(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  std::string name;
  if (auto v = body->string("name", 32)) {
    if (!valid_template_name(*v)) body->reject("name", "1-32 of [a-z0-9-], a letter first");
    name = *v;
  }
  return finish(*body, std::move(name));
}

ApiResult<ForkRequest> parse_fork(std::string_view text, const ServiceConfig& config) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  ForkRequest r;
  r.count = static_cast<int>(body->integer("count", 1, config.manager.max_fork).value_or(1));
  r.ttl_seconds =
      static_cast<int>(body->integer("ttl_seconds", 1, config.manager.max_ttl.count()).value_or(0));
  return finish(*body, r);
}

ApiResult<SnapshotRequest> parse_snapshot(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  SnapshotRequest r;
  if (auto v = body->string("name", 40)) {
    if (!is_snapshot_name(*v)) {
      body->reject("name", "a letter, then 1-39 letters, digits, '_' or '-' (not \"current\")");
    }
    r.name = *v;
  } else {
    body->reject("name", "required");
  }
  if (auto v = body->string("description", kMaxSnapshotDescription)) r.description = *v;
  return finish(*body, std::move(r));
}

ApiResult<EditRequest> parse_edit(std::string_view text, const ServiceConfig& config) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  EditRequest r;
  if (auto v = body->string("path", kMaxPathBytes)) {
    auto path = validate_path(*v);
    if (!path) body->reject("path", path.error().message.substr(6));  // "path: " dropped
    r.path = *v;
  } else {
    body->reject("path", "required");
  }
  if (auto v = body->string("old_string", config.max_body_bytes)) {
    if (v->empty()) body->reject("old_string", "must not be empty");
    r.spec.old_string = std::move(*v);
  } else {
    body->reject("old_string", "required");
  }
  if (auto v = body->string("new_string", config.max_body_bytes)) {
    r.spec.new_string = std::move(*v);
  } else {
    body->reject("new_string", "required (may be empty)");
  }
  if (auto v = body->boolean("replace_all")) r.spec.replace_all = *v;
  return finish(*body, std::move(r));
}

}  // namespace pvs::service
