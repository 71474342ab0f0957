// PVE::JSONSchema-style validation of form parameters.
#include "schema.h"

#include <arpa/inet.h>

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Parser.h>

#include <cctype>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

namespace pvesim {

namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : path) {
    if (c == '/') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool optional_of(const Object::Ptr& schema) {
  if (!schema->has("optional")) return false;
  auto v = schema->get("optional");
  try {
    return v.convert<int>() != 0;
  } catch (const std::exception&) {
    return false;
  }
}

std::string get_str(const Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key)) return "";
  auto v = o->get(key);
  return v.isString() ? v.extract<std::string>() : v.convert<std::string>();
}

// Perl regexes use (?^:...) for embedded flag groups; ECMAScript knows only (?:...).
std::string to_ecma(std::string pattern) {
  for (std::size_t pos; (pos = pattern.find("(?^:")) != std::string::npos;)
    pattern.replace(pos, 4, "(?:");
  return pattern;
}

bool full_match(const std::string& pattern, const std::string& value, bool icase = false) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<std::regex>> cache;
  std::shared_ptr<std::regex> re;
  {
    std::lock_guard lock(mutex);
    std::string key = (icase ? "i:" : "c:") + pattern;
    auto it = cache.find(key);
    if (it == cache.end()) {
      try {
        auto flags = std::regex::ECMAScript | (icase ? std::regex::icase : std::regex::ECMAScript);
        re = std::make_shared<std::regex>(to_ecma(pattern), flags);
      } catch (const std::regex_error&) {
        re = nullptr;  // a pattern std::regex cannot express: accept
      }
      cache[key] = re;
    } else {
      re = it->second;
    }
  }
  if (!re) return true;
  return std::regex_match(value, *re);
}

bool is_int(const std::string& v) {
  return full_match("[+-]?\\d+", v);
}
bool is_number(const std::string& v) {
  return full_match("[+-]?(\\d+\\.?\\d*|\\.\\d+)([eE][+-]?\\d+)?", v);
}

bool is_ipv4(const std::string& v) {
  in_addr a{};
  return inet_pton(AF_INET, v.c_str(), &a) == 1;
}
bool is_ipv6(const std::string& v) {
  in6_addr a{};
  return inet_pton(AF_INET6, v.c_str(), &a) == 1;
}

bool is_cidr(const std::string& v, bool v6) {
  auto slash = v.find('/');
  if (slash == std::string::npos) return false;
  std::string addr = v.substr(0, slash), prefix = v.substr(slash + 1);
  if (prefix.empty() || prefix.size() > 3 || !full_match("\\d+", prefix)) return false;
  int p = std::stoi(prefix);
  return v6 ? (is_ipv6(addr) && p <= 128) : (is_ipv4(addr) && p <= 32);
}

const char* kNode = "[a-zA-Z0-9]([a-zA-Z0-9\\-]*[a-zA-Z0-9])?";
const char* kDnsName =
    "(([a-zA-Z0-9]([a-zA-Z0-9\\-]*[a-zA-Z0-9])?)\\.)*([a-zA-Z0-9]([a-zA-Z0-9\\-]*[a-zA-Z0-9])?)";
const char* kConfigId = "[a-z][a-z0-9_-]+";
const char* kTag = "[a-z0-9_][a-z0-9_\\-+.]*";
const char* kPoolId = "[A-Za-z0-9.\\-_]+(/[A-Za-z0-9.\\-_]+){0,2}";
const char* kStorageId = "[a-z][a-z0-9\\-_.]*[a-z0-9]";

