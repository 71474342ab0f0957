#include "http/terminal_requests.h"

#include <charconv>

#include <Poco/JSON/Parser.h>

#include "http/json.h"
#include "http/requests.h"

namespace pvs::service {

ApiResult<TerminalCreateRequest> parse_terminal_create(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  TerminalCreateRequest r;
  if (auto v = body->string("command", kMaxCommandBytes)) r.command = *v;
  if (auto v = body->integer("cols", 1, 1000)) r.cols = static_cast<int>(*v);
  if (auto v = body->integer("rows", 1, 1000)) r.rows = static_cast<int>(*v);
  if (auto v = body->string("cwd", kMaxPathBytes)) {
    if (!v->empty()) {
      auto p = validate_path(*v);
      if (!p) return tl::unexpected(bad_request("cwd: " + p.error().message.substr(6)));
    }
    r.cwd = *v;
  }
  if (auto env = body->string_map("env", kMaxEnvEntries, kMaxEnvValueBytes)) {
    for (auto& [k, v] : *env) {
      if (!is_env_name(k)) body->reject("env", "invalid variable name \"" + k.substr(0, 64) + "\"");
      if (v.find('\0') != std::string::npos) body->reject("env", k + " contains NUL");
      r.env.emplace_back(k, v);
    }
  }
  if (r.command.find('\0') != std::string::npos) body->reject("command", "contains NUL");
  return finish(*body, std::move(r));
}

ApiResult<std::pair<int, int>> parse_terminal_resize(std::string_view text) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  auto cols = body->integer("cols", 1, 1000);
  auto rows = body->integer("rows", 1, 1000);
  if (!cols || !rows) body->reject(!cols ? "cols" : "rows", "required");
  return finish(*body, std::make_pair(static_cast<int>(cols.value_or(0)),
                                      static_cast<int>(rows.value_or(0))));
}

// The items are read with Poco's parser directly: JsonBody reads objects of scalars.
ApiResult<std::vector<InputItem>> parse_terminal_input(std::string_view text,
                                                       std::uint64_t max_input_bytes) {
  if (text.size() > max_input_bytes * 8 + 4096) {
    return tl::unexpected(too_large("input larger than " + std::to_string(max_input_bytes) +
                                    " bytes (terminals.max_input_bytes)"));
  }
  Poco::JSON::Array::Ptr items;
  try {
    Poco::JSON::Parser parser;
    parser.setAllowNullByte(false);
    auto root = parser.parse(std::string(text));
    auto obj = root.extract<Poco::JSON::Object::Ptr>();
    for (const auto& [k, v] : *obj) {
      if (k != "input") return tl::unexpected(bad_request(k.substr(0, 64) + ": unknown field"));
    }
    if (!obj->has("input") || obj->isNull("input") || !obj->isArray("input")) {
      return tl::unexpected(bad_request("input: required, a list of {\"text\"} or {\"key\"}"));
    }
    items = obj->getArray("input");
  } catch (const Poco::Exception& e) {
    return tl::unexpected(
        bad_request("body: not a JSON object: " + e.displayText().substr(0, 200)));
  } catch (const std::exception&) {
    return tl::unexpected(bad_request("body: not a JSON object"));
  }
  if (items->size() > kMaxInputItems) {
    return tl::unexpected(
        bad_request("input: at most " + std::to_string(kMaxInputItems) + " items"));
  }
  std::vector<InputItem> out;
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < items->size(); ++i) {
    const std::string where = "input[" + std::to_string(i) + "]";
    Poco::JSON::Object::Ptr item = items->getObject(static_cast<unsigned>(i));
    if (!item || item->size() != 1 || !(item->has("text") || item->has("key"))) {
      return tl::unexpected(
          bad_request(where + ": must be {\"text\": \"...\"} or {\"key\": \"...\"}"));
    }
    const bool is_text = item->has("text");
    const std::string field = is_text ? "text" : "key";
    auto value = item->get(field);
    if (!value.isString())
      return tl::unexpected(bad_request(where + "." + field + ": must be a string"));
    std::string s = value.convert<std::string>();
    if (is_text) {
      bytes += s.size();
      out.push_back(InputItem::text(std::move(s)));
    } else {
      auto encoded = encode_key(s);
      if (!encoded) return tl::unexpected(bad_request(where + ".key: " + encoded.error().message));
      bytes += encoded->size();
      out.push_back(InputItem::key(std::move(s)));
    }
    if (bytes > max_input_bytes) {
      return tl::unexpected(too_large("input larger than " + std::to_string(max_input_bytes) +
                                      " bytes (terminals.max_input_bytes)"));
    }
  }
  return out;
}

ApiResult<TerminalWaitRequest> parse_terminal_wait(std::string_view text, int max_wait_seconds) {
  auto body = JsonBody::parse(text);
  if (!body) return tl::unexpected(body.error());
  TerminalWaitRequest r;
  if (auto v = body->string("pattern", kMaxWaitPattern)) r.pattern = *v;
  if (auto v = body->integer("quiet_ms", 0, 3600000)) r.quiet_ms = static_cast<int>(*v);
  if (auto v = body->integer("timeout_ms", 0, 3600000)) r.timeout_ms = static_cast<int>(*v);
  if (auto v = body->integer("scrollback", 0, 100000)) r.scrollback = static_cast<int>(*v);
  if (auto err = body->finish()) return tl::unexpected(*err);
  r.timeout_ms = std::min(r.timeout_ms, max_wait_seconds * 1000);
  if (!r.pattern.empty()) {
    try {
      r.regex.emplace(r.pattern, std::regex::ECMAScript | std::regex::multiline);
    } catch (const std::regex_error& e) {
      return tl::unexpected(
          bad_request(std::string("pattern: not a valid regular expression: ") + e.what()));
    }
  }
  return r;
}

ApiResult<int> parse_scrollback(std::string_view text) {
  if (text.empty()) return 0;
  int n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || p != text.data() + text.size() || n < 0 || n > 100000) {
    return tl::unexpected(bad_request("scrollback: must be a number of lines in [0, 100000]"));
  }
  return n;
}

}  // namespace pvs::service
