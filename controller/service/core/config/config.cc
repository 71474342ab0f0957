#include "core/config/config.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "core/config/config_parts.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/yaml_reader.h"

extern char** environ;

namespace pvs::service {
namespace {

using Env = std::map<std::string, std::string>;

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
void secret(yaml::Map& s, const std::string& prefix, const Env& env, std::string* out,
            std::string* source, bool required) {
  std::string file, var;
  s.string(prefix + "_file", &file);
  s.string(prefix + "_env", &var);
  if (!s.ok()) return;
  if (!file.empty() && !var.empty())
    return s.fail(prefix + "_file",
                  "set either " + prefix + "_file or " + prefix + "_env, not both");
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) return s.fail(prefix + "_file", "cannot read " + file);
    std::string head(4096, '\0');  // a secret is one short line; never read a device forever
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(in.gcount()));
    std::string line = head.substr(0, head.find('\n'));
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) return s.fail(prefix + "_file", file + " is empty");
    *out = line;
    if (source) *source = "file " + file;
  } else if (!var.empty()) {
    auto it = env.find(var);
    if (it == env.end() || it->second.empty())
      return s.fail(prefix + "_env", "environment variable " + var + " is not set");
    *out = it->second;
    if (source) *source = "env " + var;
  } else if (required) {
    s.fail(prefix + "_file", "is required (or " + prefix + "_env)");
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

void parse_listen(yaml::Map s, ServiceConfig& c) {
  s.string("address", &c.listen_address);
  if (s.ok() && !Ipv4Address::parse(c.listen_address))
    s.fail("address", "must be an IPv4 address, not " + yaml::quoted_value(c.listen_address));
  s.integer("port", &c.listen_port, 0, 65535);  // 0: any free port (tests)
  yaml::Map tls = s.map("tls");
  tls.string("cert_file", &c.tls_cert_file);
  tls.string("key_file", &c.tls_key_file);
  if (c.tls_cert_file.empty() != c.tls_key_file.empty())
    tls.fail("cert_file", "cert_file and key_file go together");
  if (!c.tls_cert_file.empty() && !std::ifstream(c.tls_cert_file))
    tls.fail("cert_file", "cannot read " + c.tls_cert_file);
  if (!c.tls_key_file.empty() && !std::ifstream(c.tls_key_file))
    tls.fail("key_file", "cannot read " + c.tls_key_file);
  (void)tls.finish();
  (void)s.finish();
}

void parse_http(yaml::Map s, ServiceConfig& c) {
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
  (void)s.finish();
}

void parse_auth(yaml::Map s, ServiceConfig& c) {
  s.integer("default_max_sandboxes", &c.default_max_sandboxes, 1, 100000);
  s.integer("default_max_paused", &c.default_max_paused, 0, 100000);
  s.integer("max_requests_per_token", &c.max_requests_per_token, 0, 100000);
  s.integer("max_streams_per_token", &c.max_streams_per_token, 0, 100000);
  std::set<std::string> names, hashes;
  for (yaml::Map t : s.maps("tokens")) {
    TokenConfig token;
    t.string("name", &token.name, yaml::Need::kRequired);
    if (t.ok() && !is_token_name(token.name)) t.fail("name", "must be 1-64 of [A-Za-z0-9._-]");
    t.string("sha256", &token.sha256, yaml::Need::kRequired);
    if (t.ok() && !is_hex64(token.sha256))
      t.fail("sha256",
             "must be 64 lower-case hex digits (pve-sandbox-controller --hash-token prints them)");
    t.integer("max_sandboxes", &token.max_sandboxes, 0, 100000);
    t.integer("max_paused", &token.max_paused, 0, 100000);
    t.boolean("admin", &token.admin);
    t.boolean("approver", &token.approver);
    t.string("e2b_key_sha256", &token.e2b_key_sha256);
    if (t.ok() && !token.e2b_key_sha256.empty() && !is_hex64(token.e2b_key_sha256))
      t.fail("e2b_key_sha256", "must be 64 lower-case hex digits (the SHA-256 of the e2b_ key)");
    parse_token_egress(t.map("egress"), c, &token.egress);
    (void)t.finish();
    if (t.ok() && !names.insert(token.name).second)
      t.fail("name", "duplicate token name " + token.name);
    if (t.ok() && !hashes.insert(token.sha256).second)
      t.fail("sha256", "the same token is listed twice");
    if (t.ok() && !token.e2b_key_sha256.empty() && !hashes.insert(token.e2b_key_sha256).second)
      t.fail("e2b_key_sha256", "the same key is listed twice (or is a bearer token too)");
    c.tokens.push_back(std::move(token));
  }
  if (s.ok() && c.tokens.empty()) s.fail("tokens", "at least one API token is required");
  (void)s.finish();
}

void parse_audit(yaml::Map s, ServiceConfig& c) {
  s.string("file", &c.audit_file);
  if (s.ok() && (c.audit_file.empty() || c.audit_file[0] != '/'))
    s.fail("file", "must be an absolute path");
  s.boolean("fsync", &c.audit_fsync);
  s.integer("denied_interval_seconds", &c.audit_denied_interval_seconds, 1, 86400);
  s.boolean("log_terminal_input", &c.audit_log_terminal_input);
  (void)s.finish();
}

void parse_terminals(yaml::Map s, ServiceConfig& c) {
  s.integer("max_per_sandbox", &c.terminal_max_per_sandbox, 1, 1000);
  s.integer("max_per_token", &c.terminal_max_per_token, 1, 100000);
  s.integer("idle_timeout_seconds", &c.terminal_idle_timeout_seconds, 1, 7 * 24 * 3600);
  s.integer("max_input_bytes", &c.terminal_max_input_bytes, 1024, 16ll << 20);
  s.integer("watcher_buffer_bytes", &c.terminal_watcher_buffer_bytes, 4096, 1ll << 30);
  s.integer("max_websockets_per_token", &c.terminal_max_websockets_per_token, 1, 100000);
  s.integer("max_websockets", &c.terminal_max_websockets, 1, 100000);
  s.integer("scrollback_lines", &c.terminal_scrollback_lines, 0, 100000);
  s.integer("max_wait_seconds", &c.terminal_max_wait_seconds, 1, 3600);
  (void)s.finish();
}

void parse_ports(yaml::Map s, const Env& env, ServiceConfig& c) {
  s.integer("max_upgrades_per_token", &c.ports_max_upgrades_per_token, 1, 100000);
  s.integer("max_upgrades", &c.ports_max_upgrades, 1, 100000);
  s.integer("preview_max_seconds", &c.ports_preview_max_seconds, 60, 30 * 86400);
  secret(s, "preview_secret", env, &c.ports_preview_secret, nullptr, false);
  if (s.ok() && !c.ports_preview_secret.empty() && c.ports_preview_secret.size() < 32)
    s.fail("preview_secret_file", "the preview secret must be at least 32 bytes");
  std::string transport = c.ports_route ? "route" : "ssh";
  s.string("transport", &transport);
  if (s.ok() && transport != "ssh" && transport != "route")
    s.fail("transport", "must be ssh or route, not " + yaml::quoted_value(transport));
  c.ports_route = transport == "route";
  (void)s.finish();
}

// policy.webhook (docs/policy.md): read beside parse_policy, which owns the rest of `policy`.
void parse_webhook(yaml::Map s, const Env& env, WebhookConfig& w) {
  s.string("url", &w.url, yaml::Need::kRequired);
  if (s.ok() && !w.url.starts_with("http://") && !w.url.starts_with("https://"))
    s.fail("url", "must start with http:// or https://");
  if (s.ok() && w.url.find_first_of(" \t\r\n") != std::string::npos)
    s.fail("url", "must not contain spaces or control characters");
  secret(s, "secret", env, &w.secret, nullptr, true);
  s.string("cacert", &w.cacert);
  if (!w.cacert.empty() && !std::ifstream(w.cacert)) s.fail("cacert", "cannot read " + w.cacert);
  s.integer("timeout_seconds", &w.timeout_seconds, 1, 60);
  s.integer("attempts", &w.attempts, 1, 20);
  (void)s.finish();
}

void parse_mcp(yaml::Map s, McpConfig& m) {
  s.boolean("enabled", &m.enabled);
  s.string_list("allowed_origins", &m.allowed_origins);
  s.integer("max_sessions_per_token", &m.max_sessions_per_token, 1, 100000);
  s.integer("session_idle_seconds", &m.session_idle_seconds, 10, 7 * 24 * 3600);
  s.integer("exec_timeout_seconds", &m.exec_timeout_seconds, 1, 7 * 24 * 3600);
  s.integer("exec_output_bytes", &m.exec_output_bytes, 1024, 16ll << 20);
  (void)s.finish();
}

void parse_proxmox(yaml::Map s, const Env& env, bool cluster, ServiceConfig& c) {
  ManagerConfig& m = c.manager;
  pve::ClientOptions& p = m.proxmox;
  s.string("url", &p.base_url, yaml::Need::kRequired);
  bool insecure_http = false;
  s.boolean("insecure_http", &insecure_http);
  if (s.ok() && p.base_url.rfind("https://", 0) != 0) {
    if (p.base_url.rfind("http://", 0) != 0)
      s.fail("url", "must start with https:// (e.g. https://pve1:8006)");
    else if (!insecure_http)
      s.fail("url",
             "must start with https:// (plain http sends the API token in the clear; "
             "insecure_http: true allows it, for tests only)");
  }
  if (cluster && s.has("node"))
    s.fail("node", "with nodes: every node is named there (nodes[].name), not here");
  s.string("node", &m.node, cluster ? yaml::Need::kOptional : yaml::Need::kRequired);
  s.string("token_id", &p.token_id, yaml::Need::kRequired);
  if (s.ok() &&
      (p.token_id.find('!') == std::string::npos || p.token_id.find('@') == std::string::npos))
    s.fail("token_id", "must look like user@realm!tokenname");
  secret(s, "token_secret", env, &p.token_secret, &c.proxmox_token_secret_source, true);
  s.string("ca_file", &p.ca_file);
  s.string("fingerprint", &p.fingerprint);
  s.boolean("insecure_skip_verify", &p.insecure_skip_verify);
  if (!p.ca_file.empty() + !p.fingerprint.empty() + p.insecure_skip_verify > 1)
    s.fail("fingerprint", "set at most one of ca_file, fingerprint, insecure_skip_verify");
  seconds(s, "timeout_seconds", &p.request_timeout, 1, 3600);
  {
    long long poll_ms = m.task_poll_max.count();
    s.integer("task_poll_max_ms", &poll_ms, 10, 5000);
    m.task_poll_max = std::chrono::milliseconds(poll_ms);
  }
  // In a cluster: the template on shared storage for nodes without one of their own (optional).
  s.integer("template_vmid", &m.template_vmid, 100, 999999999,
            cluster ? yaml::Need::kOptional : yaml::Need::kRequired);
  s.string("pool", &m.pool);
  if (s.ok() && m.pool.empty()) s.fail("pool", "must not be empty");
  s.string("storage", &m.storage);
  s.boolean("full_clone", &m.full_clone);
  s.integer("template_replicas", &m.template_replicas, 1, 16);
  s.integer("warm_pool", &m.warm_pool, 0, 1024);
  s.integer("vmid_min", &m.vmid_min, 100, 999999999);
  s.integer("vmid_max", &m.vmid_max, 100, 999999999);
  if (s.ok() && m.vmid_min > m.vmid_max) s.fail("vmid_max", "must be at least vmid_min");
  if (s.ok() && m.template_vmid != 0 && static_cast<std::uint32_t>(m.template_vmid) >= m.vmid_min &&
      static_cast<std::uint32_t>(m.template_vmid) <= m.vmid_max)
    s.fail("template_vmid", "must lie outside [vmid_min, vmid_max]");
  (void)s.finish();
}

// In a cluster each node has its own network (nodes[].network); only dhcp and firewall stay here.
void parse_network(yaml::Map s, bool cluster, ManagerConfig& m) {
  for (const char* key : {"cidr", "gateway", "bridge", "reserved"}) {
    if (cluster && s.has(key))
      return s.fail(
          key, "with nodes: every node has its own (nodes[].network." + std::string(key) + ")");
  }
  if (!cluster) parse_sandbox_network(s, {&m.sandbox_cidr, &m.gateway, &m.bridge, &m.reserved});
  s.boolean("dhcp", &m.dhcp);
  s.boolean("firewall", &m.firewall);
  (void)s.finish();
}

// "name,name,...": SSH cipher names (lower-case letters, digits, '@', '.', '-'), none empty.
bool cipher_list(std::string_view v) {
  if (v.size() > 512) return false;
  bool name = false;  // inside a name
  for (char ch : v) {
    if (ch == ',') {
      if (!name) return false;
      name = false;
    } else if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '@' || ch == '.' ||
               ch == '-') {
      name = true;
    } else {
      return false;
    }
  }
  return name || v.empty();
}

