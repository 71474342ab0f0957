#include "config.h"

#include <netinet/in.h>  // glibc's in.h before the kernel's (linux/netfilter.h includes it)

#include <linux/netfilter.h>

#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include "pvesandbox/common/log.h"
#include "pvesandbox/common/yaml_reader.h"

namespace pvs::agent {
namespace {

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

void nft_name(yaml::Map& m, std::string_view key, std::string* out) {
  m.string(key, out);
  if (m.ok() && !valid_name(*out))
    m.fail(key, "invalid nftables name " + yaml::quoted_value(*out) +
                    ": letters, digits, '_', '-', '.', starting with a letter");
}

template <typename Id>
void id_list(yaml::Map& m, std::string_view key, std::vector<Id>* out) {
  bool given = m.has(key);  // absent: the default stays
  std::vector<long long> ids;
  m.integer_list(key, &ids, 0, 0xfffffffe);
  if (given && m.ok()) out->assign(ids.begin(), ids.end());
}

void socket_and_access(yaml::Map& m, AgentConfig& c) {
  m.string("socket", &c.socket);
  if (m.ok() && (c.socket.empty() || c.socket[0] != '/'))
    m.fail("socket", "must be an absolute path");
  if (m.ok() && c.socket.size() > 107)
    m.fail("socket", "longer than a unix socket path can be (107 bytes)");
  m.string("socket_group", &c.socket_group);
  id_list(m, "allowed_uids", &c.allowed_uids);
  id_list(m, "allowed_gids", &c.allowed_gids);
  id_list(m, "resolver_uids", &c.resolver_uids);
  if (m.ok() && c.allowed_uids.empty() && c.allowed_gids.empty())
    m.fail("allowed_uids", "allowed_uids and allowed_gids both empty: nobody could use the agent");
}

void network(yaml::Map& m, AgentConfig& c) {
  std::string cidr, gateway;
  m.string("sandbox_cidr", &cidr, yaml::Need::kRequired);
  if (!m.ok()) return;
  auto parsed = Cidr::parse(cidr);
  if (!parsed) return m.fail("sandbox_cidr", parsed.error().message);
  if (parsed->prefix() > 30)
    return m.fail("sandbox_cidr", "prefix /" + std::to_string(parsed->prefix()) +
                                      " leaves no room for a gateway and sandboxes");
  c.sandbox_cidr = *parsed;
  c.gateway = c.sandbox_cidr.at(1);
  m.string("gateway", &gateway);
  if (!m.ok() || gateway.empty()) return;
  auto gw = Ipv4Address::parse(gateway);
  if (!gw) return m.fail("gateway", gw.error().message);
  if (!c.sandbox_cidr.is_host(*gw))
    return m.fail("gateway", gw->to_string() + " is not a host address of sandbox_cidr " +
                                 c.sandbox_cidr.to_string());
  c.gateway = *gw;
}

void nftables(yaml::Map& m, AgentConfig& c) {
  m.one_of("family", &c.family, {"inet", "ip"});
  nft_name(m, "table", &c.table);
  nft_name(m, "set", &c.set);
  nft_name(m, "l2_table", &c.l2_table);
  nft_name(m, "port_mac_set", &c.port_mac_set);
  nft_name(m, "port_ip4_set", &c.port_ip4_set);
  nft_name(m, "egress_listed_set", &c.egress_listed_set);
  nft_name(m, "egress_pairs_set", &c.egress_pairs_set);
  std::string destroy = "auto";
  m.one_of("destroy", &destroy, {"auto", "native", "emulate"});
  c.destroy = destroy == "native"    ? DestroyMode::kNative
              : destroy == "emulate" ? DestroyMode::kEmulate
                                     : DestroyMode::kAuto;
}

void files(yaml::Map& m, AgentConfig& c) {
  m.string("state_file", &c.state_file);
  if (m.ok() && (c.state_file.empty() || c.state_file[0] != '/' || c.state_file.back() == '/'))
    m.fail("state_file", "must be an absolute path to a file");
  m.boolean("state_fsync", &c.state_fsync);
  std::string dir;
  m.string("dhcp_hosts_dir", &dir);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (!m.ok() || dir.empty()) return;
  if (dir[0] != '/') return m.fail("dhcp_hosts_dir", "must be an absolute path");
  // A top-level directory (/etc, /run, /tmp, ...) is never a directory of its own.
  if (dir.rfind('/') == 0 || dir.find('\n') != std::string::npos ||
      dir.find("/../") != std::string::npos || dir.ends_with("/.."))
    return m.fail("dhcp_hosts_dir", "not a usable directory: " + yaml::quoted_value(dir));
  if (dir.size() > 4000) return m.fail("dhcp_hosts_dir", "path too long");
  c.dhcp_hosts_dir = dir;
  // The agent deletes every file of dhcp_hosts_dir it did not write: never its own files' home.
  auto parent = [](const std::string& path) { return path.substr(0, path.rfind('/')); };
  if (dir == parent(c.state_file) || dir == parent(c.socket))
    m.fail("dhcp_hosts_dir",
           "must be a directory of its own: the agent deletes every file in it that is not a "
           "reservation, and it holds the state file or socket");
}

void limits(yaml::Map& m, AgentConfig& c) {
  m.integer("max_elements", &c.max_elements, 1, 1'000'000);
  m.integer("max_bindings", &c.max_bindings, 1, 100'000);
  m.integer("max_clients", &c.max_clients, 1, 10'000);
  m.integer("max_pairs", &c.max_pairs, 1, 1'000'000);
  m.integer("max_pairs_per_source", &c.max_pairs_per_source, 1, 1'000'000);
  m.integer("pair_ttl_floor_seconds", &c.pair_ttl_floor_seconds, 1, 86'400);
  m.integer("pair_ttl_cap_seconds", &c.pair_ttl_cap_seconds, 1, 604'800);
  if (m.ok() && c.pair_ttl_cap_seconds < c.pair_ttl_floor_seconds)
    m.fail("pair_ttl_cap_seconds", "smaller than pair_ttl_floor_seconds");
  m.integer("max_pending_bytes", &c.max_pending_bytes, 65536, 1ll << 30);
  m.integer("idle_timeout_seconds", &c.idle_timeout_seconds, 1, 86'400);
  m.integer("drift_check_ms", &c.drift_check_ms, 10, 3'600'000);
  m.one_of("log_level", &c.log_level, {"debug", "info", "warn", "error"});
}

}  // namespace

std::uint8_t AgentConfig::family_number() const {
  if (family == "ip") return NFPROTO_IPV4;
  return NFPROTO_INET;
}

Result<AgentConfig> parse_config(std::string_view text, std::string_view source) {
  auto doc = yaml::Document::parse(text, source);
  if (!doc) return fail(doc.error());
  AgentConfig config;
  yaml::Map top = doc->root();
  socket_and_access(top, config);
  network(top, config);
  nftables(top, config);
  files(top, config);
  limits(top, config);
  if (auto st = top.finish(); !st) return fail(st.error());
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
