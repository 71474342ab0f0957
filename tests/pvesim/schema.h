// Request validation against the real Proxmox API schema (pve-schema.json, generated from
// pve-apidata.json by gen_schema.py), with Proxmox's messages.
#pragma once

#include <Poco/JSON/Object.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvesim {

using ParamMap = std::map<std::string, std::string>;
using ErrorMap = std::map<std::string, std::string>;

struct Endpoint {
  std::string method;
  std::string path;                   // "/nodes/{node}/lxc/{vmid}/clone"
  std::vector<std::string> segments;  // split path
  bool allowtoken = true;
  bool additional = false;
  Poco::JSON::Object::Ptr properties;
};

class Schema {
 public:
  static pvs::Result<Schema> load(const std::string& file);

  // The endpoint for a concrete path; fills the path parameters. nullptr if none.
  const Endpoint* match(const std::string& method, const std::string& path,
                        ParamMap* path_params) const;
  // True if some endpoint has this path with another method.
  bool path_known(const std::string& path) const;

  // Validates form parameters (all strings) the way PVE::JSONSchema does; returns the
  // per-parameter errors (empty if valid).
  ErrorMap validate(const Endpoint& endpoint, const ParamMap& params) const;

  // The schema type ("integer", "boolean", ...) of a config key, for rendering.
  std::string type_of(const Endpoint& endpoint, const std::string& key) const;

  const std::vector<Endpoint>& endpoints() const { return endpoints_; }

 private:
  std::vector<Endpoint> endpoints_;
};

// Checks one value against one property schema (type, pattern, enum, range, format); returns
// "" if valid, else Proxmox's message.
std::string check_value(const Poco::JSON::Object::Ptr& schema, const std::string& value);

// Proxmox's list splitting (PVE::Tools::split_list): on NUL, ',', ';' and whitespace.
std::vector<std::string> split_list(const std::string& text);

// Parses a property string "a=1,b=2" with an optional default key; false on syntax errors.
bool parse_property_string(const std::string& text, const std::string& default_key,
                           std::map<std::string, std::string>* out, std::string* error);

}  // namespace pvesim
