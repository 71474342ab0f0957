// pvesim: command-line front end of the Proxmox VE API simulator. See README.md.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "backend.h"
#include "cli.h"
#include "pvesandbox/common/log.h"
#include "sim.h"

namespace {

// Runs the simulator until SIGINT or SIGTERM.
int serve(const pvesim::CommandLine& cli) {
  // Block the signals before any thread starts, then wait for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto sim = pvesim::Simulator::start(cli.options);
  if (!sim) {
    std::fprintf(stderr, "pvesim: %s\n", sim.error().to_string().c_str());
    return 1;
  }
  std::string info = "port=" + std::to_string((*sim)->port()) +
                     "\nfingerprint=" + (*sim)->fingerprint() + "\ncert=" + (*sim)->cert_file() +
                     "\nssh_host_key=" + (*sim)->ssh_host_key_fingerprint() +
                     "\nlxc_run=" + (*sim)->lxc_run_dir() + "\n";
  if (!cli.info_file.empty()) {
    std::string tmp = cli.info_file + ".tmp";
    std::ofstream(tmp) << info;
    std::rename(tmp.c_str(), cli.info_file.c_str());
  }
  std::printf("pvesim listening on https://%s:%d backend=%s fingerprint=%s\n",
              cli.options.listen.c_str(), (*sim)->port(), cli.options.backend.c_str(),
              (*sim)->fingerprint().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  pvs::log::info("pvesim: stopping");
  sim->reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto cli = pvesim::parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
  if (!cli) {
    std::fprintf(stderr, "pvesim: %s\n%s", cli.error().message.c_str(), pvesim::usage());
    return 2;
  }
  if (cli->help) {
    std::fputs(pvesim::usage(), stdout);
    return 0;
  }
  if (cli->sweep_only) {
    std::printf("pvesim: swept %d dead lxc run(s)\n",
                pvesim::lxc_sweep(cli->options.netns.lxc_dir));
    return 0;
  }
  return serve(*cli);
}