void parse_ssh(yaml::Map s, const Env& env, ManagerConfig& m) {
  SshConfig& ssh = m.ssh;
  s.string("user", &ssh.user);
  if (s.ok() && ssh.user.empty()) s.fail("user", "must not be empty");
  s.integer("port", &ssh.port, 1, 65535);
  s.string("private_key_file", &ssh.private_key_file);
  if (s.ok() && ssh.private_key_file.empty()) s.fail("private_key_file", "must not be empty");
  secret(s, "passphrase", env, &ssh.passphrase, nullptr, false);
  std::string policy = "pinned";
  s.one_of("host_key_policy", &policy, {"pinned", "known_hosts", "tofu", "insecure"});
  ssh.host_key_policy = policy == "pinned"        ? HostKeyPolicy::kPinned
                        : policy == "known_hosts" ? HostKeyPolicy::kKnownHosts
                        : policy == "tofu"        ? HostKeyPolicy::kTrustOnFirstUse
                                                  : HostKeyPolicy::kInsecure;
  s.string("host_key_fingerprint", &ssh.host_key_fingerprint);
  s.string("known_hosts_file", &ssh.known_hosts_file);
  if (s.ok() && policy == "pinned" && ssh.host_key_fingerprint.rfind("SHA256:", 0) != 0)
    s.fail("host_key_fingerprint",
           "host_key_policy pinned needs a \"SHA256:...\" fingerprint (the template's host key, "
           "ssh-keygen -lf)");
  if (s.ok() && policy == "known_hosts" && ssh.known_hosts_file.empty())
    s.fail("known_hosts_file", "host_key_policy known_hosts needs it");
  seconds(s, "connect_timeout_seconds", &ssh.connect_timeout, 1, 600);
  s.string("prefer_ciphers", &ssh.prefer_ciphers);
  if (s.ok() && !cipher_list(ssh.prefer_ciphers))
    s.fail("prefer_ciphers",
           "must be cipher names separated by commas "
           "(\"aes256-gcm@openssh.com,aes128-gcm@openssh.com\")");
  s.integer("transfer_connections", &ssh.transfer_connections, 1, 16);
  std::size_t chunk_mib = ssh.transfer_chunk >> 20;
  s.integer("transfer_chunk_mib", &chunk_mib, 1, 1024);
  ssh.transfer_chunk = chunk_mib << 20;
  std::uint64_t memory_mib = ssh.transfer_memory >> 20;
  s.integer("transfer_memory_mib", &memory_mib, 0, 65536);
  ssh.transfer_memory = memory_mib << 20;
  s.string("bulk_client", &ssh.bulk_client);
  if (s.ok() && !ssh.bulk_client.empty() && ssh.bulk_client.front() != '/')
    s.fail("bulk_client", "must be an absolute path to OpenSSH's ssh, or \"\" (never)");
  seconds(s, "ready_timeout_seconds", &m.ssh_ready_timeout, 1, 3600);
  s.boolean("wait_for_ready", &m.wait_for_ssh);
  s.boolean("per_sandbox_host_keys", &m.per_sandbox_host_keys);
  if (s.ok() && m.per_sandbox_host_keys && !m.wait_for_ssh)
    s.fail("per_sandbox_host_keys", "needs wait_for_ready: true (or set it to false)");
  (void)s.finish();
}

