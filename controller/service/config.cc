#include "config.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "pvesandbox/common/ipv4.h"

extern char** environ;

namespace pvs::service {
namespace {

// A failure while walking the document: the key path and the reason.
struct ConfigError {
  std::string key;
  std::string reason;
};

// Walks one YAML mapping, remembering which keys were read so that unknown keys are reported.
class Section {
 public:
  Section(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {
    if (present(node_) && !node_.IsMap()) {
      throw ConfigError{path_.empty() ? "(top level)" : path_, "must be a mapping"};
    }
  }

  std::string key(const std::string& name) const {
    return path_.empty() ? name : path_ + "." + name;
  }

  // The value of `name`, or an undefined node when absent or null ("key:" = the default).
  YAML::Node get(const std::string& name) {
    seen_.insert(name);
    if (!present(node_) || !node_.IsMap()) return undefined();
    const YAML::Node& map = node_;
    YAML::Node child = map[name];
    if (!present(child)) return undefined();
    return child;
  }

  static bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }
  static YAML::Node undefined() {
    const YAML::Node empty(YAML::NodeType::Map);
    return empty["absent"];
  }

  Section section(const std::string& name) { return Section(get(name), key(name)); }

  void string(const std::string& name, std::string* out, bool required = false) {
    YAML::Node n = get(name);
    if (!n) {
      if (required) throw ConfigError{key(name), "is required"};
      return;
    }
    if (!n.IsScalar()) throw ConfigError{key(name), "must be a string"};
    *out = n.Scalar();
    if (required && out->empty()) throw ConfigError{key(name), "must not be empty"};
  }

  void boolean(const std::string& name, bool* out) {
    YAML::Node n = get(name);
    if (!n) return;
    const std::string& s = n.IsScalar() ? n.Scalar() : std::string();
    if (s == "true" || s == "yes" || s == "on") {
      *out = true;
    } else if (s == "false" || s == "no" || s == "off") {
      *out = false;
    } else {
      throw ConfigError{key(name), "must be true or false"};
    }
  }

  template <typename Int>
  void integer(const std::string& name, Int* out, long long min, long long max,
               bool required = false) {
    YAML::Node n = get(name);
    if (!n) {
      if (required) throw ConfigError{key(name), "is required"};
      return;
    }
    std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
    if (!n.IsScalar()) throw ConfigError{key(name), "must be an integer in " + range};
    const std::string& s = n.Scalar();
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || v < min || v > max) {
      throw ConfigError{key(name), "must be an integer in " + range + ", not " + quoted(s)};
    }
    *out = static_cast<Int>(v);
  }

  void string_list(const std::string& name, std::vector<std::string>* out) {
    YAML::Node n = get(name);
    if (!n) return;
    if (!n.IsSequence()) throw ConfigError{key(name), "must be a list of strings"};
    out->clear();
    for (std::size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar()) throw ConfigError{key(name), "must be a list of strings"};
      out->push_back(n[i].Scalar());
    }
  }

  void one_of(const std::string& name, std::string* out, const std::set<std::string>& allowed) {
    string(name, out);
    if (!allowed.count(*out)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw ConfigError{key(name), "must be one of " + list + ", not " + quoted(*out)};
    }
  }

  // Reports the first key that was never read.
  void finish() const {
    if (!present(node_) || !node_.IsMap()) return;
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      std::string name = it->first.IsScalar() ? it->first.Scalar() : "?";
      if (!seen_.count(name)) throw ConfigError{key(name), "unknown key"};
    }
  }

  static std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s.substr(0, 80)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    return out + "\"";
  }

 private:
  YAML::Node node_;
  std::string path_;
  std::set<std::string> seen_;
};

std::map<std::string, std::string> process_env() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

// A secret from `<prefix>_file` or `<prefix>_env` (at most one of them).
void secret(Section& s, const std::string& prefix, const std::map<std::string, std::string>& env,
            std::string* out, std::string* source, bool required) {
  std::string file, var;
  s.string(prefix + "_file", &file);
  s.string(prefix + "_env", &var);
  if (!file.empty() && !var.empty()) {
    throw ConfigError{s.key(prefix + "_file"),
                      "set either " + prefix + "_file or " + prefix + "_env, not both"};
  }
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) throw ConfigError{s.key(prefix + "_file"), "cannot read " + file};
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) throw ConfigError{s.key(prefix + "_file"), file + " is empty"};
    *out = line;
    if (source) *source = "file " + file;
  } else if (!var.empty()) {
    auto it = env.find(var);
    if (it == env.end() || it->second.empty()) {
      throw ConfigError{s.key(prefix + "_env"), "environment variable " + var + " is not set"};
    }
    *out = it->second;
    if (source) *source = "env " + var;
  } else if (required) {
    throw ConfigError{s.key(prefix + "_file"), "is required (or " + prefix + "_env)"};
  }
}

