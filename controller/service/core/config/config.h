// The controller's configuration: /etc/pve-sandbox/controller.yaml, read with the strict YAML
// reader (pvesandbox/common/yaml_reader.h) straight into typed values, the Manager's part
// directly into a ManagerConfig, and validated as a whole before the service starts.
//
//   auto config = pvs::service::load_config("/etc/pve-sandbox/controller.yaml");
//   if (!config) { std::cerr << config.error().message; return 78; }
//   auto manager = pvs::Manager::open(config->manager);
//
// Every key is documented in docs/operations.md. Unknown and duplicate keys are errors (a typo
// must not be silently ignored). Error messages name the file, the line, the key and why:
//   "controller.yaml:12: proxmox.template_vmid: must be an integer in [100, 999999999], not "7""
// Secrets (the Proxmox token secret, an SSH key passphrase) are read from a file or an
// environment variable named in the config, never written in it and never logged.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "policy/policy.h"
#include "policy/webhook.h"
#include "pvesandbox/common/error.h"
#include "pvesandbox/manager.h"

namespace pvs::service {

// What a token may ask for as an egress allowlist (auth.tokens[].egress; docs/operations.md).
struct TokenEgressCaps {
  // Named lists it may ask for ({"list": ...}); absent: every list in egress.lists.
  std::optional<std::vector<std::string>> lists;
  // Names it may put in its own lists ({"allow": [...]}): each asked name must equal one of
  // these, or fall under a "*.example.com" entry (a subdomain, or a narrower wildcard).
  // Absent: any name; empty: no lists of its own (only named lists).
  std::optional<std::vector<std::string>> names;
  int max_names = 0;  // names in one list of its own; 0: egress.max_names
  // Ports its own lists may open; each asked port must be one of these (as "internet on").
  std::vector<std::uint16_t> ports = {80, 443};
};

struct TokenConfig {
  std::string name;    // shown in the audit log and metrics; [A-Za-z0-9._-]{1,64}
  std::string sha256;  // lower-case hex SHA-256 of the bearer token
  // Running (and creating) sandboxes it may own at once, paused ones not counted (they count
  // against max_paused); 0: auth.default_max_sandboxes.
  int max_sandboxes = 0;
  bool admin = false;     // sees and acts on every sandbox, not only its own
  bool approver = false;  // may list, approve and deny pending approvals (admins may too)
  TokenEgressCaps egress{};
  // Lower-case hex SHA-256 of this token's E2B API key ("e2b_" + hex, sent as X-API-Key to the
  // E2B-compatible API, docs/e2b.md); empty: none.
  std::string e2b_key_sha256{};
  int max_paused = 0;  // paused sandboxes it may keep at once; 0: auth.default_max_paused
};

// The `egress:` section: the operator's named allowlists and the default cap.
struct EgressConfig {
  std::map<std::string, EgressList> lists;            // by name; names and ports normalised
  int max_names = static_cast<int>(kMaxEgressNames);  // per list a token asks for itself
};

// The MCP endpoint (/mcp): docs/mcp.md.
struct McpConfig {
  bool enabled = true;
  // Browser origins allowed besides the local ones (http(s)://localhost, 127.0.0.1, [::1]);
  // "*" allows any. A request with another Origin header is refused (DNS rebinding).
  std::vector<std::string> allowed_origins;
  int max_sessions_per_token = 64;  // beyond: the token's least recently used session ends
  int session_idle_seconds = 3600;  // a session unused this long ends
  int exec_timeout_seconds = 50;    // the exec tool's default timeout: under clients' usual 60 s
  std::uint64_t exec_output_bytes = 32 << 10;  // per stream, head + tail
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
  int http_max_queued = 256;
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
  int default_max_sandboxes = 16;  // running (and creating) sandboxes per token
  int default_max_paused = 16;     // paused sandboxes per token (they do not count above)
  int max_requests_per_token = 0;  // concurrent requests per token, 429 beyond (0: no limit)
  int max_streams_per_token = 0;   // concurrent streaming execs per token (0: no limit)

  // audit
  std::string audit_file = "/var/log/pve-sandbox-controller/audit.log";
  bool audit_fsync = false;
  int audit_denied_interval_seconds = 60;  // refused authentications: one line per source

  // terminals (interactive pty sessions, routes_terminals.cc)
  int terminal_max_per_sandbox = 8;          // running terminals of one sandbox; 429 beyond
  int terminal_max_per_token = 32;           // running terminals a token opened; 429 beyond
  int terminal_idle_timeout_seconds = 1800;  // no input, output or reader: closed
  std::uint64_t terminal_max_input_bytes = 64 << 10;      // one input call; 413 beyond
  std::uint64_t terminal_watcher_buffer_bytes = 1 << 20;  // per WebSocket; dropped beyond
  int terminal_max_websockets_per_token = 16;  // open terminal WebSockets per token; 429 beyond
  int terminal_max_websockets = 256;           // all tokens together; 429 beyond
  int terminal_scrollback_lines = 1000;
  // ports (api/ports/): upgraded connections (WebSockets) to sandboxes' ports; 429 beyond
  int ports_max_upgrades_per_token = 32;
  int ports_max_upgrades = 256;
  int ports_preview_max_seconds = 86400;  // a preview link's longest life
  // ports.preview_secret_file/_env: the key preview links are sealed with; empty: a random key
  // per process (a restart ends every link).
  std::string ports_preview_secret;
  // ports.transport: how the port proxy reaches a sandbox's port: "ssh" (a direct-tcpip channel
  // on its SSH session) or "route" (a TCP connection over a route the node's agent opens, SSH
  // for a service on the sandbox's loopback only; docs/design/ports.md, section 10).
  bool ports_route = false;
  int terminal_max_wait_seconds = 60;     // a wait's timeout is capped at this
  bool audit_log_terminal_input = false;  // audit.log_terminal_input: record what was typed

  std::string log_level = "info";

  // policy (docs/policy.md): rules per token, and how long an `approve` waits for a person
  Policy policy;
  int approval_timeout_seconds = 300;  // pending -> expired (denied)
  int approval_wait_seconds = 30;      // a call blocks this long, then answers 202
  int approval_use_seconds = 300;      // approved but unused this long: expired unused
  int max_pending_approvals = 1000;
  WebhookConfig webhook;  // policy.webhook: pending and decided approvals POSTed to a URL
  McpConfig mcp;
  EgressConfig egress;
  bool console_enabled = true;  // console.enabled: the web console at /ui/ (docs/console.md)
  // e2b.domain: envd requests for Host 49983-<id>.<domain> go to the E2B data plane, and the
  // E2B replies name it as the sandboxes' domain; empty: E2B_SANDBOX_URL only (docs/e2b.md).
  std::string e2b_domain;
  // e2b.login_snapshot: serve `bash -l -c CMD` from the login shell's environment kept in the
  // sandbox while no profile file changed (docs/e2b.md, "Login shells"); false: a login shell
  // for every command.
  bool e2b_login_snapshot = true;
  // e2b.sessions_file: where the E2B sessions (access tokens, envVars) are kept across
  // restarts (mode 0600); empty: in memory only (docs/e2b.md, "Sessions across restarts").
  std::string e2b_sessions_file;

  // proxmox, network, ssh, agent and limits: the Manager's configuration.
  ManagerConfig manager;
  std::string proxmox_token_secret_source;  // "file /etc/..." or "env NAME", for messages
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