// "" if the value has the named format, else the detail after "invalid format - ".
std::string check_named_format(const std::string& format, const std::string& v) {
  auto list_of = [&](const std::string& item) -> std::string {
    for (const auto& part : split_list(v)) {
      std::string e = check_named_format(item, part);
      if (!e.empty()) return e;
    }
    return "";
  };
  if (format.size() > 5 && format.substr(format.size() - 5) == "-list" &&
      format != "pve-tag-list" && format != "lxc-ip-with-ll-iface-list")
    return list_of(format.substr(0, format.size() - 5));
  if (format == "pve-vmid") {
    if (!full_match("[1-9][0-9]{2,8}", v)) return "value does not look like a valid VM ID";
    return "";
  }
  if (format == "pve-node") {
    if (!full_match(kNode, v)) return "value does not look like a valid node name";
    return "";
  }
  if (format == "dns-name") {
    if (!full_match(kDnsName, v)) return "value does not look like a valid DNS name";
    return "";
  }
  if (format == "pve-configid") {
    if (!full_match(kConfigId, v, true)) return "invalid configuration ID '" + v + "'";
    return "";
  }
  if (format == "pve-tag-list") {
    for (const auto& tag : split_list(v))
      if (!full_match(kTag, tag, true)) return "invalid tag '" + tag + "'";
    if (split_list(v).empty()) return "empty tag list";
    return "";
  }
  if (format == "pve-poolid") {
    if (!full_match(kPoolId, v)) return "invalid pool ID '" + v + "'";
    return "";
  }
  if (format == "pve-storage-id") {
    if (!full_match(kStorageId, v, true))
      return "storage ID '" + v + "' contains illegal characters";
    return "";
  }
  if (format == "ipv4") return is_ipv4(v) ? "" : "value does not look like a valid IPv4 address";
  if (format == "ipv6") return is_ipv6(v) ? "" : "value does not look like a valid IPv6 address";
  if (format == "pve-ipv4-config") {
    if (v == "dhcp" || v == "manual" || is_cidr(v, false)) return "";
    return "value does not look like a valid IPv4 network configuration";
  }
  if (format == "pve-ipv6-config") {
    if (v == "auto" || v == "dhcp" || v == "manual" || is_cidr(v, true)) return "";
    return "value does not look like a valid IPv6 network configuration";
  }
  if (format == "mac-addr") {
    if (!full_match("[a-f0-9]{2}(:[a-f0-9]{2}){5}", v, true))
      return "value does not look like a valid MAC address";
    int first = std::stoi(v.substr(0, 2), nullptr, 16);
    if (first & 1) return "value does not look like a valid unicast MAC address";
    return "";
  }
  if (format == "disk-size") {
    if (!full_match("(\\d+(\\.\\d+)?)([KMGT])?", v)) return "unable to parse size '" + v + "'";
    return "";
  }
  if (format == "pve-volume-id") {
    if (!full_match("[a-z][a-z0-9\\-_.]*[a-z0-9]:.+", v, true))
      return "unable to parse volume ID '" + v + "'";
    return "";
  }
  if (format == "pve-lxc-mp-string") {
    // A volume ID, "STORAGE:SIZE_IN_GiB", or an absolute path.
    if (v.empty()) return "empty volume";
    static const std::regex dots(R"((/\.\.?/)|(/\.\.?$)|(^\.\./))");
    if (std::regex_search(v, dots)) return v + " contains illegal character sequences";
    if (v[0] == '/' || full_match("[a-z][a-z0-9\\-_.]*[a-z0-9]:.+", v, true)) return "";
    return "invalid mount point volume '" + v + "'";
  }
  if (format == "pve-iface") {
    if (!full_match("[a-zA-Z][a-zA-Z0-9_]{1,20}([:\\.]\\d+)?", v)) return "invalid interface name";
    return "";
  }
  if (format == "pve-startup-order") {
    if (!full_match("(order=\\d+|up=\\d+|down=\\d+)(,(order=\\d+|up=\\d+|down=\\d+))*", v))
      return "value does not look like a valid startup order";
    return "";
  }
  if (format == "pve-task-status-type") {
    if (v == "ok" || v == "error" || v == "unknown" || v == "warning") return "";
    return "invalid status type '" + v + "'";
  }
  // Formats not modelled (firewall specs, timezones, device strings): accepted.
  return "";
}

