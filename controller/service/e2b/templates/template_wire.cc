#include "e2b/templates/template_wire.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>

#include "core/observability/audit.h"
#include "e2b/control_wire.h"
#include "http/json.h"

namespace pvs::service::e2b {
namespace {

constexpr std::string_view kDefaultTag = "default";
constexpr std::size_t kMaxArg = 1 << 20;
constexpr const char* kLevels[] = {"debug", "info", "warn", "error"};

bool all_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::optional<std::size_t> unsigned_number(const std::string& text, std::size_t max) {
  if (text.empty() || text.size() > 9 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  auto n = static_cast<std::size_t>(std::stoul(text));
  if (n > max) return std::nullopt;
  return n;
}

// One step of `steps`: {type, args, force, filesHash, forceUpload, resolveSymlinks, gzip}.
ApiResult<BuildStep> read_step(const Poco::Dynamic::Var& v, std::size_t index) {
  const std::string where = "steps[" + std::to_string(index) + "]";
  if (v.type() != typeid(Poco::JSON::Object::Ptr))
    return tl::unexpected(bad_request(where + ": must be an object"));
  auto o = v.extract<Poco::JSON::Object::Ptr>();
  BuildStep s;
  for (const auto& [key, value] : *o) {
    if (key == "type") {
      if (!value.isString()) return tl::unexpected(bad_request(where + ".type: must be a string"));
      s.type = value.toString();
    } else if (key == "args") {
      if (value.isEmpty()) continue;
      if (value.type() != typeid(Poco::JSON::Array::Ptr))
        return tl::unexpected(bad_request(where + ".args: must be a list of strings"));
      auto a = value.extract<Poco::JSON::Array::Ptr>();
      if (a->size() > 512) return tl::unexpected(bad_request(where + ".args: too many"));
      for (std::size_t i = 0; i < a->size(); ++i) {
        auto arg = a->get(static_cast<unsigned>(i));
        if (!arg.isString() || arg.toString().size() > kMaxArg)
          return tl::unexpected(bad_request(where + ".args: must be strings of at most 1 MiB"));
        s.args.push_back(arg.toString());
      }
    } else if (key == "filesHash") {
      if (!value.isString() || !is_files_hash(value.toString()))
        return tl::unexpected(bad_request(where + ".filesHash: must be 64 hex digits"));
      s.files_hash = value.toString();
    } else if (key == "force" || key == "forceUpload" || key == "resolveSymlinks" ||
               key == "gzip") {
      if (!value.isEmpty() && !value.isBoolean())
        return tl::unexpected(bad_request(where + "." + key + ": must be a boolean"));
    } else {
      return tl::unexpected(bad_request(where + "." + key + ": unknown field"));
    }
  }
  if (s.type.empty()) return tl::unexpected(bad_request(where + ".type: is required"));
  return s;
}

void write_lines(JsonWriter& w, const std::vector<LogLine>& lines) {
  w.begin_array();
  for (const auto& l : lines) {
    w.begin_object();
    w.key("timestamp").value(format_rfc3339_ms(l.unix_ms));
    w.key("level").value(kLevels[std::clamp(l.level, 0, 3)]);
    w.key("message").value(l.message);
    w.end_object();
  }
  w.end_array();
}

}  // namespace

ApiResult<BuildRequest> parse_build_request(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  BuildRequest r;
  auto name = body->string("name", 128);
  auto alias = body->string("alias", 128);  // deprecated: the name
  r.name = name.value_or(alias.value_or(""));
  auto tags = body->string_list("tags", 16, 64);
  (void)body->string("teamID", 128);
  (void)body->integer("cpuCount", 1, 1024);  // a template has no size here: sandboxes choose
  (void)body->integer("memoryMB", 1, 1 << 24);
  (void)body->integer("minFreeDiskMb", 0, 1 << 24);
  if (auto err = body->finish()) return tl::unexpected(*err);
  if (r.name.empty()) return tl::unexpected(bad_request("name: is required"));
  if (auto colon = r.name.find(':'); colon != std::string::npos) {
    if (r.name.substr(colon + 1) != kDefaultTag)
      return tl::unexpected(unsupported("the tag in \"" + r.name + "\"",
                                        "a template has one version, named by its name alone"));
    r.name.resize(colon);
  }
  for (const auto& t : tags.value_or(std::vector<std::string>{}))
    if (t != kDefaultTag)
      return tl::unexpected(
          unsupported("tag \"" + t + "\"", "a template has one version, named by its name alone"));
  if (!valid_template_name(r.name))
    return tl::unexpected(bad_request("name \"" + r.name +
                                      "\": a template name is 1-32 of [a-z0-9-], a letter first"));
  if (r.name == kDefaultTemplate)
    return tl::unexpected(bad_request("name \"base\" is the default template's"));
  return r;
}

std::string build_request_reply(const std::string& template_id, const std::string& build_id) {
  JsonWriter w;
  w.begin_object().key("templateID").value(template_id).key("buildID").value(build_id);
  w.key("names").begin_array().value(template_id).end_array();
  w.key("aliases").begin_array().value(template_id).end_array();
  w.key("tags").begin_array().value(kDefaultTag).end_array();
  w.key("public").value(false);
  return w.end_object().take();
}

bool is_files_hash(std::string_view hash) {
  return hash.size() == 64 && all_hex(hash);
}

bool is_build_id(std::string_view id) {
  if (id.size() != 36) return false;
  for (std::size_t i = 0; i < id.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (id[i] == '-')) return false;
    if (!dash && !all_hex(id.substr(i, 1))) return false;
  }
  return true;
}

std::string upload_link_reply(bool present, const std::string& url) {
  JsonWriter w;
  w.begin_object().key("present").value(present);
  if (!present) w.key("url").value(url);
  return w.end_object().take();
}

ApiResult<BuildStart> parse_build_start(std::string_view text) {
  Poco::JSON::Object::Ptr o;
  try {
    auto v = Poco::JSON::Parser().parse(std::string(text));
    if (v.type() != typeid(Poco::JSON::Object::Ptr))
      return tl::unexpected(bad_request("the body must be a JSON object"));
    o = v.extract<Poco::JSON::Object::Ptr>();
  } catch (const Poco::Exception& e) {
    return tl::unexpected(bad_request("the body is not JSON: " + e.message()));
  }
  BuildStart s;
  for (const auto& member : *o) {
    const std::string& key = member.first;  // named, not bound: lambdas below capture them
    const Poco::Dynamic::Var& value = member.second;
    if (value.isEmpty()) continue;
    auto text_of = [&](std::string* out) -> ApiResult<void> {
      if (!value.isString() || value.toString().size() > 512)
        return tl::unexpected(bad_request(key + ": must be a string"));
      *out = value.toString();
      return {};
    };
    ApiResult<void> ok;
    if (key == "fromImage") {
      ok = text_of(&s.from_image);
    } else if (key == "fromTemplate") {
      ok = text_of(&s.from_template);
    } else if (key == "force") {
      if (!value.isBoolean()) ok = tl::unexpected(bad_request("force: must be a boolean"));
    } else if (key == "fromImageRegistry") {
      ok = tl::unexpected(unsupported("fromImageRegistry", "templates are built from a template"));
    } else if (key == "startCmd" || key == "readyCmd") {
      // Checked further as the recipe's start and ready (parse_recipe, through map_build).
      if (!value.isString() || value.toString().size() > kMaxServiceCommand)
        ok = tl::unexpected(bad_request(key + ": must be a string of at most " +
                                        std::to_string(kMaxServiceCommand >> 10) + " KiB"));
      else
        (key == "startCmd" ? s.start_cmd : s.ready_cmd) = value.toString();
    } else if (key == "steps") {
      if (value.type() != typeid(Poco::JSON::Array::Ptr))
        return tl::unexpected(bad_request("steps: must be a list"));
      auto a = value.extract<Poco::JSON::Array::Ptr>();
      if (a->size() > kMaxBuildSteps)
        return tl::unexpected(
            bad_request("steps: at most " + std::to_string(kMaxBuildSteps) + " steps"));
      for (std::size_t i = 0; i < a->size(); ++i) {
        auto step = read_step(a->get(static_cast<unsigned>(i)), i);
        if (!step) return tl::unexpected(step.error());
        s.steps.push_back(std::move(*step));
      }
    } else {
      ok = tl::unexpected(bad_request(key + ": unknown field"));
    }
    if (!ok) return tl::unexpected(ok.error());
  }
  if (s.from_image.empty() == s.from_template.empty())
    return tl::unexpected(bad_request("give exactly one of fromImage and fromTemplate"));
  return s;
}

ApiResult<StatusQuery> parse_status_query(const std::multimap<std::string, std::string>& query) {
  StatusQuery q;
  for (const auto& [key, value] : query) {
    if (key == "logsOffset") {
      auto n = unsigned_number(value, 1 << 24);
      if (!n) return tl::unexpected(bad_request("logsOffset: must be a number >= 0"));
      q.offset = *n;
    } else if (key == "limit") {
      auto n = unsigned_number(value, 100);
      if (!n || *n == 0) return tl::unexpected(bad_request("limit: must be in [1, 100]"));
      q.limit = *n;
    } else if (key == "level") {
      auto it = std::find(std::begin(kLevels), std::end(kLevels), value);
      if (it == std::end(kLevels))
        return tl::unexpected(bad_request("level: must be debug, info, warn or error"));
      q.min_level = static_cast<int>(it - std::begin(kLevels));
    } else {
      return tl::unexpected(bad_request(key + ": unknown query parameter"));
    }
  }
  return q;
}

std::string build_status_reply(const StatusView& v) {
  JsonWriter w;
  w.begin_object().key("templateID").value(v.template_id).key("buildID").value(v.build_id);
  w.key("status").value(v.status);
  w.key("logEntries");
  write_lines(w, v.lines);
  w.key("logs").begin_array().end_array();
  if (v.reason) {
    w.key("reason").begin_object().key("message").value(*v.reason);
    if (!v.reason_step.empty()) w.key("step").value(v.reason_step);
    w.key("logEntries");
    write_lines(w, v.reason_lines);
    w.end_object();
  }
  return w.end_object().take();
}

}  // namespace pvs::service::e2b
