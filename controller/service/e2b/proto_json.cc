#include "e2b/proto_json.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Parser.h>

#include "e2b/base64.h"

namespace pvs::service::e2b {
namespace {

// A decimal string of digits only (protobuf JSON writes 64-bit integers so; some writers
// quote 32-bit ones too).
std::optional<std::uint64_t> decimal(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

ProtoReader::ProtoReader(std::string_view json) {
  std::size_t start = json.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos || json[start] != '{') {
    error_ = ConnectError{ConnectCode::kInvalidArgument, "the message must be a JSON object"};
    return;
  }
  try {
    Poco::JSON::Parser parser;
    parser.setAllowNullByte(false);
    parser.setDepth(kMaxDepth);
    Poco::Dynamic::Var v = parser.parse(std::string(json));
    root_ = v.extract<Object>();
  } catch (const Poco::Exception& e) {
    error_ = ConnectError{ConnectCode::kInvalidArgument, "malformed JSON: " + e.message()};
  } catch (const std::exception& e) {
    error_ =
        ConnectError{ConnectCode::kInvalidArgument, std::string("malformed JSON: ") + e.what()};
  }
  if (!error_ && !root_)
    error_ = ConnectError{ConnectCode::kInvalidArgument, "the message must be a JSON object"};
}

void ProtoReader::fail(const std::string& field, const std::string& reason) {
  if (!error_) error_ = ConnectError{ConnectCode::kInvalidArgument, field + ": " + reason};
}

std::optional<Poco::Dynamic::Var> ProtoReader::lookup(const Object& in, const char* name,
                                                      const char* proto_name) const {
  if (error_ || !in) return std::nullopt;
  for (const char* key : {name, proto_name}) {
    if (key == nullptr || !in->has(key) || in->isNull(key)) continue;
    return in->get(key);
  }
  return std::nullopt;
}

std::optional<ProtoReader::Object> ProtoReader::object(const Object& in, const std::string& where,
                                                       const char* name, const char* proto_name) {
  auto v = lookup(in, name, proto_name);
  if (!v) return std::nullopt;
  if (v->type() != typeid(Object)) {
    fail(where + name, "must be an object");
    return std::nullopt;
  }
  return v->extract<Object>();
}

std::optional<std::string> ProtoReader::string(const Object& in, const std::string& where,
                                               const char* name, std::size_t max_len,
                                               const char* proto_name) {
  auto v = lookup(in, name, proto_name);
  if (!v) return std::nullopt;
  if (!v->isString()) {
    fail(where + name, "must be a string");
    return std::nullopt;
  }
  std::string s = v->extract<std::string>();
  if (s.size() > max_len) {
    fail(where + name, "longer than " + std::to_string(max_len) + " bytes");
    return std::nullopt;
  }
  if (s.find('\0') != std::string::npos) {
    fail(where + name, "must not contain NUL");
    return std::nullopt;
  }
  return s;
}

std::optional<bool> ProtoReader::boolean(const Object& in, const std::string& where,
                                         const char* name, const char* proto_name) {
  auto v = lookup(in, name, proto_name);
  if (!v) return std::nullopt;
  if (!v->isBoolean()) {
    fail(where + name, "must be true or false");
    return std::nullopt;
  }
  return v->extract<bool>();
}

std::optional<std::uint32_t> ProtoReader::uint32(const Object& in, const std::string& where,
                                                 const char* name, const char* proto_name) {
  auto v = lookup(in, name, proto_name);
  if (!v) return std::nullopt;
  std::optional<std::uint64_t> n;
  if (v->isString()) {
    n = decimal(v->extract<std::string>());
  } else if (v->isInteger() && !v->isBoolean()) {
    if (!v->isSigned() || v->convert<std::int64_t>() >= 0) n = v->convert<std::uint64_t>();
  }
  if (!n || *n > UINT32_MAX) {
    fail(where + name, "must be an integer in [0, 4294967295]");
    return std::nullopt;
  }
  return static_cast<std::uint32_t>(*n);
}

std::optional<std::string> ProtoReader::bytes(const Object& in, const std::string& where,
                                              const char* name, std::size_t max_len) {
  auto text = string(in, where, name, max_len / 3 * 4 + 8);
  if (!text) return std::nullopt;
  auto decoded = base64_decode(*text);
  if (!decoded) {
    fail(where + name, "must be base64");
    return std::nullopt;
  }
  if (decoded->size() > max_len) {
    fail(where + name, "more than " + std::to_string(max_len) + " bytes");
    return std::nullopt;
  }
  return decoded;
}

std::optional<std::vector<std::string>> ProtoReader::strings(const Object& in,
                                                             const std::string& where,
                                                             const char* name,
                                                             std::size_t max_entries,
                                                             std::size_t max_len) {
  auto v = lookup(in, name, nullptr);
  if (!v) return std::nullopt;
  if (v->type() != typeid(Poco::JSON::Array::Ptr)) {
    fail(where + name, "must be a list of strings");
    return std::nullopt;
  }
  auto array = v->extract<Poco::JSON::Array::Ptr>();
  if (!array || array->size() > max_entries) {
    fail(where + name, "at most " + std::to_string(max_entries) + " entries");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < array->size(); ++i) {
    Poco::Dynamic::Var item = array->get(static_cast<unsigned>(i));
    std::string field = std::string(name) + "[" + std::to_string(i) + "]";
    if (!item.isString()) {
      fail(where + field, "must be a string");
      return std::nullopt;
    }
    std::string s = item.extract<std::string>();
    if (s.size() > max_len || s.find('\0') != std::string::npos) {
      fail(where + field, "longer than " + std::to_string(max_len) + " bytes or holds NUL");
      return std::nullopt;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<std::map<std::string, std::string>> ProtoReader::string_map(const Object& in,
                                                                          const std::string& where,
                                                                          const char* name,
                                                                          std::size_t max_entries,
                                                                          std::size_t max_len) {
  auto obj = object(in, where, name);
  if (!obj) return std::nullopt;
  if ((*obj)->size() > max_entries) {
    fail(where + name, "at most " + std::to_string(max_entries) + " entries");
    return std::nullopt;
  }
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : **obj) {
    if (!value.isString() || value.extract<std::string>().size() > max_len ||
        value.extract<std::string>().find('\0') != std::string::npos) {
      fail(where + name + "." + key,
           "must be a string of at most " + std::to_string(max_len) + " bytes without NUL");
      return std::nullopt;
    }
    out[key] = value.extract<std::string>();
  }
  return out;
}

std::optional<int> ProtoReader::enumeration(
    const Object& in, const std::string& where, const char* name,
    const std::vector<std::pair<std::string, int>>& values) {
  auto v = lookup(in, name, nullptr);
  if (!v) return std::nullopt;
  if (v->isString()) {
    std::string s = v->extract<std::string>();
    for (const auto& [n, number] : values)
      if (n == s) return number;
  } else if (v->isInteger() && !v->isBoolean()) {
    auto n = v->convert<std::int64_t>();
    for (const auto& [unused, number] : values)
      if (number == n) return number;
  }
  std::string names;
  for (const auto& [n, number] : values) names += (names.empty() ? "" : ", ") + n;
  fail(where + name, "must be one of " + names);
  return std::nullopt;
}

}  // namespace pvs::service::e2b
