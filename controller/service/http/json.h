// JSON for the API: the writer (core/json/json_writer.h), and a strict reader for request
// bodies (exact types, ranges, unknown fields rejected), on top of Poco::JSON's parser.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <Poco/JSON/Object.h>

#include "core/json/json_writer.h"
#include "http/api_error.h"

namespace pvs::service {

// A request body: a JSON object whose fields are read once each with exact types. Every error
// is an ApiError 400 naming the field.
class JsonBody {
 public:
  // Parses `text` (which must be one JSON object). Empty text counts as "{}".
  static ApiResult<JsonBody> parse(std::string_view text);

  bool has(const std::string& field) const;
  std::optional<std::string> string(const std::string& field, std::size_t max_len);
  std::optional<bool> boolean(const std::string& field);
  std::optional<std::int64_t> integer(const std::string& field, std::int64_t min, std::int64_t max);
  // An object of string values.
  std::optional<std::map<std::string, std::string>> string_map(const std::string& field,
                                                               std::size_t max_entries,
                                                               std::size_t max_value_len);
  // A list of strings (each at most max_len bytes) / of integers in [min, max].
  std::optional<std::vector<std::string>> string_list(const std::string& field,
                                                      std::size_t max_entries, std::size_t max_len);
  std::optional<std::vector<std::int64_t>> integer_list(const std::string& field,
                                                        std::size_t max_entries, std::int64_t min,
                                                        std::int64_t max);
  // A nested object as a body of its own (its errors are its own: finish() it and prefix them).
  std::optional<JsonBody> object(const std::string& field);
  // A list of objects, each a body of its own (as object()).
  std::optional<std::vector<JsonBody>> object_list(const std::string& field,
                                                   std::size_t max_entries);
  // The field's JSON type, without reading it: "boolean", "object", "other" or "" (absent/null).
  std::string type_of(const std::string& field) const;
  // The first error met by a getter (getters after it return nullopt), or the first field
  // that no getter asked for.
  std::optional<ApiError> finish() const;
  // For tests: record an error now.
  void reject(const std::string& field, const std::string& reason);

 private:
  Poco::JSON::Object::Ptr object_;
  std::set<std::string> used_;
  std::optional<ApiError> error_;
};

// `value`, unless `body` met an error (finish()): what a request parser returns.
template <typename T>
ApiResult<T> finish(const JsonBody& body, T value) {
  if (auto err = body.finish()) return tl::unexpected(*err);
  return value;
}

}  // namespace pvs::service
