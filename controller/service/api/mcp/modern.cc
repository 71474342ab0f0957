#include "api/mcp/modern.h"

#include <array>

#include "http/json.h"

namespace pvs::service::mcp {

namespace {

using Poco::JSON::Object;

constexpr std::array<std::string_view, 1> kModern = {"2026-07-28"};
constexpr std::array<std::string_view, 4> kAll = {"2026-07-28", "2025-11-25", "2025-06-18",
                                                  "2025-03-26"};
constexpr std::array<std::string_view, 8> kLevels = {"debug", "info",     "notice", "warning",
                                                     "error", "critical", "alert",  "emergency"};

std::string clip(std::string_view text, std::size_t n = 100) {
  return std::string(text.substr(0, n)) + (text.size() > n ? "..." : "");
}

// params._meta as an object, or null when absent or of another type.
Object::Ptr meta_of(const Message& m) {
  if (!m.params || !m.params->has("_meta")) return nullptr;
  Poco::Dynamic::Var v = m.params->get("_meta");
  if (v.type() != typeid(Object::Ptr)) return nullptr;
  return v.extract<Object::Ptr>();
}

bool is_object(const Poco::Dynamic::Var& v) {
  return v.type() == typeid(Object::Ptr) && !v.extract<Object::Ptr>().isNull();
}

std::optional<std::string> string_at(const Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key)) return std::nullopt;
  Poco::Dynamic::Var v = o->get(key);
  if (!v.isString()) return std::nullopt;
  return v.extract<std::string>();
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard Base64 with padding; nullopt for anything else.
std::optional<std::string> base64_decode(std::string_view in) {
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (std::size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      bool last_quad = i + 4 == in.size();
      if (c == '=' && last_quad && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      v[k] = base64_value(c);
      if (v[k] < 0) return std::nullopt;
    }
    std::uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

bool plain_header_char(unsigned char c) {
  return c == '\t' || (c >= 0x20 && c <= 0x7e);
}

}  // namespace

std::span<const std::string_view> modern_versions() {
  return kModern;
}

bool is_modern_version(std::string_view version) {
  for (auto v : kModern)
    if (v == version) return true;
  return false;
}

std::span<const std::string_view> all_versions() {
  return kAll;
}

bool is_log_level(std::string_view level) {
  for (auto l : kLevels)
    if (l == level) return true;
  return false;
}

std::string wire_error_json(std::string_view id, const WireError& e) {
  std::string out = "{\"jsonrpc\":\"2.0\",\"id\":";
  out.append(id.empty() ? "null" : id);
  out += ",\"error\":{\"code\":" + std::to_string(e.code) + ",\"message\":";
  append_json_string(out, e.message);
  if (!e.data.empty()) out += ",\"data\":" + e.data;
  out += "}}";
  return out;
}

WireError unsupported_version(std::string_view requested) {
  JsonWriter w;
  w.begin_object().key("supported").begin_array();
  for (auto v : kAll) w.value(v);
  w.end_array().key("requested").value(requested).end_object();
  std::string list;
  for (auto v : kAll) list += (list.empty() ? "" : ", ") + std::string(v);
  return {400, kUnsupportedProtocolVersion,
          "Unsupported protocol version " + clip(requested, 40) + " (supported: " + list + ")",
          w.take()};
}

WireError header_mismatch(std::string message) {
  return {400, kHeaderMismatch, "Header mismatch: " + std::move(message), ""};
}

WireError missing_capability(std::string_view capabilities_json) {
  return {
      400, kMissingRequiredClientCapability,
      "Missing required client capability: this request needs " + std::string(capabilities_json),
      "{\"requiredCapabilities\":" + std::string(capabilities_json) + "}"};
}

WireError invalid_params(std::string message) {
  return {400, kInvalidParams, std::move(message), ""};
}

WireError method_not_found(std::string_view method) {
  std::string m = "Method not found: " + clip(method);
  if (method == "initialize" || method == "ping" || method == "logging/setLevel")
    m += " (not part of revision 2026-07-28; it exists in the session-based revisions)";
  return {404, kMethodNotFound, m, ""};
}

Era request_era(const Message& m, std::string_view header_version) {
  if (Object::Ptr meta = meta_of(m); meta && meta->has(std::string(kMetaProtocolVersion)))
    return Era::kModern;
  if (m.method == "initialize") return Era::kLegacy;
  return is_modern_version(header_version) ? Era::kModern : Era::kLegacy;
}

bool RequestMeta::has_capability(std::string_view name) const {
  return client_capabilities && client_capabilities->has(std::string(name)) &&
         is_object(client_capabilities->get(std::string(name)));
}

tl::expected<RequestMeta, WireError> parse_request_meta(const Message& m) {
  const std::string where = "params._meta[\"";
  if (!m.params || !m.params->has("_meta"))
    return tl::unexpected(invalid_params("params._meta: required in revision 2026-07-28 (with " +
                                         std::string(kMetaProtocolVersion) + " and " +
                                         std::string(kMetaClientCapabilities) + ")"));
  Object::Ptr meta = meta_of(m);
  if (!meta) return tl::unexpected(invalid_params("params._meta: must be an object"));
  RequestMeta out;
  auto version = string_at(meta, std::string(kMetaProtocolVersion));
  if (!version)
    return tl::unexpected(invalid_params(where + std::string(kMetaProtocolVersion) +
                                         "\"]: required (a string such as \"2026-07-28\")"));
  out.protocol_version = *version;
  const std::string caps_key(kMetaClientCapabilities);
  if (!meta->has(caps_key) || !is_object(meta->get(caps_key)))
    return tl::unexpected(
        invalid_params(where + caps_key + "\"]: required (an object; {} declares none)"));
  out.client_capabilities = meta->get(caps_key).extract<Object::Ptr>();
  const std::string info_key(kMetaClientInfo);
  if (meta->has(info_key)) {
    Poco::Dynamic::Var v = meta->get(info_key);
    Object::Ptr info = is_object(v) ? v.extract<Object::Ptr>() : nullptr;
    auto name = string_at(info, "name");
    auto ver = string_at(info, "version");
    if (!name || !ver)
      return tl::unexpected(
          invalid_params(where + info_key + "\"]: must be an object with name and version"));
    out.client_name = *name;
    out.client_version = *ver;
  }
  const std::string level_key(kMetaLogLevel);
  if (meta->has(level_key)) {
    auto level = string_at(meta, level_key);
    if (!level || !is_log_level(*level))
      return tl::unexpected(
          invalid_params(where + level_key +
                         "\"]: one of debug, info, notice, warning, error, critical, "
                         "alert, emergency"));
    out.log_level = *level;
  }
  if (meta->has("progressToken")) {
    out.progress_token = id_json(meta->get("progressToken"));
    if (out.progress_token.empty())
      return tl::unexpected(
          invalid_params("params._meta.progressToken: must be a string or an integer"));
  }
  return out;
}

std::optional<std::string> mcp_name_source(const Message& m) {
  const char* field = nullptr;
  if (m.method == "tools/call" || m.method == "prompts/get") field = "name";
  if (m.method == "resources/read") field = "uri";
  if (!field) return std::nullopt;
  return string_at(m.params, field);
}

std::optional<std::string> decode_header_value(std::string_view value) {
  for (unsigned char c : value)
    if (!plain_header_char(c)) return std::nullopt;
  constexpr std::string_view kOpen = "=?base64?", kClose = "?=";
  if (value.size() >= kOpen.size() + kClose.size() && value.substr(0, kOpen.size()) == kOpen &&
      value.substr(value.size() - kClose.size()) == kClose)
    return base64_decode(value.substr(kOpen.size(), value.size() - kOpen.size() - kClose.size()));
  return std::string(value);
}

std::string restore_sentinel(std::string_view parsed_value) {
  constexpr std::string_view kMangled = "base64?", kClose = "?=";
  if (parsed_value.size() >= kMangled.size() + kClose.size() &&
      parsed_value.substr(0, kMangled.size()) == kMangled &&
      parsed_value.substr(parsed_value.size() - kClose.size()) == kClose)
    return "=?" + std::string(parsed_value);
  return std::string(parsed_value);
}

tl::expected<RequestMeta, WireError> check_modern_request(const Message& m,
                                                          const RequestHeaders& headers) {
  auto meta = parse_request_meta(m);
  if (!meta) return meta;
  if (headers.protocol_version.empty())
    return tl::unexpected(header_mismatch("the MCP-Protocol-Version header is required"));
  if (headers.protocol_version != meta->protocol_version)
    return tl::unexpected(
        header_mismatch("MCP-Protocol-Version header value '" + clip(headers.protocol_version, 40) +
                        "' does not match body value '" + clip(meta->protocol_version, 40) + "'"));
  if (!headers.method) return tl::unexpected(header_mismatch("the Mcp-Method header is required"));
  if (*headers.method != m.method)
    return tl::unexpected(header_mismatch("Mcp-Method header value '" + clip(*headers.method) +
                                          "' does not match body value '" + clip(m.method) + "'"));
  if (auto source = mcp_name_source(m)) {
    if (!headers.name)
      return tl::unexpected(header_mismatch("the Mcp-Name header is required for " + m.method));
    auto decoded = decode_header_value(*headers.name);
    if (!decoded)
      return tl::unexpected(header_mismatch(
          "Mcp-Name header value has invalid characters (use =?base64?...?= for such values)"));
    if (*decoded != *source)
      return tl::unexpected(header_mismatch("Mcp-Name header value '" + clip(*headers.name) +
                                            "' does not match body value '" + clip(*source) + "'"));
  }
  if (!is_modern_version(meta->protocol_version))
    return tl::unexpected(unsupported_version(meta->protocol_version));
  return meta;
}

}  // namespace pvs::service::mcp
