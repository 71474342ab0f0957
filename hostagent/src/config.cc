#include "config.h"

#include <linux/netfilter.h>

#include <charconv>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"

namespace pvs::agent {
namespace {

struct Ctx {
  std::string source;
  Error error(const std::string& key, const YAML::Node& node, const std::string& what) const {
    std::string where = source;
    if (node.Mark().line >= 0) where += ":" + std::to_string(node.Mark().line + 1);
    return Error{ErrorCode::kInvalidArgument, where + ": key '" + key + "': " + what};
  }
};

Result<std::string> scalar(const Ctx& ctx, const std::string& key, const YAML::Node& node) {
  if (!node.IsScalar()) return fail(ctx.error(key, node, "expected a single value"));
  return node.Scalar();
}

Result<std::uint64_t> number(const Ctx& ctx, const std::string& key, const YAML::Node& node,
                             std::uint64_t min, std::uint64_t max) {
  auto text = scalar(ctx, key, node);
  if (!text) return fail(text.error());
  std::uint64_t value = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  bool clean =
      !text->empty() && ptr == end && ec == std::errc() && (text->size() == 1 || (*text)[0] != '0');
  if (!clean || value < min || value > max) {
    return fail(ctx.error(key, node,
                          "expected a whole number " + std::to_string(min) + "-" +
                              std::to_string(max) + ", got " + quoted(*text)));
  }
  return value;
}

Result<bool> boolean(const Ctx& ctx, const std::string& key, const YAML::Node& node) {
  auto text = scalar(ctx, key, node);
  if (!text) return fail(text.error());
  if (*text == "true" || *text == "yes") return true;
  if (*text == "false" || *text == "no") return false;
  return fail(ctx.error(key, node, "expected true or false, got " + quoted(*text)));
}

template <typename T>
Result<std::vector<T>> id_list(const Ctx& ctx, const std::string& key, const YAML::Node& node) {
  if (!node.IsSequence()) {
    return fail(ctx.error(key, node, "expected a list of numeric ids, e.g. [0, 110]"));
  }
  std::vector<T> out;
  for (const auto& item : node) {
    auto value = number(ctx, key, item, 0, 0xfffffffe);
    if (!value) return fail(value.error());
    out.push_back(static_cast<T>(*value));
  }
  return out;
}

// nft identifiers: letters, digits, '_', '-', '.', at most 255 bytes, starting with a letter.
bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 255) return false;
  if (!std::isalpha(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

}  // namespace

std::uint8_t AgentConfig::family_number() const {
  if (family == "ip") return NFPROTO_IPV4;
  return NFPROTO_INET;
}

Result<AgentConfig> parse_config(std::string_view text, std::string_view source) {
  Ctx ctx{std::string(source)};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument,
                ctx.source + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) {
    return fail(ErrorCode::kInvalidArgument, ctx.source + ": expected a mapping of keys");
  }
  AgentConfig config;
  bool have_cidr = false;
  std::optional<Ipv4Address> gateway;
  YAML::Node gateway_node;
  YAML::Node dhcp_node;
  std::set<std::string> seen;

  using Handler = std::function<Status(const std::string&, const YAML::Node&)>;
  auto string_key = [&](std::string* out, bool allow_empty) -> Handler {
    return [&ctx, out, allow_empty](const std::string& key, const YAML::Node& node) -> Status {
      auto value = node.IsNull() && allow_empty ? Result<std::string>(std::string())
                                                : scalar(ctx, key, node);
      if (!value) return fail(value.error());
      if (!allow_empty && value->empty()) return fail(ctx.error(key, node, "must not be empty"));
      *out = *value;
      return {};
    };
  };
  auto name_key = [&](std::string* out) -> Handler {
    return [&ctx, out](const std::string& key, const YAML::Node& node) -> Status {
      auto value = scalar(ctx, key, node);
      if (!value) return fail(value.error());
      if (!valid_name(*value)) {
        return fail(ctx.error(key, node,
                              "invalid nftables name " + quoted(*value) +
                                  ": letters, digits, '_', '-', '.', starting with a letter"));
      }
      *out = *value;
      return {};
    };
  };
  auto number_key = [&](auto* out, std::uint64_t min, std::uint64_t max) -> Handler {
    return [&ctx, out, min, max](const std::string& key, const YAML::Node& node) -> Status {
      auto value = number(ctx, key, node, min, max);
      if (!value) return fail(value.error());
      *out = static_cast<std::remove_reference_t<decltype(*out)>>(*value);
      return {};
    };
  };

  std::map<std::string, Handler> handlers = {
      {"socket",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto value = scalar(ctx, key, node);
         if (!value) return fail(value.error());
         if (value->empty() || (*value)[0] != '/') {
           return fail(ctx.error(key, node, "must be an absolute path"));
         }
         if (value->size() > 107) {
           return fail(ctx.error(key, node, "longer than a unix socket path can be (107 bytes)"));
         }
         config.socket = *value;
         return {};
       }},
      {"socket_group", string_key(&config.socket_group, true)},
      {"allowed_uids",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto ids = id_list<uid_t>(ctx, key, node);
         if (!ids) return fail(ids.error());
         config.allowed_uids = *ids;
         return {};
       }},
      {"allowed_gids",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto ids = id_list<gid_t>(ctx, key, node);
         if (!ids) return fail(ids.error());
         config.allowed_gids = *ids;
         return {};
       }},
      {"sandbox_cidr",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto value = scalar(ctx, key, node);
         if (!value) return fail(value.error());
         auto cidr = Cidr::parse(*value);
         if (!cidr) return fail(ctx.error(key, node, cidr.error().message));
         if (cidr->prefix() > 30) {
           return fail(ctx.error(key, node,
                                 "prefix /" + std::to_string(cidr->prefix()) +
                                     " leaves no room for a gateway and sandboxes"));
         }
         config.sandbox_cidr = *cidr;
         have_cidr = true;
         return {};
       }},
      {"gateway",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto value = scalar(ctx, key, node);
         if (!value) return fail(value.error());
         auto address = Ipv4Address::parse(*value);
         if (!address) return fail(ctx.error(key, node, address.error().message));
         gateway = *address;
         gateway_node = node;
         return {};
       }},
      {"family",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto value = scalar(ctx, key, node);
         if (!value) return fail(value.error());
         if (*value != "inet" && *value != "ip") {
           return fail(ctx.error(key, node, "expected inet or ip, got " + quoted(*value)));
         }
         config.family = *value;
         return {};
       }},
      {"table", name_key(&config.table)},
      {"set", name_key(&config.set)},
      {"l2_table", name_key(&config.l2_table)},
      {"port_mac_set", name_key(&config.port_mac_set)},
      {"port_ip4_set", name_key(&config.port_ip4_set)},
      {"state_file",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto value = scalar(ctx, key, node);
         if (!value) return fail(value.error());
         if (value->empty() || (*value)[0] != '/' || value->back() == '/') {
           return fail(ctx.error(key, node, "must be an absolute path to a file"));
         }
         config.state_file = *value;
         return {};
       }},
      {"dhcp_hosts_dir",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         if (node.IsNull()) {
           config.dhcp_hosts_dir.clear();
           return {};
         }
         auto value = scalar(ctx, key, node);
         if (!value) return fail(value.error());
         std::string dir = *value;
         while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
         if (dir.empty()) {
           config.dhcp_hosts_dir.clear();
           return {};
         }
         if (dir[0] != '/') return fail(ctx.error(key, node, "must be an absolute path"));
         // A top-level directory (/etc, /run, /tmp, ...) is never a directory of its own.
         if (dir.rfind('/') == 0 || dir.find('\n') != std::string::npos ||
             dir.find("/../") != std::string::npos || dir.ends_with("/..")) {
           return fail(ctx.error(key, node, "not a usable directory: " + quoted(*value)));
         }
         if (dir.size() > 4000) return fail(ctx.error(key, node, "path too long"));
         config.dhcp_hosts_dir = dir;
         dhcp_node = node;
         return {};
       }},
      {"state_fsync",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto value = boolean(ctx, key, node);
         if (!value) return fail(value.error());
         config.state_fsync = *value;
         return {};
       }},
      {"max_elements", number_key(&config.max_elements, 1, 1'000'000)},
      {"max_bindings", number_key(&config.max_bindings, 1, 100'000)},
      {"max_clients", number_key(&config.max_clients, 1, 10'000)},
      {"max_pending_bytes", number_key(&config.max_pending_bytes, 65536, 1ull << 30)},
      {"idle_timeout_seconds", number_key(&config.idle_timeout_seconds, 1, 86'400)},
      {"drift_check_ms", number_key(&config.drift_check_ms, 10, 3'600'000)},
      {"destroy",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto value = scalar(ctx, key, node);
         if (!value) return fail(value.error());
         if (*value == "auto") {
           config.destroy = DestroyMode::kAuto;
         } else if (*value == "native") {
           config.destroy = DestroyMode::kNative;
         } else if (*value == "emulate") {
           config.destroy = DestroyMode::kEmulate;
         } else {
           return fail(ctx.error(key, node, "expected auto, native or emulate"));
         }
         return {};
       }},
      {"log_level",
       [&](const std::string& key, const YAML::Node& node) -> Status {
         auto value = scalar(ctx, key, node);
         if (!value) return fail(value.error());
         log::Level level;
         if (!log::parse_level(*value, &level)) {
           return fail(ctx.error(key, node, "expected debug, info, warn or error"));
         }
         config.log_level = *value;
         return {};
       }},
  };

  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!it->first.IsScalar()) {
      return fail(ErrorCode::kInvalidArgument, ctx.source + ": keys must be plain names");
    }
    std::string key = it->first.Scalar();
    auto handler = handlers.find(key);
    if (handler == handlers.end()) {
      return fail(ctx.error(key, it->first, "unknown key"));
    }
    if (!seen.insert(key).second) return fail(ctx.error(key, it->first, "given twice"));
    if (auto ok = handler->second(key, it->second); !ok) return fail(ok.error());
  }
  if (!have_cidr) {
    return fail(ErrorCode::kInvalidArgument,
                ctx.source + ": key 'sandbox_cidr': required (e.g. sandbox_cidr: 10.99.0.0/16)");
  }
  if (gateway) {
    if (!config.sandbox_cidr.is_host(*gateway)) {
      return fail(ctx.error("gateway", gateway_node,
                            gateway->to_string() + " is not a host address of sandbox_cidr " +
                                config.sandbox_cidr.to_string()));
    }
    config.gateway = *gateway;
  } else {
    config.gateway = config.sandbox_cidr.at(1);
  }
  // The agent deletes every file of dhcp_hosts_dir it did not write: never its own files' home.
  auto parent = [](const std::string& path) { return path.substr(0, path.rfind('/')); };
  if (!config.dhcp_hosts_dir.empty() && (config.dhcp_hosts_dir == parent(config.state_file) ||
                                         config.dhcp_hosts_dir == parent(config.socket))) {
    return fail(ctx.error("dhcp_hosts_dir", dhcp_node,
                          "must be a directory of its own: the agent deletes every file in it "
                          "that is not a reservation, and it holds the state file or socket"));
  }
  if (config.allowed_uids.empty() && config.allowed_gids.empty()) {
    return fail(ErrorCode::kInvalidArgument,
                ctx.source +
                    ": keys 'allowed_uids'/'allowed_gids': both empty, nobody could "
                    "use the agent");
  }
  return config;
}

Result<AgentConfig> load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(errno_error(path, errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > 1024 * 1024) {
    return fail(ErrorCode::kTooLarge, path + ": larger than 1 MiB");
  }
  return parse_config(text.str(), path);
}

}  // namespace pvs::agent