std::string check_property_string(const Object::Ptr& format, const std::string& value);

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == '\0' || c == ',' || c == ';' || std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool parse_property_string(const std::string& text, const std::string& default_key,
                           std::map<std::string, std::string>* out, std::string* error) {
  std::string part;
  std::stringstream in(text);
  bool first = true;
  while (std::getline(in, part, ',')) {
    if (part.empty()) continue;
    auto eq = part.find('=');
    std::string key, value;
    if (eq == std::string::npos) {
      if (!first || default_key.empty()) {
        *error = "value without key, but schema does not define a default key";
        return false;
      }
      key = default_key;
      value = part;
    } else {
      key = part.substr(0, eq);
      value = part.substr(eq + 1);
    }
    if (out->count(key)) {
      *error = "duplicate key in comma-separated list property: " + key;
      return false;
    }
    (*out)[key] = value;
    first = false;
  }
  return true;
}

std::string check_value(const Object::Ptr& schema, const std::string& value) {
  std::string type = get_str(schema, "type");
  if (type == "boolean") {
    if (value != "1" && value != "0") return "type check ('boolean') failed - got '" + value + "'";
    return "";
  }
  if (type == "integer" || type == "number") {
    if (type == "integer" ? !is_int(value) : !is_number(value))
      return "type check ('" + type + "') failed - got '" + value + "'";
    double d = std::stod(value);
    if (schema->has("minimum")) {
      double min = schema->get("minimum").convert<double>();
      if (d < min) return "value must have a minimum value of " + get_str(schema, "minimum");
    }
    if (schema->has("maximum")) {
      double max = schema->get("maximum").convert<double>();
      if (d > max) return "value must have a maximum value of " + get_str(schema, "maximum");
    }
  }
  if (type == "string" || type.empty()) {
    if (schema->has("maxLength") &&
        value.size() > static_cast<std::size_t>(schema->get("maxLength").convert<int>()))
      return "value may only be " + get_str(schema, "maxLength") + " characters long";
    if (schema->has("minLength") &&
        value.size() < static_cast<std::size_t>(schema->get("minLength").convert<int>()))
      return "value must be at least " + get_str(schema, "minLength") + " characters long";
  }
  if (schema->has("enum")) {
    auto values = schema->getArray("enum");
    bool found = false;
    std::string all;
    for (const auto& e : *values) {
      std::string s = e.convert<std::string>();
      if (s == value) found = true;
      if (!all.empty()) all += ", ";
      all += s;
    }
    if (!found)
      return "value '" + value + "' does not have a value in the enumeration '" + all + "'";
  }
  if (schema->has("pattern") && !full_match(get_str(schema, "pattern"), value))
    return "value does not match the regex pattern";
  if (schema->has("format")) {
    auto format = schema->get("format");
    if (format.isString()) {
      std::string detail = check_named_format(format.extract<std::string>(), value);
      if (!detail.empty()) return "invalid format - " + detail;
    } else if (format.type() == typeid(Object::Ptr)) {
      std::string detail = check_property_string(format.extract<Object::Ptr>(), value);
      if (!detail.empty()) return "invalid format - " + detail;
    }
  }
  return "";
}

