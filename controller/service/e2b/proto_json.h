// A reader for protobuf's JSON mapping on top of Poco::JSON (see envd_wire.h for the rules),
// with the first error kept and named by the field's path ("process.args[2]: ...").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <Poco/JSON/Object.h>

#include "e2b/connect_codec.h"

namespace pvs::service::e2b {

class ProtoReader {
 public:
  // Parses one JSON object (at most kMaxDepth deep); on failure ok() is false.
  explicit ProtoReader(std::string_view json);

  bool ok() const { return !error_; }
  const std::optional<ConnectError>& error() const { return error_; }
  void fail(const std::string& field, const std::string& reason);

  using Object = Poco::JSON::Object::Ptr;
  Object root() const { return root_; }

  // Each getter looks up `name` (lowerCamelCase) and then `proto_name` (when different); an
  // absent or null field is nullopt. `where` prefixes the field in errors ("process.").
  std::optional<Object> object(const Object& in, const std::string& where, const char* name,
                               const char* proto_name = nullptr);
  std::optional<std::string> string(const Object& in, const std::string& where, const char* name,
                                    std::size_t max_len, const char* proto_name = nullptr);
  std::optional<bool> boolean(const Object& in, const std::string& where, const char* name,
                              const char* proto_name = nullptr);
  std::optional<std::uint32_t> uint32(const Object& in, const std::string& where, const char* name,
                                      const char* proto_name = nullptr);
  // A bytes field, decoded; at most max_len decoded bytes.
  std::optional<std::string> bytes(const Object& in, const std::string& where, const char* name,
                                   std::size_t max_len);
  std::optional<std::vector<std::string>> strings(const Object& in, const std::string& where,
                                                  const char* name, std::size_t max_entries,
                                                  std::size_t max_len);
  std::optional<std::map<std::string, std::string>> string_map(const Object& in,
                                                               const std::string& where,
                                                               const char* name,
                                                               std::size_t max_entries,
                                                               std::size_t max_len);
  // An enum by name (names[i] is the value of numbers[i]) or by number (any of `numbers`).
  std::optional<int> enumeration(const Object& in, const std::string& where, const char* name,
                                 const std::vector<std::pair<std::string, int>>& values);

  static constexpr int kMaxDepth = 16;

 private:
  std::optional<Poco::Dynamic::Var> lookup(const Object& in, const char* name,
                                           const char* proto_name) const;
  Object root_;
  std::optional<ConnectError> error_;
};

}  // namespace pvs::service::e2b