// In a cluster each node names its agent (nodes[].agent); only the lease stays here.
void parse_agent(yaml::Map s, bool cluster, ManagerConfig& m) {
  for (const char* key : {"socket", "command", "timeout_seconds"}) {
    if (cluster && s.has(key))
      return s.fail(key, "with nodes: every node names its own agent (nodes[].agent." +
                             std::string(key) + ")");
  }
  if (!cluster) parse_agent_options(s, &m.agent);
  seconds(s, "internet_lease_seconds", &m.internet_lease, 10, 7 * 24 * 3600);
  (void)s.finish();
}

void parse_limits(yaml::Map s, ManagerConfig& m) {
  s.integer("max_sandboxes", &m.max_sandboxes, 1, 100000);
  seconds(s, "default_ttl_seconds", &m.default_ttl, 60, 365 * 24 * 3600);
  seconds(s, "max_ttl_seconds", &m.max_ttl, 60, 365 * 24 * 3600);
  if (s.ok() && m.default_ttl > m.max_ttl)
    s.fail("default_ttl_seconds", "must not exceed max_ttl_seconds");
  s.integer("max_cpus", &m.max_cpus, 1, 1024);
  s.integer("max_memory_mb", &m.max_memory_mb, 64, 4 << 20);
  s.integer("max_disk_gb", &m.max_disk_gb, 1, 65536);
  s.integer("max_snapshots", &m.max_snapshots, 0, 100);
  s.integer("max_fork", &m.max_fork, 1, 64);
  s.integer("max_templates_per_owner", &m.max_templates_per_owner, 0, 1000);
  seconds(s, "max_paused_seconds", &m.max_paused, 60, 365 * 24 * 3600);
  seconds(s, "reconcile_interval_seconds", &m.reconcile_interval, 1, 3600);
  (void)s.finish();
}

