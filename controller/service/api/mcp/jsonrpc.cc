#include "api/mcp/jsonrpc.h"

#include <sstream>

#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Parser.h>
#include <Poco/JSON/Stringifier.h>

#include "http/json.h"

namespace pvs::service::mcp {

namespace {

using Poco::JSON::Object;

Invalid invalid(std::string id, int code, std::string message) {
  return Invalid{std::move(id), code, std::move(message)};
}

}  // namespace

std::string id_json(const Poco::Dynamic::Var& id) {
  if (id.isString()) {
    std::string out;
    append_json_string(out, id.extract<std::string>());
    return out;
  }
  if (id.isInteger() && !id.isBoolean()) {
    return id.isSigned() ? std::to_string(id.convert<std::int64_t>())
                         : std::to_string(id.convert<std::uint64_t>());
  }
  return "";
}

namespace {

Item check(const Poco::Dynamic::Var& v) {
  if (v.type() != typeid(Object::Ptr))
    return invalid("null", kInvalidRequest, "a message must be a JSON object");
  auto o = v.extract<Object::Ptr>();
  if (!o) return invalid("null", kInvalidRequest, "a message must be a JSON object");
  std::string id;
  bool has_id = o->has("id");
  if (has_id) {
    id = id_json(o->get("id"));
    if (id.empty()) return invalid("null", kInvalidRequest, "id must be a string or an integer");
  }
  Poco::Dynamic::Var version = o->get("jsonrpc");
  if (!version.isString() || version.extract<std::string>() != "2.0")
    return invalid(has_id ? id : "null", kInvalidRequest, "jsonrpc must be \"2.0\"");
  Message m;
  m.id = id;
  if (!o->has("method")) {
    if (has_id && (o->has("result") || o->has("error"))) {
      m.kind = Message::Kind::kResponse;
      return m;
    }
    return invalid(has_id ? id : "null", kInvalidRequest, "method is missing");
  }
  Poco::Dynamic::Var method = o->get("method");
  if (!method.isString())
    return invalid(has_id ? id : "null", kInvalidRequest, "method must be a string");
  m.method = method.extract<std::string>();
  m.kind = has_id ? Message::Kind::kRequest : Message::Kind::kNotification;
  if (o->has("params") && !o->isNull("params")) {
    Poco::Dynamic::Var p = o->get("params");
    if (p.type() != typeid(Object::Ptr))
      return invalid(has_id ? id : "null", kInvalidParams, "params must be an object");
    m.params = p.extract<Object::Ptr>();
  }
  if (!m.params) m.params = new Object;
  return m;
}

// Poco's parser refuses a bare scalar ("42"): valid JSON, but not a request.
bool looks_scalar(std::string_view body) {
  auto start = body.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return false;
  char c = body[start];
  std::string_view rest = body.substr(start);
  return c == '"' || c == '-' || (c >= '0' && c <= '9') || rest.rfind("true", 0) == 0 ||
         rest.rfind("false", 0) == 0 || rest.rfind("null", 0) == 0;
}

}  // namespace

Parsed parse_messages(std::string_view body) {
  Parsed out;
  if (looks_scalar(body)) {
    out.fatal = invalid("null", kInvalidRequest, "a message must be a JSON object");
    return out;
  }
  Poco::Dynamic::Var root;
  try {
    Poco::JSON::Parser parser;
    parser.setAllowNullByte(false);
    parser.setDepth(64);
    root = parser.parse(std::string(body));
  } catch (const Poco::Exception& e) {
    out.fatal = invalid("null", kParseError, "parse error: " + e.message().substr(0, 200));
    return out;
  } catch (const std::exception& e) {
    out.fatal = invalid("null", kParseError, std::string("parse error: ") + e.what());
    return out;
  }
  if (root.type() == typeid(Poco::JSON::Array::Ptr)) {
    auto a = root.extract<Poco::JSON::Array::Ptr>();
    out.batch = true;
    if (!a || a->size() == 0) {
      out.fatal = invalid("null", kInvalidRequest, "an empty batch");
      return out;
    }
    if (a->size() > kMaxBatch) {
      out.fatal = invalid("null", kInvalidRequest,
                          "a batch of more than " + std::to_string(kMaxBatch) + " messages");
      return out;
    }
    for (std::size_t i = 0; i < a->size(); ++i)
      out.items.push_back(check(a->get(static_cast<unsigned>(i))));
    return out;
  }
  out.items.push_back(check(root));
  return out;
}

std::string result_json(std::string_view id, std::string_view result) {
  std::string out = "{\"jsonrpc\":\"2.0\",\"id\":";
  out.append(id);
  out += ",\"result\":";
  out.append(result);
  out += '}';
  return out;
}

std::string error_json(std::string_view id, int code, std::string_view message) {
  std::string out = "{\"jsonrpc\":\"2.0\",\"id\":";
  out.append(id);
  out += ",\"error\":{\"code\":" + std::to_string(code) + ",\"message\":";
  append_json_string(out, message);
  out += "}}";
  return out;
}

std::string notification_json(std::string_view method, std::string_view params) {
  std::string out = "{\"jsonrpc\":\"2.0\",\"method\":";
  append_json_string(out, method);
  out += ",\"params\":";
  out.append(params);
  out += '}';
  return out;
}

std::string to_json(const Poco::Dynamic::Var& value) {
  std::ostringstream s;
  Poco::JSON::Stringifier::condense(value, s);
  return s.str();
}

}  // namespace pvs::service::mcp
