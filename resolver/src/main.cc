// pve-sandbox-resolver [--config PATH] [check-config]: see docs/agent.md "The egress resolver".
#include <signal.h>

#include <cstring>
#include <string>

#include "pvesandbox/common/log.h"
#include "resolver.h"

int main(int argc, char** argv) {
  std::string config_path(pvs::resolver::kDefaultConfigPath);
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--config" && i + 1 < argc) {
      config_path = argv[++i];
    } else if (arg == "check-config") {
      check_only = true;
    } else {
      pvs::log::error("usage: pve-sandbox-resolver [--config PATH] [check-config]");
      return 2;
    }
  }
  auto config = pvs::resolver::load_config(config_path);
  if (!config) {
    pvs::log::error(config.error().message);
    return 1;
  }
  if (check_only) return 0;
  pvs::log::Level level;
  if (pvs::log::parse_level(config->log_level, &level)) pvs::log::set_level(level);
  // Signals are taken by sigwait() below, never by the worker threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  pvs::resolver::Resolver resolver(*config);
  if (auto ok = resolver.open(); !ok) {
    pvs::log::error(ok.error().message);
    return 1;
  }
  resolver.start();
  pvs::log::info(std::string("pve-sandbox-resolver ") + PVS_VERSION + " on " +
                 config->listen.to_string() + ":" + std::to_string(config->port) + " udp+tcp, " +
                 std::to_string(config->upstreams.size()) + " upstream(s), agent " +
                 config->agent_socket);
  int sig = 0;
  do {
    sigwait(&signals, &sig);
  } while (sig == SIGHUP);
  pvs::log::info(std::string("stopping on ") + strsignal(sig));
  resolver.stop();
  const auto& s = resolver.stats();
  pvs::log::info("queries=" + std::to_string(s.queries) + " answered=" +
                 std::to_string(s.answered) + " refused=" + std::to_string(s.refused) +
                 " failed=" + std::to_string(s.failed) + " limited=" + std::to_string(s.limited));
  return 0;
}