bool is_token_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) {
      return false;
    }
  }
  return true;
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

ServiceConfig parse(const YAML::Node& root, const std::map<std::string, std::string>& env) {
  ServiceConfig c;
  Section top(root, "");

  {
    Section s = top.section("listen");
    s.string("address", &c.listen_address);
    if (!Ipv4Address::parse(c.listen_address)) {
      throw ConfigError{s.key("address"),
                        "must be an IPv4 address, not " + Section::quoted(c.listen_address)};
    }
    s.integer("port", &c.listen_port, 0, 65535);  // 0: any free port (tests)
    Section tls = s.section("tls");
    tls.string("cert_file", &c.tls_cert_file);
    tls.string("key_file", &c.tls_key_file);
    if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
      throw ConfigError{tls.key("cert_file"), "cert_file and key_file go together"};
    }
    for (const auto* f : {&c.tls_cert_file, &c.tls_key_file}) {
      if (!f->empty() && !std::ifstream(*f)) {
        throw ConfigError{tls.key(f == &c.tls_cert_file ? "cert_file" : "key_file"),
                          "cannot read " + *f};
      }
    }
    tls.finish();
    s.finish();
  }
  {
    Section s = top.section("http");
    s.integer("threads", &c.http_threads, 2, 1024);
    s.integer("max_queued", &c.http_max_queued, 1, 65536);
    s.integer("keepalive_timeout_seconds", &c.http_keepalive_timeout_seconds, 1, 300);
    s.integer("request_timeout_seconds", &c.http_request_timeout_seconds, 1, 3600);
    s.integer("max_keepalive_requests", &c.http_max_keepalive_requests, 0, 1000000);
    s.integer("max_body_bytes", &c.max_body_bytes, 1024, 64ll << 20);
    s.integer("max_upload_bytes", &c.max_upload_bytes, 1, 64ll << 30);
    s.integer("max_download_bytes", &c.max_download_bytes, 1, 64ll << 30);
    s.integer("max_exec_timeout_seconds", &c.max_exec_timeout_seconds, 1, 7 * 24 * 3600);
    s.integer("max_exec_output_bytes", &c.max_exec_output_bytes, 1024, 1ll << 30);
    s.finish();
  }
  {
    Section s = top.section("auth");
    s.integer("default_max_sandboxes", &c.default_max_sandboxes, 1, 100000);
    s.integer("max_requests_per_token", &c.max_requests_per_token, 0, 100000);
    s.integer("max_streams_per_token", &c.max_streams_per_token, 0, 100000);
    YAML::Node tokens = s.get("tokens");
    if (tokens) {
      if (!tokens.IsSequence()) throw ConfigError{s.key("tokens"), "must be a list"};
      std::set<std::string> names, hashes;
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        Section t(tokens[i], s.key("tokens") + "[" + std::to_string(i) + "]");
        TokenConfig token;
        t.string("name", &token.name, true);
        if (!is_token_name(token.name)) {
          throw ConfigError{t.key("name"), "must be 1-64 of [A-Za-z0-9._-]"};
        }
        t.string("sha256", &token.sha256, true);
        if (!is_hex64(token.sha256)) {
          throw ConfigError{t.key("sha256"),
                            "must be 64 lower-case hex digits (pve-sandbox-controller "
                            "--hash-token prints them)"};
        }
        t.integer("max_sandboxes", &token.max_sandboxes, 0, 100000);
        t.boolean("admin", &token.admin);
        t.finish();
        if (!names.insert(token.name).second) {
          throw ConfigError{t.key("name"), "duplicate token name " + token.name};
        }
        if (!hashes.insert(token.sha256).second) {
          throw ConfigError{t.key("sha256"), "the same token is listed twice"};
        }
        c.tokens.push_back(std::move(token));
      }
    }
    if (c.tokens.empty()) {
      throw ConfigError{s.key("tokens"), "at least one API token is required"};
    }
    s.finish();
  }
  {
    Section s = top.section("audit");
    s.string("file", &c.audit_file);
    if (c.audit_file.empty() || c.audit_file[0] != '/') {
      throw ConfigError{s.key("file"), "must be an absolute path"};
    }
    s.boolean("fsync", &c.audit_fsync);
    s.integer("denied_interval_seconds", &c.audit_denied_interval_seconds, 1, 86400);
    s.finish();
  }
  top.one_of("log_level", &c.log_level, {"debug", "info", "warn", "error"});
  {
    Section s = top.section("proxmox");
    s.string("url", &c.proxmox_url, true);
    if (c.proxmox_url.rfind("https://", 0) != 0 && c.proxmox_url.rfind("http://", 0) != 0) {
      throw ConfigError{s.key("url"), "must start with https:// (e.g. https://pve1:8006)"};
    }
    s.string("node", &c.proxmox_node, true);
    s.string("token_id", &c.proxmox_token_id, true);
    if (c.proxmox_token_id.find('!') == std::string::npos ||
        c.proxmox_token_id.find('@') == std::string::npos) {
      throw ConfigError{s.key("token_id"), "must look like user@realm!tokenname"};
    }
    secret(s, "token_secret", env, &c.proxmox_token_secret, &c.proxmox_token_secret_source, true);
    s.string("ca_file", &c.proxmox_ca_file);
    s.string("fingerprint", &c.proxmox_fingerprint);
    s.boolean("insecure_skip_verify", &c.proxmox_insecure_skip_verify);
    int trust = !c.proxmox_ca_file.empty() + !c.proxmox_fingerprint.empty() +
                c.proxmox_insecure_skip_verify;
    if (trust > 1) {
      throw ConfigError{s.key("fingerprint"),
                        "set at most one of ca_file, fingerprint, insecure_skip_verify"};
    }
    s.integer("timeout_seconds", &c.proxmox_timeout_seconds, 1, 3600);
    s.integer("template_vmid", &c.template_vmid, 100, 999999999, true);
    s.string("pool", &c.pool);
    if (c.pool.empty()) throw ConfigError{s.key("pool"), "must not be empty"};
    s.string("storage", &c.storage);
    s.boolean("full_clone", &c.full_clone);
    s.integer("warm_pool", &c.warm_pool, 0, 1024);
    s.integer("vmid_min", &c.vmid_min, 100, 999999999);
    s.integer("vmid_max", &c.vmid_max, 100, 999999999);
    if (c.vmid_min > c.vmid_max) {
      throw ConfigError{s.key("vmid_max"), "must be at least vmid_min"};
    }
    if (static_cast<std::uint32_t>(c.template_vmid) >= c.vmid_min &&
        static_cast<std::uint32_t>(c.template_vmid) <= c.vmid_max) {
      throw ConfigError{s.key("template_vmid"), "must lie outside [vmid_min, vmid_max]"};
    }
    s.finish();
  }
  {
    Section s = top.section("network");
    s.string("cidr", &c.network_cidr);
    auto cidr = Cidr::parse(c.network_cidr);
    if (!cidr) throw ConfigError{s.key("cidr"), cidr.error().message};
    s.string("gateway", &c.network_gateway);
    auto gw = Ipv4Address::parse(c.network_gateway);
    if (!gw) throw ConfigError{s.key("gateway"), gw.error().message};
    if (!cidr->contains(*gw)) {
      throw ConfigError{s.key("gateway"), "must lie inside network.cidr " + c.network_cidr};
    }
    s.string("bridge", &c.network_bridge);
    if (c.network_bridge.empty() || c.network_bridge.size() > 15) {
      throw ConfigError{s.key("bridge"), "must be an interface name of 1-15 characters"};
    }
    s.string_list("reserved", &c.network_reserved);
    for (const auto& r : c.network_reserved) {
      auto rc = Cidr::parse(r);
      if (!rc) throw ConfigError{s.key("reserved"), Section::quoted(r) + ": " + rc.error().message};
    }
    s.boolean("dhcp", &c.network_dhcp);
    s.boolean("firewall", &c.network_firewall);
    s.finish();
  }
  {
    Section s = top.section("ssh");
    s.string("user", &c.ssh_user);
    if (c.ssh_user.empty()) throw ConfigError{s.key("user"), "must not be empty"};
    s.integer("port", &c.ssh_port, 1, 65535);
    s.string("private_key_file", &c.ssh_private_key_file);
    if (c.ssh_private_key_file.empty()) {
      throw ConfigError{s.key("private_key_file"), "must not be empty"};
    }
    secret(s, "passphrase", env, &c.ssh_passphrase, nullptr, false);
    s.one_of("host_key_policy", &c.ssh_host_key_policy,
             {"pinned", "known_hosts", "tofu", "insecure"});
    s.string("host_key_fingerprint", &c.ssh_host_key_fingerprint);
    s.string("known_hosts_file", &c.ssh_known_hosts_file);
    if (c.ssh_host_key_policy == "pinned" && c.ssh_host_key_fingerprint.rfind("SHA256:", 0) != 0) {
      throw ConfigError{s.key("host_key_fingerprint"),
                        "host_key_policy pinned needs a \"SHA256:...\" fingerprint (the "
                        "template's host key, ssh-keygen -lf)"};
    }
    if (c.ssh_host_key_policy == "known_hosts" && c.ssh_known_hosts_file.empty()) {
      throw ConfigError{s.key("known_hosts_file"), "host_key_policy known_hosts needs it"};
    }
    s.integer("connect_timeout_seconds", &c.ssh_connect_timeout_seconds, 1, 600);
    s.integer("ready_timeout_seconds", &c.ssh_ready_timeout_seconds, 1, 3600);
    s.boolean("wait_for_ready", &c.ssh_wait_for_ready);
    s.finish();
  }
  {
    Section s = top.section("agent");
    s.string("socket", &c.agent_socket);
    if (c.agent_socket.empty()) throw ConfigError{s.key("socket"), "must not be empty"};
    s.integer("timeout_seconds", &c.agent_timeout_seconds, 1, 600);
    s.integer("internet_lease_seconds", &c.internet_lease_seconds, 10, 7 * 24 * 3600);
    s.finish();
  }
  {
    Section s = top.section("limits");
    s.integer("max_sandboxes", &c.max_sandboxes, 1, 100000);
    s.integer("default_ttl_seconds", &c.default_ttl_seconds, 60, 365 * 24 * 3600);
    s.integer("max_ttl_seconds", &c.max_ttl_seconds, 60, 365 * 24 * 3600);
    if (c.default_ttl_seconds > c.max_ttl_seconds) {
      throw ConfigError{s.key("default_ttl_seconds"), "must not exceed max_ttl_seconds"};
    }
    s.integer("max_cpus", &c.max_cpus, 1, 1024);
    s.integer("max_memory_mb", &c.max_memory_mb, 64, 4 << 20);
    s.integer("max_disk_gb", &c.max_disk_gb, 1, 65536);
    s.integer("reconcile_interval_seconds", &c.reconcile_interval_seconds, 1, 3600);
    s.finish();
  }
  top.finish();
  return c;
}

}  // namespace

