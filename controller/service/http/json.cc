#include "http/json.h"

#include <cmath>
#include <cstdio>

#include <Poco/Exception.h>
#include <Poco/JSON/Parser.h>

namespace pvs::service {

// ---- reader -----------------------------------------------------------------------------------

ApiResult<JsonBody> JsonBody::parse(std::string_view text) {
  JsonBody body;
  std::size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) {
    body.object_ = new Poco::JSON::Object;
    return body;
  }
  if (text[start] != '{') return tl::unexpected(bad_request("the body must be a JSON object"));
  try {
    Poco::JSON::Parser parser;
    parser.setAllowNullByte(false);
    parser.setDepth(32);
    Poco::Dynamic::Var v = parser.parse(std::string(text));
    body.object_ = v.extract<Poco::JSON::Object::Ptr>();
  } catch (const Poco::Exception& e) {
    return tl::unexpected(bad_request("malformed JSON: " + e.message()));
  } catch (const std::exception& e) {
    return tl::unexpected(bad_request(std::string("malformed JSON: ") + e.what()));
  }
  if (!body.object_) return tl::unexpected(bad_request("the body must be a JSON object"));
  return body;
}

void JsonBody::reject(const std::string& field, const std::string& reason) {
  if (!error_) error_ = bad_request(field + ": " + reason);
}

bool JsonBody::has(const std::string& field) const {
  return object_ && object_->has(field) && !object_->isNull(field);
}

std::optional<std::string> JsonBody::string(const std::string& field, std::size_t max_len) {
  used_.insert(field);
  if (error_ || !has(field)) return std::nullopt;
  Poco::Dynamic::Var v = object_->get(field);
  if (!v.isString()) {
    reject(field, "must be a string");
    return std::nullopt;
  }
  std::string s = v.extract<std::string>();
  if (s.size() > max_len) {
    reject(field, "longer than " + std::to_string(max_len) + " bytes");
    return std::nullopt;
  }
  return s;
}

std::optional<bool> JsonBody::boolean(const std::string& field) {
  used_.insert(field);
  if (error_ || !has(field)) return std::nullopt;
  Poco::Dynamic::Var v = object_->get(field);
  if (!v.isBoolean()) {
    reject(field, "must be true or false");
    return std::nullopt;
  }
  return v.extract<bool>();
}

std::optional<std::int64_t> JsonBody::integer(const std::string& field, std::int64_t min,
                                              std::int64_t max) {
  used_.insert(field);
  if (error_ || !has(field)) return std::nullopt;
  Poco::Dynamic::Var v = object_->get(field);
  std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!v.isInteger() || v.isBoolean()) {
    reject(field, "must be an integer in " + range);
    return std::nullopt;
  }
  std::int64_t n = 0;
  if (v.isSigned()) {
    n = v.convert<std::int64_t>();
  } else {
    std::uint64_t u = v.convert<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) {
      reject(field, "must be an integer in " + range);
      return std::nullopt;
    }
    n = static_cast<std::int64_t>(u);
  }
  if (n < min || n > max) {
    reject(field, "must be an integer in " + range);
    return std::nullopt;
  }
  return n;
}

std::optional<std::map<std::string, std::string>> JsonBody::string_map(const std::string& field,
                                                                       std::size_t max_entries,
                                                                       std::size_t max_value_len) {
  used_.insert(field);
  if (error_ || !has(field)) return std::nullopt;
  Poco::Dynamic::Var v = object_->get(field);
  if (v.type() != typeid(Poco::JSON::Object::Ptr)) {
    reject(field, "must be an object of strings");
    return std::nullopt;
  }
  auto obj = v.extract<Poco::JSON::Object::Ptr>();
  if (obj->size() > max_entries) {
    reject(field, "more than " + std::to_string(max_entries) + " entries");
    return std::nullopt;
  }
  std::map<std::string, std::string> out;
  for (const auto& [k, value] : *obj) {
    if (!value.isString()) {
      reject(field + "." + k, "must be a string");
      return std::nullopt;
    }
    std::string s = value.extract<std::string>();
    if (s.size() > max_value_len) {
      reject(field + "." + k, "longer than " + std::to_string(max_value_len) + " bytes");
      return std::nullopt;
    }
    out.emplace(k, std::move(s));
  }
  return out;
}