// Volumes (pvesandbox/volumes.h): off until a holder template is named.
void parse_volumes(yaml::Map s, ManagerConfig& m) {
  VolumeConfig& v = m.volumes;
  s.integer("holder_template_vmid", &v.holder_template_vmid, 0, 999999999);
  if (s.ok() && v.holder_template_vmid != 0 &&
      v.holder_template_vmid >= static_cast<long long>(m.vmid_min) &&
      v.holder_template_vmid <= static_cast<long long>(m.vmid_max))
    s.fail("holder_template_vmid", "must be outside the VMID range (proxmox.vmid_min..vmid_max)");
  s.string("storage", &v.storage);
  s.integer("max_size_gb", &v.max_size_gb, 1, 65536);
  s.integer("default_size_gb", &v.default_size_gb, 1, 65536);
  if (s.ok() && v.default_size_gb > v.max_size_gb)
    s.fail("default_size_gb", "must not exceed max_size_gb");
  s.integer("max_per_owner", &v.max_per_owner, 0, 1000);
  s.integer("max_mounts", &v.max_mounts, 1, 64);
  (void)s.finish();
}

void parse_hot_pool(yaml::Map s, ManagerConfig& m) {
  s.integer("refill_parallel", &m.hot_pool_refill_parallel, 1, 16);
  s.integer("member_cpuunits", &m.hot_pool_member_cpuunits, 0, 10000);
  {
    long long ms = m.hot_pool_refill_delay.count();
    s.integer("refill_delay_ms", &ms, 0, 60000);
    m.hot_pool_refill_delay = std::chrono::milliseconds(ms);
  }
  {
    long long ms = m.hot_pool_check_interval.count();
    s.integer("check_interval_ms", &ms, 100, 600000);
    m.hot_pool_check_interval = std::chrono::milliseconds(ms);
  }
  std::set<std::string> names;
  for (yaml::Map p : s.maps("profiles")) {
    HotPoolProfile profile;
    p.string("name", &profile.name, yaml::Need::kRequired);
    if (p.ok() && !valid_pool_profile_name(profile.name))
      p.fail("name", "must be 1-32 of [a-z0-9-], not " + yaml::quoted_value(profile.name));
    if (p.ok() && !names.insert(profile.name).second)
      p.fail("name", "duplicate profile name " + profile.name);
    p.integer("size", &profile.size, 0, 1024, yaml::Need::kRequired);
    p.integer("template_vmid", &profile.template_vmid, 0, 999999999);
    if (p.ok() && profile.template_vmid > 0 && profile.template_vmid < 100)
      p.fail("template_vmid", "must be a VMID (100 or more), or 0 for proxmox.template_vmid");
    p.string("template", &profile.template_name);
    if (p.ok() && !profile.template_name.empty() &&
        (profile.template_vmid != 0 || !valid_template_name(profile.template_name)))
      p.fail("template",
             "must be a custom template's name (docs/templates.md), without template_vmid");
    p.integer("template_replicas", &profile.template_replicas, 0, 16);
    p.integer("cpus", &profile.cpus, 1, m.max_cpus);
    p.integer("memory_mb", &profile.memory_mb, 16, m.max_memory_mb);
    p.integer("disk_gb", &profile.disk_gb, 0, m.max_disk_gb);
    (void)p.finish();
    m.hot_pools.push_back(std::move(profile));
  }
  (void)s.finish();
}

