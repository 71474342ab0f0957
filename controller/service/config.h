// The controller's configuration: /etc/pve-sandbox/controller.yaml, parsed with yaml-cpp into a
// typed struct and validated as a whole before the service starts.
//
//   auto config = pvs::service::load_config("/etc/pve-sandbox/controller.yaml");
//   if (!config) { std::cerr << config.error().message; return 78; }
//
// Every key is documented in docs/operations.md. Unknown keys are errors (a typo must not be
// silently ignored). Error messages name the file, the key and the reason:
//   "controller.yaml: proxmox.template_vmid: must be an integer in [100, 999999999]"
// Secrets (the Proxmox token secret, an SSH key passphrase) are read from a file or an
// environment variable named in the config, never written in it and never logged.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs::service {

struct TokenConfig {
  std::string name;    // shown in the audit log and metrics; [A-Za-z0-9._-]{1,64}
  std::string sha256;  // lower-case hex SHA-256 of the bearer token
  int max_sandboxes =
      0;               // live sandboxes this token may own at once; 0: auth.default_max_sandboxes
  bool admin = false;  // sees and acts on every sandbox, not only its own
};

struct ServiceConfig {
  std::string source;  // the file it came from ("" when built in memory)

  // listen
  std::string listen_address = "127.0.0.1";
  std::uint16_t listen_port = 8787;
  std::string tls_cert_file;  // both set: HTTPS (Poco NetSSL)
  std::string tls_key_file;

  // http
  int http_threads = 32;
  int http_max_queued = 64;
  int http_keepalive_timeout_seconds = 5;
  int http_request_timeout_seconds = 30;
  int http_max_keepalive_requests = 100;
  std::uint64_t max_body_bytes = 1 << 20;         // JSON request bodies
  std::uint64_t max_upload_bytes = 256ull << 20;  // PUT .../files
  std::uint64_t max_download_bytes = 256ull << 20;
  int max_exec_timeout_seconds = 3600;
  std::uint64_t max_exec_output_bytes = 16 << 20;  // per stream, for buffered exec

  // auth
  std::vector<TokenConfig> tokens;
  int default_max_sandboxes = 16;
  int max_requests_per_token = 0;  // concurrent requests per token, 429 beyond (0: no limit)
  int max_streams_per_token = 0;   // concurrent streaming execs per token (0: no limit)

  // audit
  std::string audit_file = "/var/log/pve-sandbox-controller/audit.log";
  bool audit_fsync = false;
  int audit_denied_interval_seconds = 60;  // refused authentications: one line per source

  std::string log_level = "info";

  // proxmox
  std::string proxmox_url;
  std::string proxmox_node;
  std::string proxmox_token_id;
  std::string proxmox_token_secret;         // loaded from token_secret_file / token_secret_env
  std::string proxmox_token_secret_source;  // "file /etc/..." or "env NAME", for messages
  std::string proxmox_ca_file;
  std::string proxmox_fingerprint;
  bool proxmox_insecure_skip_verify = false;
  int proxmox_timeout_seconds = 60;
  int template_vmid = 0;
  std::string pool = "pve-sandbox";
  std::string storage;
  bool full_clone = false;
  int warm_pool = 0;  // stopped clones kept ready
  std::uint32_t vmid_min = 10000;
  std::uint32_t vmid_max = 19999;

  // network
  std::string network_cidr = "10.99.0.0/16";
  std::string network_gateway = "10.99.0.1";
  std::string network_bridge = "vmbr1";
  std::vector<std::string> network_reserved;
  bool network_dhcp = false;
  bool network_firewall = false;

  // ssh
  std::string ssh_user = "root";
  std::uint16_t ssh_port = 22;
  std::string ssh_private_key_file = "/etc/pve-sandbox/id_ed25519";
  std::string ssh_passphrase;                  // from passphrase_file / passphrase_env
  std::string ssh_host_key_policy = "pinned";  // pinned | known_hosts | tofu | insecure
  std::string ssh_host_key_fingerprint;
  std::string ssh_known_hosts_file;
  int ssh_connect_timeout_seconds = 10;
  int ssh_ready_timeout_seconds = 60;
  bool ssh_wait_for_ready = true;  // false: create returns once started (no sshd in template)

  // agent
  std::string agent_socket = "/run/pve-sandbox/agent.sock";
  int agent_timeout_seconds = 10;
  int internet_lease_seconds = 300;

  // limits
  int max_sandboxes = 256;
  int default_ttl_seconds = 3600;
  int max_ttl_seconds = 7 * 24 * 3600;
  int max_cpus = 8;
  int max_memory_mb = 16384;
  int max_disk_gb = 64;
  int reconcile_interval_seconds = 30;
};

// Parses and validates YAML text; `source` names it in messages (usually the file name).
// `env` is consulted for *_env secrets (defaults to the process environment when null).
Result<ServiceConfig> parse_config(const std::string& yaml_text, const std::string& source,
                                   const std::map<std::string, std::string>* env = nullptr);
// Reads the file, then parse_config. Errors: kNotFound / kIo for the file, kInvalidArgument for
// its content.
Result<ServiceConfig> load_config(const std::string& path,
                                  const std::map<std::string, std::string>* env = nullptr);

// A one-screen summary for `--check-config` and the start-up log. Never contains secrets.
std::string describe(const ServiceConfig& config);

}  // namespace pvs::service
