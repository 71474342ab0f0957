// pve-sandbox-agent [--config FILE]            serve
// pve-sandbox-agent check-config [--config FILE]
// pve-sandbox-agent relay [--socket PATH]
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "agent.h"
#include "config.h"
#include "nft_backend.h"
#include "pvesandbox/common/io.h"
#include "pvesandbox/common/log.h"
#include "relay.h"
#include "server.h"

namespace {

constexpr const char* kUsage =
    "usage: pve-sandbox-agent [--config FILE]\n"
    "       pve-sandbox-agent check-config [--config FILE]\n"
    "       pve-sandbox-agent relay [--socket PATH]\n"
    "       pve-sandbox-agent --version\n";

int usage_error(const std::string& message) {
  std::fprintf(stderr, "pve-sandbox-agent: %s\n%s", message.c_str(), kUsage);
  return 2;
}

int serve(const std::string& config_path) {
  using namespace pvs::agent;
  auto config = load_config(config_path);
  if (!config) {
    pvs::log::error(config.error().message);
    return 1;
  }
  pvs::log::Level level;
  if (pvs::log::parse_level(config->log_level, &level)) pvs::log::set_level(level);
  NftBackend::Options options;
  if (config->destroy == DestroyMode::kNative) options.use_destroy = true;
  if (config->destroy == DestroyMode::kEmulate) options.use_destroy = false;
  auto backend = NftBackend::open(options);
  if (!backend) {
    pvs::log::error("netlink: " + backend.error().message);
    return 1;
  }
  Agent agent(*config, std::move(*backend));
  if (auto ok = agent.start(); !ok) {
    pvs::log::error(ok.error().message);
    return 1;
  }
  auto listener = open_listener(*config);
  if (!listener) {
    pvs::log::error(listener.error().message);
    return 1;
  }
  pvs::log::info(std::string("pve-sandbox-agent ") + PVS_VERSION + " serving " + config->family +
                 " " + config->table + " " + config->set + ", sandbox_cidr " +
                 config->sandbox_cidr.to_string());
  Server server(agent, std::move(*listener));
  return server.run();
}

}  // namespace

int main(int argc, char** argv) {
  std::string command = "serve";
  std::string config_path(pvs::agent::kDefaultConfigPath);
  std::string socket_path(pvs::kDefaultAgentSocket);
  int i = 1;
  if (i < argc && argv[i][0] != '-') command = argv[i++];
  for (; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--version") {
      std::printf("pve-sandbox-agent %s\n", PVS_VERSION);
      return 0;
    }
    if ((arg == "--config" || arg == "--socket") && i + 1 < argc) {
      (arg == "--config" ? config_path : socket_path) = argv[++i];
      continue;
    }
    return usage_error("unexpected argument '" + std::string(arg) + "'");
  }
  if (command == "serve") return serve(config_path);
  if (command == "check-config") {
    auto config = pvs::agent::load_config(config_path);
    if (!config) {
      std::fprintf(stderr, "%s\n", config.error().message.c_str());
      return 1;
    }
    std::printf("%s: ok (sandbox_cidr %s, gateway %s, set %s %s %s, dhcp_hosts_dir %s)\n",
                config_path.c_str(), config->sandbox_cidr.to_string().c_str(),
                config->gateway.to_string().c_str(), config->family.c_str(), config->table.c_str(),
                config->set.c_str(),
                config->dhcp_hosts_dir.empty() ? "off" : config->dhcp_hosts_dir.c_str());
    return 0;
  }
  if (command == "relay") return pvs::agent::run_relay(socket_path, STDIN_FILENO, STDOUT_FILENO);
  return usage_error("unknown command '" + command + "'");
}
