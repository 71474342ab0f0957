#include "core/config/config.h"
#include "service/core/config/config_test_util.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <regex>

namespace pvs::service {
namespace {

using testing::error_of;
using testing::kEnv;
using testing::kHash;

std::string minimal(const std::string& extra = "") {
  return std::string("auth:\n  tokens:\n    - name: ci\n      sha256: ") + kHash +
         "\nproxmox:\n  url: https://127.0.0.1:8006\n  node: pve\n"
         "  token_id: sandbox@pve!controller\n  token_secret_env: PVS_TEST_SECRET\n"
         "  template_vmid: 9000\n"
         "ssh:\n  host_key_policy: insecure\n" +
         extra;
}

TEST(Config, MinimalHasDocumentedDefaults) {
  auto c = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->listen_address, "127.0.0.1");
  EXPECT_EQ(c->listen_port, 8787);
  EXPECT_EQ(c->manager.proxmox.token_secret, "s3cr3t-uuid");
  EXPECT_EQ(c->proxmox_token_secret_source, "env PVS_TEST_SECRET");
  EXPECT_EQ(c->manager.template_vmid, 9000);
  EXPECT_EQ(c->manager.task_poll_max, std::chrono::milliseconds(50));
  EXPECT_EQ(c->manager.pool, "pve-sandbox");
  EXPECT_EQ(c->manager.sandbox_cidr.to_string(), "10.99.0.0/16");
  EXPECT_EQ(c->max_body_bytes, 1u << 20);
  ASSERT_EQ(c->tokens.size(), 1u);
  EXPECT_EQ(c->tokens[0].name, "ci");
  EXPECT_FALSE(c->tokens[0].admin);
}

TEST(Config, TerminalsSectionAndAuditInput) {
  auto d = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->terminal_max_per_sandbox, 8);
  EXPECT_EQ(d->terminal_max_per_token, 32);
  EXPECT_EQ(d->terminal_idle_timeout_seconds, 1800);
  EXPECT_FALSE(d->audit_log_terminal_input);
  auto c = parse_config(minimal("terminals:\n  max_per_sandbox: 2\n  max_per_token: 5\n"
                                "  idle_timeout_seconds: 60\n  max_input_bytes: 2048\n"
                                "  watcher_buffer_bytes: 65536\n  scrollback_lines: 0\n"
                                "  max_wait_seconds: 30\n"
                                "audit:\n  file: /tmp/a.log\n  log_terminal_input: true\n"),
                        "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->terminal_max_per_sandbox, 2);
  EXPECT_EQ(c->terminal_max_per_token, 5);
  EXPECT_EQ(c->terminal_idle_timeout_seconds, 60);
  EXPECT_EQ(c->terminal_max_input_bytes, 2048u);
  EXPECT_EQ(c->terminal_watcher_buffer_bytes, 65536u);
  EXPECT_EQ(c->terminal_scrollback_lines, 0);
  EXPECT_EQ(c->terminal_max_wait_seconds, 30);
  EXPECT_TRUE(c->audit_log_terminal_input);
  EXPECT_NE(
      error_of(minimal("terminals:\n  max_per_sandbox: 0\n")).find("terminals.max_per_sandbox"),
      std::string::npos);
  EXPECT_NE(error_of(minimal("terminals:\n  max_sessions: 3\n")).find("max_sessions"),
            std::string::npos);
}

TEST(Config, PortsTransport) {
  auto d = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_FALSE(d->ports_route);  // ssh by default
  auto c = parse_config(minimal("ports:\n  transport: route\n"), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->ports_route);
  c = parse_config(minimal("ports:\n  transport: ssh\n"), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->ports_route);
  std::string e = error_of(minimal("ports:\n  transport: tcp\n"));
  EXPECT_NE(e.find("ports.transport"), std::string::npos) << e;
  EXPECT_NE(e.find("must be ssh or route"), std::string::npos) << e;
}

TEST(Config, E2bSection) {
  auto d = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_TRUE(d->e2b_login_snapshot);
  EXPECT_TRUE(d->e2b_domain.empty());
  auto c = parse_config(minimal("e2b:\n  domain: sandbox.example.org\n  login_snapshot: false\n"),
                        "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->e2b_login_snapshot);
  EXPECT_EQ(c->e2b_domain, "sandbox.example.org");
  EXPECT_NE(error_of(minimal("e2b:\n  login_snapshot: sometimes\n")).find("login_snapshot"),
            std::string::npos);
  EXPECT_TRUE(d->e2b_sessions_file.empty());  // in memory unless asked
  auto f = parse_config(minimal("e2b:\n  sessions_file: /var/lib/x/e2b-sessions.json\n"),
                        "controller.yaml", &kEnv);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->e2b_sessions_file, "/var/lib/x/e2b-sessions.json");
  EXPECT_NE(error_of(minimal("e2b:\n  sessions_file: sessions.json\n"))
                .find("sessions_file: must be an absolute path"),
            std::string::npos);
}

TEST(Config, ShippedDefaultFileIsValidOnceFilledIn) {
  // packaging/deb/controller.yaml is the documented default: it must parse once the operator
  // added a token and the Proxmox settings (the lines the file asks for).
  std::ifstream in(std::string(PVS_SOURCE_DIR) + "/packaging/deb/controller.yaml");
  ASSERT_TRUE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto shipped = parse_config(text.str(), "controller.yaml", &kEnv);
  ASSERT_FALSE(shipped);  // as shipped it names no token: refuses to start, saying why
  EXPECT_NE(shipped.error().message.find("auth.tokens"), std::string::npos)
      << shipped.error().message;
}

TEST(Config, HotPoolProfiles) {
  auto c = parse_config(minimal("hot_pool:\n  refill_parallel: 3\n  member_cpuunits: 10\n"
                                "  refill_delay_ms: 250\n  profiles:\n"
                                "    - {name: small, size: 8}\n"
                                "    - {name: big, size: 2, cpus: 4, memory_mb: 4096, disk_gb: "
                                "32, template_vmid: 9001}\n"),
                        "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  ASSERT_EQ(c->manager.hot_pools.size(), 2U);
  EXPECT_EQ(c->manager.hot_pool_refill_parallel, 3);
  EXPECT_EQ(c->manager.hot_pool_member_cpuunits, 10);
  EXPECT_EQ(parse_config(minimal(), "controller.yaml", &kEnv)->manager.hot_pool_member_cpuunits, 0);
  EXPECT_EQ(c->manager.hot_pool_refill_delay, std::chrono::milliseconds(250));
  EXPECT_EQ(parse_config(minimal(), "controller.yaml", &kEnv)->manager.hot_pool_refill_delay,
            std::chrono::milliseconds(0));
  EXPECT_EQ(error_of(minimal("hot_pool:\n  refill_delay_ms: 60001\n")),
            "controller.yaml: hot_pool.refill_delay_ms: must be an integer in [0, 60000], not "
            "\"60001\"");
  EXPECT_EQ(c->manager.hot_pools[0].name, "small");
  EXPECT_EQ(c->manager.hot_pools[0].size, 8);
  EXPECT_EQ(c->manager.hot_pools[0].cpus, 1);
  EXPECT_EQ(c->manager.hot_pools[0].memory_mb, 512);
  EXPECT_EQ(c->manager.hot_pools[0].template_vmid, 0);
  EXPECT_EQ(c->manager.hot_pools[1].cpus, 4);
  EXPECT_EQ(c->manager.hot_pools[1].disk_gb, 32);
  EXPECT_EQ(c->manager.hot_pools[1].template_vmid, 9001);
  EXPECT_TRUE(parse_config(minimal(), "controller.yaml", &kEnv)->manager.hot_pools.empty());
  EXPECT_EQ(error_of(minimal("hot_pool:\n  profiles:\n    - {name: Big, size: 1}\n")),
            "controller.yaml: hot_pool.profiles[0].name: must be 1-32 of [a-z0-9-], not \"Big\"");
  EXPECT_EQ(error_of(minimal("hot_pool:\n  profiles:\n    - {name: a, size: 1}\n"
                             "    - {name: a, size: 2}\n")),
            "controller.yaml: hot_pool.profiles[1].name: duplicate profile name a");
  EXPECT_EQ(error_of(minimal("hot_pool:\n  member_cpuunits: 10001\n")),
            "controller.yaml: hot_pool.member_cpuunits: must be an integer in [0, 10000], not "
            "\"10001\"");
  EXPECT_EQ(error_of(minimal("hot_pool:\n  profiles:\n    - {name: a}\n")),
            "controller.yaml: hot_pool.profiles[0].size: is required");
  EXPECT_EQ(error_of(minimal("hot_pool:\n  profiles:\n    - {name: a, size: 1, cpus: 99}\n")),
            "controller.yaml: hot_pool.profiles[0].cpus: must be an integer in [1, 8], not \"99\"");
  EXPECT_EQ(error_of(minimal("hot_pool:\n  profiles:\n    - {name: a, size: 1, gpus: 1}\n")),
            "controller.yaml: hot_pool.profiles[0].gpus: unknown key");
}

TEST(Config, WarmPoolAndDhcp) {
  auto with_pool = [](const std::string& value) {
    std::string text = minimal("network:\n  dhcp: true\n");
    auto at = text.find("  template_vmid: 9000\n");
    return text.insert(at, "  warm_pool: " + value + "\n");
  };
  auto c = parse_config(with_pool("8"), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.warm_pool, 8);
  EXPECT_TRUE(c->manager.dhcp);
  EXPECT_EQ(parse_config(minimal(), "controller.yaml", &kEnv)->manager.warm_pool, 0);
  EXPECT_EQ(error_of(with_pool("-1")),
            "controller.yaml: proxmox.warm_pool: must be an integer in [0, 1024], not \"-1\"");
}

TEST(Config, Volumes) {
  auto off = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_EQ(off->manager.volumes.holder_template_vmid, 0);
  auto c = parse_config(minimal("volumes:\n  holder_template_vmid: 8990\n  storage: fast\n"
                                "  default_size_gb: 4\n  max_size_gb: 32\n  max_per_owner: 2\n"
                                "  max_mounts: 3\n"),
                        "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  const VolumeConfig& v = c->manager.volumes;
  EXPECT_EQ(v.holder_template_vmid, 8990);
  EXPECT_EQ(v.storage, "fast");
  EXPECT_EQ(v.default_size_gb, 4);
  EXPECT_EQ(v.max_size_gb, 32);
  EXPECT_EQ(v.max_per_owner, 2);
  EXPECT_EQ(v.max_mounts, 3);
  EXPECT_EQ(error_of(minimal("volumes:\n  holder_template_vmid: 10005\n")),
            "controller.yaml: volumes.holder_template_vmid: must be outside the VMID range "
            "(proxmox.vmid_min..vmid_max)");
  EXPECT_EQ(error_of(minimal("volumes:\n  default_size_gb: 9\n  max_size_gb: 8\n")),
            "controller.yaml: volumes.default_size_gb: must not exceed max_size_gb");
  EXPECT_EQ(error_of(minimal("volumes:\n  max_mounts: 0\n")),
            "controller.yaml: volumes.max_mounts: must be an integer in [1, 64], not \"0\"");
}

TEST(Config, ErrorsNameFileKeyAndReason) {
  EXPECT_EQ(error_of(minimal("listen:\n  port: 70000\n")),
            "controller.yaml: listen.port: must be an integer in [0, 65535], not \"70000\"");
  EXPECT_EQ(error_of(minimal("listen:\n  prot: 1\n")), "controller.yaml: listen.prot: unknown key");
  EXPECT_EQ(error_of(minimal("bogus: 1\n")), "controller.yaml: bogus: unknown key");
  EXPECT_EQ(error_of(minimal("limits:\n  max_cpus: many\n")),
            "controller.yaml: limits.max_cpus: must be an integer in [1, 1024], not \"many\"");
  EXPECT_EQ(error_of(minimal("log_level: loud\n")),
            "controller.yaml: log_level: must be one of debug, info, warn, error, not \"loud\"");
  EXPECT_EQ(error_of(minimal("network:\n  gateway: 10.100.0.1\n")),
            "controller.yaml: network.gateway: must lie inside network.cidr 10.99.0.0/16");
  EXPECT_EQ(error_of(std::regex_replace(minimal(), std::regex("template_vmid: 9000"),
                                        "template_vmid: 9000\n  task_poll_max_ms: 5")),
            "controller.yaml: proxmox.task_poll_max_ms: must be an integer in [10, 5000], not "
            "\"5\"");
  EXPECT_EQ(error_of(minimal("http:\n  threads: [1]\n")),
            "controller.yaml: http.threads: must be an integer in [2, 1024]");
  EXPECT_EQ(error_of("listen: [\n"), "controller.yaml: YAML: end of sequence flow not found");
  // The line is where the value is; duplicate keys are refused too.
  auto c = parse_config(minimal("limits:\n  max_cpus: many\n"), "controller.yaml", &kEnv);
  ASSERT_FALSE(c);
  const std::string base = minimal();
  int line = static_cast<int>(std::count(base.begin(), base.end(), '\n')) + 2;
  EXPECT_EQ(
      c.error().message.rfind("controller.yaml:" + std::to_string(line) + ": limits.max_cpus", 0),
      0u)
      << c.error().message;
  EXPECT_EQ(error_of(minimal("log_level: info\nlog_level: debug\n")),
            "controller.yaml: duplicate key \"log_level\"");
}

TEST(Config, RequiredKeys) {
  EXPECT_EQ(error_of("auth:\n  tokens: []\n"),
            "controller.yaml: auth.tokens: at least one API token is required");
  std::string no_node = minimal();
  no_node.replace(no_node.find("  node: pve\n"), 12, "");
  EXPECT_EQ(error_of(no_node), "controller.yaml: proxmox.node: is required");
  EXPECT_EQ(error_of(""), "controller.yaml: the file is empty");
  EXPECT_EQ(error_of("- a\n- b\n"), "controller.yaml: the top level must be a mapping");
}

TEST(Config, TokensAreValidated) {
  std::string yaml = minimal();
  std::string bad = yaml;
  bad.replace(bad.find(kHash), 64, "secret-in-clear");
  EXPECT_NE(error_of(bad).find("auth.tokens[0].sha256: must be 64 lower-case hex digits"),
            std::string::npos);
  std::string dup = std::string("auth:\n  tokens:\n    - {name: a, sha256: ") + kHash +
                    "}\n    - {name: a, sha256: " + std::string(64, 'a') + "}\n";
  EXPECT_NE(error_of(dup).find("auth.tokens[1].name: duplicate token name a"), std::string::npos);
  std::string same = std::string("auth:\n  tokens:\n    - {name: a, sha256: ") + kHash +
                     "}\n    - {name: b, sha256: " + kHash + "}\n";
  EXPECT_NE(error_of(same).find("auth.tokens[1].sha256: the same token is listed twice"),
            std::string::npos);
}

TEST(Config, SecretsFromFileOrEnvNeverInDescription) {
  char dir[] = "/tmp/pvs-config-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string file = std::string(dir) + "/secret";
  std::ofstream(file) << "from-file-secret\n";
  std::string yaml = minimal();
  yaml.replace(yaml.find("token_secret_env: PVS_TEST_SECRET"), 33, "token_secret_file: " + file);
  auto c = parse_config(yaml, "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.proxmox.token_secret, "from-file-secret");
  EXPECT_EQ(describe(*c).find("from-file-secret"), std::string::npos);
  EXPECT_NE(describe(*c).find("secret from file " + file), std::string::npos);

  std::map<std::string, std::string> no_env;
  auto missing = parse_config(minimal(), "c.yaml", &no_env);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find(
                ": proxmox.token_secret_env: environment variable PVS_TEST_SECRET is not set"),
            std::string::npos)
      << missing.error().message;
  std::string both = minimal("");
  both.replace(both.find("  token_secret_env"), 0, "  token_secret_file: " + file + "\n");
  EXPECT_NE(error_of(both).find("set either token_secret_file or token_secret_env, not both"),
            std::string::npos);
  std::string neither = minimal();
  neither.replace(neither.find("  token_secret_env: PVS_TEST_SECRET\n"), 35, "");
  EXPECT_EQ(error_of(neither),
            "controller.yaml: proxmox.token_secret_file: is required (or token_secret_env)");
  unlink(file.c_str());
  rmdir(dir);
}

// Plain http would send the Proxmox API token in the clear: refused unless asked for.
TEST(Config, PlainHttpToProxmoxNeedsInsecureHttp) {
  std::string yaml = minimal();
  yaml.replace(yaml.find("https://"), 8, "http://");
  EXPECT_NE(error_of(yaml).find("proxmox.url: must start with https://"), std::string::npos);
  yaml.insert(yaml.find("  node: pve\n"), "  insecure_http: true\n");
  auto c = parse_config(yaml, "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.proxmox.base_url.rfind("http://", 0), 0u);
}

TEST(Config, LoadConfigReportsMissingFile) {
  auto c = load_config("/nonexistent/controller.yaml", &kEnv);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kNotFound);
  EXPECT_NE(c.error().message.find("/nonexistent/controller.yaml"), std::string::npos);
}

TEST(Config, PinnedHostKeyNeedsFingerprint) {
  std::string yaml = minimal();
  yaml.replace(yaml.find("host_key_policy: insecure"), 25, "host_key_policy: pinned");
  EXPECT_NE(error_of(yaml).find("ssh.host_key_fingerprint: host_key_policy pinned needs"),
            std::string::npos);
}

TEST(Config, PerSandboxHostKeysByDefaultAndOnlyWithTheReadyWait) {
  auto c = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(c->manager.per_sandbox_host_keys);
  EXPECT_NE(error_of(minimal("  wait_for_ready: false\n"))
                .find("ssh.per_sandbox_host_keys: needs wait_for_ready: true"),
            std::string::npos);
  c = parse_config(minimal("  wait_for_ready: false\n  per_sandbox_host_keys: false\n"),
                   "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->manager.per_sandbox_host_keys);
}

TEST(Config, PreferCiphersAreCipherNames) {
  auto c = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.ssh.prefer_ciphers, "");  // the built-in order (chacha20-poly1305 first)
  c = parse_config(minimal("  prefer_ciphers: aes256-gcm@openssh.com,aes128-gcm@openssh.com\n"),
                   "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.ssh.prefer_ciphers, "aes256-gcm@openssh.com,aes128-gcm@openssh.com");
  for (const char* bad :
       {"aes256-ctr,", ",aes256-ctr", "a,,b", "AES256-CTR", "aes256 ctr", "aes256-ctr;rm"}) {
    EXPECT_NE(error_of(minimal(std::string("  prefer_ciphers: \"") + bad + "\"\n"))
                  .find("ssh.prefer_ciphers: must be cipher names separated by commas"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(error_of(minimal("  prefer_ciphers: " + std::string(600, 'a') + "\n"))
                .find("ssh.prefer_ciphers"),
            std::string::npos);
}

TEST(Config, LargeUploadsInChunks) {
  auto c = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.ssh.transfer_connections, 4);
  EXPECT_EQ(c->manager.ssh.transfer_chunk, std::size_t{16} << 20);
  EXPECT_EQ(c->manager.ssh.transfer_memory, std::uint64_t{256} << 20);
  c = parse_config(
      minimal("  transfer_connections: 1\n  transfer_chunk_mib: 32\n  transfer_memory_mib: 0\n"),
      "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.ssh.transfer_connections, 1);
  EXPECT_EQ(c->manager.ssh.transfer_chunk, std::size_t{32} << 20);
  EXPECT_EQ(c->manager.ssh.transfer_memory, 0u);
  EXPECT_NE(error_of(minimal("  transfer_connections: 0\n")).find("ssh.transfer_connections"),
            std::string::npos);
  EXPECT_NE(error_of(minimal("  transfer_chunk_mib: 2048\n")).find("ssh.transfer_chunk_mib"),
            std::string::npos);
  EXPECT_NE(error_of(minimal("  transfer_memory_mib: -1\n")).find("ssh.transfer_memory_mib"),
            std::string::npos);
}

TEST(Config, BulkClient) {
  auto c = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.ssh.bulk_client, "/usr/bin/ssh");
  c = parse_config(minimal("  bulk_client: \"\"\n"), "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.ssh.bulk_client, "");
  EXPECT_NE(error_of(minimal("  bulk_client: ssh\n")).find("ssh.bulk_client"), std::string::npos);
}

TEST(Config, TemplateReplicas) {
  auto d = parse_config(minimal(), "controller.yaml", &kEnv);
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->manager.template_replicas, 1);
  std::string text =
      minimal("hot_pool:\n  profiles:\n    - {name: a, size: 1, template_replicas: 3}\n");
  text.replace(text.find("  template_vmid: 9000\n"), 21,
               "  template_vmid: 9000\n  template_replicas: 4\n");
  auto c = parse_config(text, "controller.yaml", &kEnv);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->manager.template_replicas, 4);
  EXPECT_EQ(c->manager.hot_pools[0].template_replicas, 3);
  std::string zero = minimal();
  zero.replace(zero.find("  template_vmid: 9000\n"), 21,
               "  template_vmid: 9000\n  template_replicas: 0\n");
  EXPECT_EQ(error_of(zero),
            "controller.yaml: proxmox.template_replicas: must be an integer in [1, 16], not \"0\"");
  EXPECT_EQ(
      error_of(
          minimal("hot_pool:\n  profiles:\n    - {name: a, size: 1, template_replicas: 17}\n")),
      "controller.yaml: hot_pool.profiles[0].template_replicas: must be an integer in [0, 16], "
      "not \"17\"");
}

}  // namespace
}  // namespace pvs::service
