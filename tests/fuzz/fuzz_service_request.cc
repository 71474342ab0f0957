// Fuzzes the controller's request parsers (controller/service/http: requests.cc, json.cc,
// router.h): the JSON bodies of every endpoint, the request URI with its query string, and the JSON
// string escaper. Whatever the bytes, a parser returns a value or a 4xx ApiError whose envelope is
// valid JSON, and what it accepts obeys the documented limits.
//
// Input: the first byte picks the parser, the rest is its input.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <Poco/Exception.h>
#include <Poco/JSON/Parser.h>
#include <Poco/URI.h>

#include "core/config/config.h"
#include "fuzz_check.h"
#include "http/api_error.h"
#include "http/json.h"
#include "http/requests.h"
#include "http/router.h"

namespace {

using namespace pvs;
using namespace pvs::service;

using fuzz::require;
using fuzz::valid_json;

template <typename T>
bool check_error(const ApiResult<T>& r) {
  if (r) return true;
  require(r.error().status >= 400 && r.error().status < 500);
  require(!r.error().code.empty());
  require(valid_json(r.error().body()));
  return false;
}

const ServiceConfig& config() {
  static const ServiceConfig c;
  return c;
}

const Router<int>& router() {
  static const Router<int> table = [] {
    Router<int> r;
    int n = 0;
    for (auto [method, pattern] : {
             std::pair{"GET", "/v1/health"},
             {"GET", "/v1/openapi.json"},
             {"GET", "/metrics"},
             {"POST", "/v1/sandboxes"},
             {"GET", "/v1/sandboxes"},
             {"GET", "/v1/sandboxes/{id}"},
             {"DELETE", "/v1/sandboxes/{id}"},
             {"POST", "/v1/sandboxes/{id}/exec"},
             {"GET", "/v1/sandboxes/{id}/files"},
             {"PUT", "/v1/sandboxes/{id}/files"},
             {"PUT", "/v1/sandboxes/{id}/internet"},
             {"POST", "/v1/sandboxes/{id}/ttl"},
             {"POST", "/v1/sandboxes/{id}/snapshots"},
             {"GET", "/v1/sandboxes/{id}/snapshots"},
             {"POST", "/v1/sandboxes/{id}/snapshots/{name}/rollback"},
             {"DELETE", "/v1/sandboxes/{id}/snapshots/{name}"},
         }) {
      r.add(method, pattern, n++);
    }
    return r;
  }();
  return table;
}

void fuzz_uri(const std::string& text) {
  Poco::URI uri;
  std::vector<std::pair<std::string, std::string>> query;
  try {
    uri = Poco::URI(text);
    query = uri.getQueryParameters();
  } catch (const Poco::Exception&) {
    return;  // the server answers 400 "malformed request URI"
  }
  for (const char* method : {"GET", "POST", "PUT", "DELETE", "PATCH"}) {
    auto m = router().match(method, uri.getPath());
    if (!m.handler) continue;
    for (const auto& [name, value] : m.params) {
      require(name == "id" || name == "name");
      require(!value.empty() && value.find('/') == std::string::npos);
    }
  }
  std::vector<std::string> labels;
  for (const auto& [k, v] : query) {
    if (k == "label") labels.push_back(v);
    if (k == "path") {
      auto p = validate_path(v);
      if (check_error(p)) require(!p->empty() && (*p)[0] == '/' && p->size() <= kMaxPathBytes);
    }
    if (k == "mode") {
      auto mode = parse_mode(v);
      if (check_error(mode)) require(*mode <= 07777);
    }
  }
  auto selector = parse_selector(labels);
  if (check_error(selector)) require(!label_error(*selector));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const ServiceConfig& c = config();
  switch (data[0] % 8) {
    case 0: {
      auto r = parse_create(input, c);
      if (!check_error(r)) break;
      require(r->cpus >= 1 && r->cpus <= c.manager.max_cpus);
      require(r->memory_mb >= 64 && r->memory_mb <= c.manager.max_memory_mb);
      require(r->disk_gb >= 0 && r->disk_gb <= c.manager.max_disk_gb);
      require(r->ttl_seconds >= 0 && r->ttl_seconds <= c.manager.max_ttl.count());
      require(!label_error(r->labels));
      require(r->hostname.empty() || is_hostname(r->hostname));
      break;
    }
    case 1: {
      auto r = parse_exec(input, c);
      if (!check_error(r)) break;
      require(!r->command.empty() && r->command.size() <= kMaxCommandBytes);
      require(r->command.find('\0') == std::string::npos);
      require(r->cwd.empty() || r->cwd[0] == '/');
      require(r->env.size() <= kMaxEnvEntries);
      for (const auto& [k, v] : r->env) {
        require(is_env_name(k) && v.find('\0') == std::string::npos);
      }
      require(r->timeout_seconds >= 0 && r->timeout_seconds <= c.max_exec_timeout_seconds);
      break;
    }
    case 2: check_error(parse_internet(input)); break;
    case 3: {
      auto r = parse_ttl(input, c);
      if (check_error(r)) require(*r >= 1 && *r <= c.manager.max_ttl.count());
      break;
    }
    case 4: {
      auto r = parse_snapshot(input);
      if (!check_error(r)) break;
      require(is_snapshot_name(r->name));
      require(r->description.size() <= kMaxSnapshotDescription);
      break;
    }
    case 5: fuzz_uri(input); break;
    case 6: {
      auto nl = input.find('\n');
      auto w = parse_usage_window(std::string_view(input).substr(0, nl),
                                  nl == std::string::npos ? "" : input.substr(nl + 1));
      if (check_error(w)) require(w->since >= 0 && w->since <= w->until);
      break;
    }
    case 7: {
      // Any bytes, escaped, are one valid JSON string.
      std::string out;
      append_json_string(out, input);
      require(valid_json("[" + out + "]"));
      break;
    }
  }
  return 0;
}