std::string describe_node(const NodeConfig& n, int shared_template) {
  std::ostringstream o;
  o << "node " << n.name << " network " << n.sandbox_cidr.to_string()
    << " gateway=" << n.gateway.to_string() << " bridge=" << n.bridge << " template="
    << (n.template_vmid != 0 ? std::to_string(n.template_vmid)
                             : std::to_string(shared_template) + " (shared, target)")
    << " agent=";
  if (n.agent.command.empty()) {
    o << n.agent.socket_path;
  } else {
    o << "relay:";
    for (const auto& a : n.agent.command) o << " " << a;
  }
  if (n.max_sandboxes > 0) o << " max_sandboxes=" << n.max_sandboxes;
  if (n.min_free_memory_mb > 0) o << " min_free_memory=" << n.min_free_memory_mb << "MB";
  for (const auto& [k, v] : n.labels) o << " " << k << "=" << v;
  if (n.drained) o << " drained";
  return o.str();
}

// The service's defaults for the Manager's part (where they differ from ManagerConfig's).
ServiceConfig defaults() {
  ServiceConfig c;
  c.manager.sandbox_cidr = *Cidr::parse("10.99.0.0/16");
  c.manager.gateway = *Ipv4Address::parse("10.99.0.1");
  c.manager.ssh.private_key_file = "/etc/pve-sandbox/id_ed25519";
  return c;
}

}  // namespace

