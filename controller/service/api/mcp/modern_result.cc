#include "api/mcp/modern_result.h"

#include "api/mcp/modern.h"
#include "http/json.h"

namespace pvs::service::mcp {

namespace {

// `{"resultType":"<type>","_meta":{"io.modelcontextprotocol/serverInfo":<info>}`, no closing
// brace: the caller appends the rest.
std::string open_result(std::string_view type, std::string_view server_info_json) {
  std::string out = "{\"resultType\":\"";
  out.append(type);
  out += "\",\"_meta\":{\"";
  out.append(kMetaServerInfo);
  out += "\":";
  out.append(server_info_json);
  out += '}';
  return out;
}

void append_cache(std::string& out, const CacheHint& cache) {
  out += ",\"ttlMs\":" + std::to_string(cache.ttl_ms < 0 ? 0 : cache.ttl_ms);
  out += cache.is_public ? ",\"cacheScope\":\"public\"" : ",\"cacheScope\":\"private\"";
}

// The members of the object `result` ("" for {}), with the comma that joins them to what
// precedes.
void append_members(std::string& out, std::string_view result) {
  auto open = result.find('{');
  auto close = result.rfind('}');
  if (open == std::string_view::npos || close == std::string_view::npos || close <= open) return;
  std::string_view inner = result.substr(open + 1, close - open - 1);
  if (inner.find_first_not_of(" \t\r\n") == std::string_view::npos) return;
  out += ',';
  out.append(inner);
}

}  // namespace

std::string server_info_json(const ServerInfo& info) {
  JsonWriter w;
  w.begin_object().key("name").value(info.name).key("version").value(info.version);
  if (!info.title.empty()) w.key("title").value(info.title);
  return w.end_object().take();
}

std::string complete_result(std::string_view result, std::string_view server_info_json) {
  std::string out = open_result("complete", server_info_json);
  append_members(out, result);
  out += '}';
  return out;
}

std::string complete_result(std::string_view result, std::string_view server_info_json,
                            const CacheHint& cache) {
  std::string out = open_result("complete", server_info_json);
  append_cache(out, cache);
  append_members(out, result);
  out += '}';
  return out;
}

std::string input_required_result(std::string_view request_state,
                                  std::string_view server_info_json) {
  std::string out = open_result("input_required", server_info_json);
  out += ",\"requestState\":";
  append_json_string(out, request_state);
  out += '}';
  return out;
}

std::string discover_result(std::string_view capabilities_json, std::string_view instructions,
                            std::string_view server_info_json, const CacheHint& cache) {
  std::string out = open_result("complete", server_info_json);
  append_cache(out, cache);
  out += ",\"supportedVersions\":[";
  bool first = true;
  for (auto v : all_versions()) {
    if (!first) out += ',';
    first = false;
    append_json_string(out, v);
  }
  out += "],\"capabilities\":";
  out.append(capabilities_json);
  if (!instructions.empty()) {
    out += ",\"instructions\":";
    append_json_string(out, instructions);
  }
  out += '}';
  return out;
}

}  // namespace pvs::service::mcp
