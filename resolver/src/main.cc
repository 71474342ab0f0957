// pve-sandbox-resolver [--config PATH] [check-config [--unit FILE]... [--agent-config FILE]]:
// see docs/agent.md "The egress resolver".
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "pvesandbox/common/log.h"
#include "resolver.h"
#include "resolver_limits.h"

namespace {

constexpr const char* kUsage =
    "usage: pve-sandbox-resolver [--config PATH] [check-config [--unit FILE]... "
    "[--agent-config FILE]]";

// The limits of `config` against the unit (files given, else the installed ones) and the agent.
int check_config(const pvs::resolver::ResolverConfig& config, std::vector<std::string> units,
                 std::string agent_config) {
  if (units.empty()) units = pvs::resolver::installed_unit_files();
  auto unit = pvs::resolver::read_unit_limits(units);
  if (!unit) {
    pvs::log::error(unit.error().message);
    return 1;
  }
  std::optional<std::uint64_t> max_clients;
  bool explicit_agent = !agent_config.empty();
  if (!explicit_agent) agent_config = "/etc/pve-sandbox/agent.yaml";
  if (explicit_agent || ::access(agent_config.c_str(), R_OK) == 0) {
    auto read = pvs::resolver::read_agent_max_clients(agent_config);
    if (!read) {
      pvs::log::error(read.error().message);
      return 1;
    }
    max_clients = *read;
  }
  if (auto ok = pvs::resolver::check_limits(config, *unit, max_clients); !ok) {
    pvs::log::error(ok.error().message);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path(pvs::resolver::kDefaultConfigPath);
  bool check_only = false;
  std::vector<std::string> units;
  std::string agent_config;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (arg == "check-config" || arg == "--check-config") {
      check_only = true;
    } else if (arg == "--unit" && i + 1 < argc) {
      units.push_back(argv[++i]);
    } else if (arg == "--agent-config" && i + 1 < argc) {
      agent_config = argv[++i];
    } else {
      pvs::log::error(kUsage);
      return 2;
    }
  }
  auto config = pvs::resolver::load_config(config_path);
  if (!config) {
    pvs::log::error(config.error().message);
    return 1;
  }
  if (check_only) return check_config(*config, units, agent_config);
  pvs::log::Level level;
  if (pvs::log::parse_level(config->log_level, &level)) pvs::log::set_level(level);
  // Signals are taken by sigwait() below, never by the worker threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR1);  // the egress log's aggregates, now
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  pvs::resolver::Resolver resolver(*config);
  if (auto ok = resolver.open(); !ok) {
    pvs::log::error(ok.error().message);
    return 1;
  }
  if (auto ok = resolver.start(); !ok) {
    pvs::log::error(ok.error().message);
    return 1;
  }
  pvs::log::info(std::string("pve-sandbox-resolver ") + PVS_VERSION + " on " +
                 config->listen.to_string() + ":" + std::to_string(config->port) + " udp+tcp, " +
                 std::to_string(config->upstreams.size()) + " upstream(s), agent " +
                 config->agent_socket);
  int sig = 0;
  do {
    sigwait(&signals, &sig);
    if (sig == SIGUSR1) resolver.flush_egress_log();
  } while (sig == SIGHUP || sig == SIGUSR1);
  pvs::log::info(std::string("stopping on ") + strsignal(sig));
  resolver.stop();
  const auto& s = resolver.stats();
  pvs::log::info(
      "queries=" + std::to_string(s.queries) + " answered=" + std::to_string(s.answered) +
      " refused=" + std::to_string(s.refused) + " failed=" + std::to_string(s.failed) +
      " limited=" + std::to_string(s.limited) + " outsider=" + std::to_string(s.outsider) +
      " tcp_refused=" + std::to_string(s.tcp_refused) +
      " log_lines=" + std::to_string(s.log_lines) + " log_failed=" + std::to_string(s.log_failed));
  return 0;
}