Result<ServiceConfig> parse_config(const std::string& yaml_text, const std::string& source,
                                   const std::map<std::string, std::string>* env) {
  std::map<std::string, std::string> own_env;
  if (!env) {
    own_env = process_env();
    env = &own_env;
  }
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (!root || root.IsNull()) {
      return fail(ErrorCode::kInvalidArgument, source + ": the file is empty");
    }
    ServiceConfig c = parse(root, *env);
    c.source = source;
    return c;
  } catch (const ConfigError& e) {
    return fail(ErrorCode::kInvalidArgument, source + ": " + e.key + ": " + e.reason);
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument,
                source + ":" + std::to_string(e.mark.line + 1) + ": YAML: " + e.msg);
  }
}

Result<ServiceConfig> load_config(const std::string& path,
                                  const std::map<std::string, std::string>* env) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return fail(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                path + ": cannot read the configuration file");
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_config(buffer.str(), path, env);
}

std::string describe(const ServiceConfig& c) {
  std::ostringstream o;
  o << "config " << c.source << "\n"
    << "  listen " << (c.tls_cert_file.empty() ? "http://" : "https://") << c.listen_address << ":"
    << c.listen_port << " threads=" << c.http_threads << "\n"
    << "  tokens";
  for (const auto& t : c.tokens) o << " " << t.name;
  o << "\n"
    << "  audit " << c.audit_file << "\n"
    << "  proxmox " << c.proxmox_url << " node=" << c.proxmox_node
    << " token=" << c.proxmox_token_id << " secret from " << c.proxmox_token_secret_source
    << " template=" << c.template_vmid << " pool=" << c.pool << " vmids=" << c.vmid_min << "-"
    << c.vmid_max << (c.warm_pool > 0 ? " warm_pool=" + std::to_string(c.warm_pool) : "") << "\n"
    << "  network " << c.network_cidr << " gateway=" << c.network_gateway
    << " bridge=" << c.network_bridge << (c.network_dhcp ? " dhcp" : "") << "\n"
    << "  ssh user=" << c.ssh_user << " key=" << c.ssh_private_key_file
    << " host_key_policy=" << c.ssh_host_key_policy << "\n"
    << "  agent " << c.agent_socket << " lease=" << c.internet_lease_seconds << "s\n"
    << "  limits max_sandboxes=" << c.max_sandboxes << " ttl=" << c.default_ttl_seconds << "s/"
    << c.max_ttl_seconds << "s cpus<=" << c.max_cpus << " memory<=" << c.max_memory_mb
    << "MB disk<=" << c.max_disk_gb << "GB\n";
  return o.str();
}

}  // namespace pvs::service