namespace {

std::string check_property_string(const Object::Ptr& format, const std::string& value) {
  std::string default_key;
  for (const auto& [key, sub] : *format) {
    auto so = sub.extract<Object::Ptr>();
    if (so->has("default_key") && so->get("default_key").convert<int>() != 0) default_key = key;
  }
  std::map<std::string, std::string> parts;
  std::string error;
  if (!parse_property_string(value, default_key, &parts, &error)) return error;
  for (const auto& [key, v] : parts) {
    if (!format->has(key))
      return key +
             ": property is not defined in schema and the schema does not allow "
             "additional properties";
    auto sub = format->getObject(key);
    if (sub->has("alias")) continue;
    std::string e = check_value(sub, v);
    if (!e.empty()) return key + ": " + e;
  }
  for (const auto& [key, sub] : *format) {
    auto so = sub.extract<Object::Ptr>();
    if (!optional_of(so) && !so->has("alias") && !parts.count(key))
      return key + ": property is missing and it is not optional";
  }
  return "";
}

// "net[n]" matches "net0".."net31" and similar.
const Object::Ptr find_property(const Object::Ptr& properties, const std::string& key) {
  if (properties->has(key)) return properties->getObject(key);
  std::size_t digits = key.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(key[digits - 1]))) --digits;
  if (digits == key.size() || digits == 0) return nullptr;
  std::string base = key.substr(0, digits) + "[n]";
  if (!properties->has(base)) return nullptr;
  if (key.size() - digits > 3) return nullptr;
  int index = std::stoi(key.substr(digits));
  int max = 255;  // mp, unused, dev
  if (key.compare(0, 3, "net") == 0) max = 31;
  if (index > max || (key.size() - digits > 1 && key[digits] == '0')) return nullptr;
  return properties->getObject(base);
}

}  // namespace

pvs::Result<Schema> Schema::load(const std::string& file) {
  std::ifstream in(file);
  if (!in) return pvs::fail(pvs::ErrorCode::kNotFound, "cannot read schema " + file);
  Schema schema;
  try {
    Poco::JSON::Parser parser;
    auto root = parser.parse(in).extract<Object::Ptr>();
    for (const auto& item : *root->getArray("endpoints")) {
      auto o = item.extract<Object::Ptr>();
      Endpoint e;
      e.method = o->getValue<std::string>("method");
      e.path = o->getValue<std::string>("path");
      e.segments = split_path(e.path);
      e.allowtoken = o->get("allowtoken").convert<int>() != 0;
      e.additional = o->get("additionalProperties").convert<int>() != 0;
      e.properties = o->getObject("properties");
      schema.endpoints_.push_back(std::move(e));
    }
  } catch (const std::exception& ex) {
    return pvs::fail(pvs::ErrorCode::kInvalidArgument, "bad schema " + file + ": " + ex.what());
  }
  return schema;
}

const Endpoint* Schema::match(const std::string& method, const std::string& path,
                              ParamMap* path_params) const {
  auto segments = split_path(path);
  for (const auto& e : endpoints_) {
    if (e.method != method || e.segments.size() != segments.size()) continue;
    ParamMap params;
    bool ok = true;
    for (std::size_t i = 0; i < segments.size() && ok; ++i) {
      const std::string& want = e.segments[i];
      if (want.size() > 2 && want.front() == '{' && want.back() == '}')
        params[want.substr(1, want.size() - 2)] = segments[i];
      else
        ok = want == segments[i];
    }
    if (ok) {
      if (path_params) *path_params = std::move(params);
      return &e;
    }
  }
  return nullptr;
}

bool Schema::path_known(const std::string& path) const {
  for (const char* m : {"GET", "POST", "PUT", "DELETE"})
    if (match(m, path, nullptr)) return true;
  return false;
}

ErrorMap Schema::validate(const Endpoint& endpoint, const ParamMap& params) const {
  ErrorMap errors;
  for (const auto& [key, value] : params) {
    auto property = find_property(endpoint.properties, key);
    if (!property) {
      if (!endpoint.additional)
        errors[key] =
            "property is not defined in schema and the schema does not allow additional "
            "properties";
      continue;
    }
    std::string e = check_value(property, value);
    if (!e.empty()) errors[key] = e;
  }
  for (const auto& [key, sub] : *endpoint.properties) {
    if (key.find("[n]") != std::string::npos) continue;
    auto so = sub.extract<Object::Ptr>();
    if (!optional_of(so) && !params.count(key))
      errors[key] = "property is missing and it is not optional";
  }
  return errors;
}

std::string Schema::type_of(const Endpoint& endpoint, const std::string& key) const {
  auto property = find_property(endpoint.properties, key);
  return property ? get_str(property, "type") : "";
}

}  // namespace pvesim
