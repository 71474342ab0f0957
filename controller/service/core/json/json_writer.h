// A small JSON writer with a stable field order (the API's replies, the audit log's records).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace pvs::service {

// Appends JSON text: `JsonWriter w; w.begin_object().key("a").value(1).end_object();`
// Commas are inserted automatically.
class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view text);
  JsonWriter& value(const char* text) { return value(std::string_view(text)); }
  JsonWriter& value(const std::string& text) { return value(std::string_view(text)); }
  JsonWriter& value(bool b);
  JsonWriter& value(std::int64_t n);
  JsonWriter& value(std::uint64_t n);
  JsonWriter& value(int n) { return value(static_cast<std::int64_t>(n)); }
  JsonWriter& value(double d);
  JsonWriter& null();
  // Inserts already-serialised JSON as a value.
  JsonWriter& raw(std::string_view json);
  // A map of strings as an object.
  JsonWriter& value(const std::map<std::string, std::string>& map);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void separate();
  std::string out_;
  bool need_comma_ = false;
};

// JSON string escaping (control characters as \u00XX; UTF-8 passed through; invalid UTF-8
// bytes replaced by U+FFFD so the output is always valid JSON).
void append_json_string(std::string& out, std::string_view text);

}  // namespace pvs::service