Result<ServiceConfig> parse_config(const std::string& yaml_text, const std::string& source,
                                   const std::map<std::string, std::string>* env) {
  Env own_env;
  if (!env) {
    own_env = process_env();
    env = &own_env;
  }
  auto doc = yaml::Document::parse(yaml_text, source);
  if (!doc) return fail(doc.error());
  ServiceConfig c = defaults();
  c.source = source;
  yaml::Map top = doc->root();
  parse_listen(top.map("listen"), c);
  parse_http(top.map("http"), c);
  parse_egress(top.map("egress"), c);  // before auth: tokens name its lists
  parse_auth(top.map("auth"), c);
  parse_audit(top.map("audit"), c);
  parse_terminals(top.map("terminals"), c);
  parse_ports(top.map("ports"), *env, c);
  top.one_of("log_level", &c.log_level, {"debug", "info", "warn", "error"});
  parse_mcp(top.map("mcp"), c.mcp);
  {
    yaml::Map console = top.map("console");
    console.boolean("enabled", &c.console_enabled);
    (void)console.finish();
  }
  {
    yaml::Map e2b = top.map("e2b");
    e2b.string("domain", &c.e2b_domain);
    e2b.boolean("login_snapshot", &c.e2b_login_snapshot);
    e2b.string("sessions_file", &c.e2b_sessions_file);
    if (e2b.ok() && !c.e2b_sessions_file.empty() && c.e2b_sessions_file[0] != '/')
      e2b.fail("sessions_file", "must be an absolute path");
    if (e2b.ok() && !c.e2b_domain.empty() && !validate_egress_name(c.e2b_domain))
      e2b.fail("domain", "must be a DNS name such as sandbox.example.org");
    (void)e2b.finish();
  }
  const bool cluster = top.has("nodes");
  parse_proxmox(top.map("proxmox"), *env, cluster, c);
  parse_network(top.map("network"), cluster, c.manager);
  parse_ssh(top.map("ssh"), *env, c.manager);
  parse_agent(top.map("agent"), cluster, c.manager);
  parse_nodes(top, c);  // after proxmox: template and VMID range
  parse_limits(top.map("limits"), c.manager);
  parse_hot_pool(top.map("hot_pool"), c.manager);  // after limits: its ranges are theirs
  parse_volumes(top.map("volumes"), c.manager);    // after proxmox: the VMID range
  yaml::Map policy = top.map("policy");
  if (policy.has("webhook")) parse_webhook(policy.map("webhook"), *env, c.webhook);
  parse_policy(policy, c);
  if (auto st = top.finish(); !st) return fail(st.error());
  return c;
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
  const ManagerConfig& m = c.manager;
  auto secs = [](auto d) { return std::to_string(std::chrono::seconds(d).count()) + "s"; };
  const char* policies[] = {"pinned", "known_hosts", "tofu", "insecure"};
  std::ostringstream o;
  o << "config " << c.source << "\n"
    << "  listen " << (c.tls_cert_file.empty() ? "http://" : "https://") << c.listen_address << ":"
    << c.listen_port << " threads=" << c.http_threads << "\n"
    << "  tokens";
  for (const auto& t : c.tokens) o << " " << t.name;
  o << "\n"
    << "  audit " << c.audit_file << "\n"
    << "  proxmox " << m.proxmox.base_url << (m.nodes.empty() ? " node=" + m.node : "")
    << " token=" << m.proxmox.token_id << " secret from " << c.proxmox_token_secret_source
    << " template=" << m.template_vmid
    << (m.template_replicas > 1 ? " template_replicas=" + std::to_string(m.template_replicas) : "")
    << " pool=" << m.pool << " vmids=" << m.vmid_min << "-" << m.vmid_max
    << (m.warm_pool > 0 ? " warm_pool=" + std::to_string(m.warm_pool) : "") << "\n";
  for (const auto& p : m.hot_pools)
    o << "  hot_pool " << p.name << " size=" << p.size
      << " template=" << (p.template_vmid != 0 ? p.template_vmid : m.template_vmid)
      << " cpus=" << p.cpus << " memory=" << p.memory_mb << "MB disk=" << p.disk_gb << "GB\n";
  if (m.nodes.empty())
    o << "  network " << m.sandbox_cidr.to_string() << " gateway=" << m.gateway.to_string()
      << " bridge=" << m.bridge << (m.dhcp ? " dhcp" : "") << "\n";
  for (const auto& n : m.nodes) o << "  " << describe_node(n, m.template_vmid) << "\n";
  o << "  ssh user=" << m.ssh.user << " key=" << m.ssh.private_key_file
    << " host_key_policy=" << policies[static_cast<int>(m.ssh.host_key_policy)]
    << " per_sandbox_host_keys=" << (m.per_sandbox_host_keys ? "true" : "false") << "\n"
    << "  agent " << (m.nodes.empty() ? m.agent.socket_path + " " : "")
    << "lease=" << secs(m.internet_lease) << "\n"
    << "  limits max_sandboxes=" << m.max_sandboxes << " ttl=" << secs(m.default_ttl) << "/"
    << secs(m.max_ttl) << " cpus<=" << m.max_cpus << " memory<=" << m.max_memory_mb
    << "MB disk<=" << m.max_disk_gb << "GB snapshots<=" << m.max_snapshots << "\n";
  o << describe_egress(c);
  if (!c.policy.empty())
    o << "  policy " << c.policy.rule_count() << " rules; approvals expire after "
      << c.approval_timeout_seconds << "s, calls wait " << c.approval_wait_seconds << "s\n";
  return o.str();
}

}  // namespace pvs::service