std::optional<std::vector<std::string>> JsonBody::string_list(const std::string& field,
                                                              std::size_t max_entries,
                                                              std::size_t max_len) {
  used_.insert(field);
  if (error_ || !has(field)) return std::nullopt;
  auto array = object_->getArray(field);
  if (!array) {
    reject(field, "must be a list of strings");
    return std::nullopt;
  }
  if (array->size() > max_entries) {
    reject(field, "more than " + std::to_string(max_entries) + " entries");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& v : *array) {
    if (!v.isString() || v.extract<std::string>().size() > max_len) {
      reject(field, "must be a list of strings of at most " + std::to_string(max_len) + " bytes");
      return std::nullopt;
    }
    out.push_back(v.extract<std::string>());
  }
  return out;
}

std::optional<std::vector<std::int64_t>> JsonBody::integer_list(const std::string& field,
                                                                std::size_t max_entries,
                                                                std::int64_t min,
                                                                std::int64_t max) {
  used_.insert(field);
  if (error_ || !has(field)) return std::nullopt;
  auto array = object_->getArray(field);
  std::string what = "must be a list of at most " + std::to_string(max_entries) + " integers in [" +
                     std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!array || array->size() > max_entries) {
    reject(field, what);
    return std::nullopt;
  }
  std::vector<std::int64_t> out;
  for (const auto& v : *array) {
    bool integer = v.isInteger() && !v.isBoolean();
    if (integer && !v.isSigned() && v.convert<std::uint64_t>() > std::uint64_t{1} << 62)
      integer = false;
    if (!integer) {
      reject(field, what);
      return std::nullopt;
    }
    auto n = v.convert<std::int64_t>();
    if (n < min || n > max) {
      reject(field, what);
      return std::nullopt;
    }
    out.push_back(n);
  }
  return out;
}

std::optional<JsonBody> JsonBody::object(const std::string& field) {
  used_.insert(field);
  if (error_ || !has(field)) return std::nullopt;
  auto sub = object_->getObject(field);
  if (!sub) {
    reject(field, "must be an object");
    return std::nullopt;
  }
  JsonBody body;
  body.object_ = sub;
  return body;
}

std::optional<std::vector<JsonBody>> JsonBody::object_list(const std::string& field,
                                                           std::size_t max_entries) {
  used_.insert(field);
  if (error_ || !has(field)) return std::nullopt;
  auto array = object_->getArray(field);
  if (!array || array->size() > max_entries) {
    reject(field, "must be a list of at most " + std::to_string(max_entries) + " objects");
    return std::nullopt;
  }
  std::vector<JsonBody> out;
  for (std::size_t i = 0; i < array->size(); ++i) {
    auto sub = array->getObject(static_cast<unsigned>(i));
    if (!sub) {
      reject(field, "must be a list of objects");
      return std::nullopt;
    }
    JsonBody& body = out.emplace_back();
    body.object_ = sub;
  }
  return out;
}

std::string JsonBody::type_of(const std::string& field) const {
  if (!has(field)) return "";
  Poco::Dynamic::Var v = object_->get(field);
  if (v.isBoolean()) return "boolean";
  if (v.type() == typeid(Poco::JSON::Object::Ptr)) return "object";
  return "other";
}

std::optional<ApiError> JsonBody::finish() const {
  if (error_) return error_;
  if (object_) {
    for (const auto& [k, v] : *object_) {
      if (!used_.count(k)) return bad_request(k + ": unknown field");
    }
  }
  return std::nullopt;
}

}  // namespace pvs::service
