// pve-sandbox-controller: the REST API service (see docs/operations.md).
#include <signal.h>

#include <condition_variable>
#include <iostream>
#include <thread>

#include <Poco/Util/HelpFormatter.h>
#include <Poco/Util/Option.h>
#include <Poco/Util/OptionSet.h>
#include <Poco/Util/ServerApplication.h>

#include "app/api.h"
#include "core/config/config.h"
#include "e2b/processes.h"
#include "http/auth.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/version.h"

namespace {

using Poco::Util::Application;
using Poco::Util::Option;
using Poco::Util::OptionSet;

class Controller : public Poco::Util::ServerApplication {
 protected:
  void defineOptions(OptionSet& options) override {
    ServerApplication::defineOptions(options);
    options.addOption(
        Option("config", "c", "configuration file")
            .argument("FILE")
            .callback(Poco::Util::OptionCallback<Controller>(this, &Controller::on_config)));
    options.addOption(
        Option("check-config", "", "validate the configuration, print a summary, exit")
            .callback(Poco::Util::OptionCallback<Controller>(this, &Controller::on_check)));
    options.addOption(
        Option("hash-token", "", "read a token on stdin, print its sha256 for auth.tokens")
            .callback(Poco::Util::OptionCallback<Controller>(this, &Controller::on_hash)));
    options.addOption(
        Option("new-token", "", "generate a token NAME and print it with its config entry")
            .argument("NAME")
            .callback(Poco::Util::OptionCallback<Controller>(this, &Controller::on_new_token)));
    options.addOption(
        Option("version", "v", "print the version")
            .callback(Poco::Util::OptionCallback<Controller>(this, &Controller::on_version)));
    options.addOption(
        Option("help", "h", "print this help")
            .callback(Poco::Util::OptionCallback<Controller>(this, &Controller::on_help)));
  }

  void on_config(const std::string&, const std::string& value) { config_path_ = value; }
  void on_check(const std::string&, const std::string&) { mode_ = Mode::kCheck; }
  void on_hash(const std::string&, const std::string&) {
    mode_ = Mode::kHash;
    stopOptionsProcessing();
  }
  void on_new_token(const std::string&, const std::string& value) {
    mode_ = Mode::kNewToken;
    token_name_ = value;
    stopOptionsProcessing();
  }
  void on_version(const std::string&, const std::string&) {
    mode_ = Mode::kVersion;
    stopOptionsProcessing();
  }
  void on_help(const std::string&, const std::string&) {
    mode_ = Mode::kHelp;
    stopOptionsProcessing();
  }

  int main(const std::vector<std::string>& args) override {
    if (!args.empty()) {
      std::cerr << "pve-sandbox-controller: unexpected argument " << args[0] << " (see --help)\n";
      return EXIT_USAGE;
    }
    switch (mode_) {
      case Mode::kHelp: {
        Poco::Util::HelpFormatter help(options());
        help.setCommand("pve-sandbox-controller");
        help.setUsage("[--config FILE] [--check-config] | --hash-token | --new-token NAME");
        help.setHeader("The pve-sandbox REST API service. Reference: docs/operations.md.");
        help.format(std::cout);
        return EXIT_OK;
      }
      case Mode::kVersion:
        std::cout << "pve-sandbox-controller " << pvs::version() << "\n";
        return EXIT_OK;
      case Mode::kHash: {
        std::string token;
        std::getline(std::cin, token);
        while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
        if (token.empty()) {
          std::cerr << "pve-sandbox-controller: no token on stdin\n";
          return EXIT_USAGE;
        }
        std::cout << pvs::service::sha256_hex(token) << "\n";
        return EXIT_OK;
      }
      case Mode::kNewToken: {
        std::string token = pvs::service::generate_token();
        std::cout << "token: " << token << "\n"
                  << "# give the token to the client; put this under auth.tokens:\n"
                  << "  - name: " << token_name_ << "\n"
                  << "    sha256: " << pvs::service::sha256_hex(token) << "\n";
        return EXIT_OK;
      }
      default: break;
    }
    auto config = pvs::service::load_config(config_path_);
    if (!config) {
      std::cerr << "pve-sandbox-controller: " << config.error().message << "\n";
      return EXIT_CONFIG;
    }
    if (mode_ == Mode::kCheck) {
      std::cout << pvs::service::describe(*config) << "configuration OK\n";
      return EXIT_OK;
    }
    pvs::ManagerConfig manager = config->manager;
    // Hot pool members write the E2B login snapshot before they are ready (docs/e2b.md).
    if (config->e2b_login_snapshot)
      manager.hot_pool_warmup = pvs::service::e2b::login_warmup_command();
    return serve(*config, manager);
  }

 private:
  enum class Mode { kServe, kCheck, kHash, kNewToken, kVersion, kHelp };

  int serve(const pvs::service::ServiceConfig& config, const pvs::ManagerConfig& manager_config) {
    pvs::log::Level level;
    if (pvs::log::parse_level(config.log_level, &level)) pvs::log::set_level(level);
    auto audit = pvs::service::AuditLog::open(config.audit_file, config.audit_fsync);
    if (!audit) {
      pvs::log::error(audit.error().message);
      return EXIT_CANTCREAT;
    }
    pvs::service::Metrics metrics;
    pvs::service::Api::declare_metrics(metrics);
    pvs::service::Api api(config, audit->get(), &metrics);
    pvs::service::HttpServer server(api.config(), api);
    if (auto st = server.start(); !st) {
      pvs::log::error(st.error().message);
      return EXIT_UNAVAILABLE;
    }
    pvs::log::info("pve-sandbox-controller " + std::string(pvs::version()) + " listening on " +
                   (config.tls_cert_file.empty() ? "http://" : "https://") + config.listen_address +
                   ":" + std::to_string(server.port()));
    if (config.tls_cert_file.empty() && config.listen_address.rfind("127.", 0) != 0) {
      pvs::log::warn("listening on " + config.listen_address +
                     " without TLS: bearer tokens cross the network in the clear; set "
                     "listen.tls.cert_file/key_file or listen on 127.0.0.1 behind a proxy");
    }
    if (config.manager.proxmox.base_url.rfind("http://", 0) == 0) {
      pvs::log::warn(
          "proxmox.url is plain http (insecure_http): the Proxmox API token is sent "
          "in the clear");
    }

    // Proxmox may be down at boot: keep trying to open the Manager; until then the API answers
    // 503 "starting" for sandbox calls and /v1/health says so.
    std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
    std::thread opener([&] {
      auto delay = std::chrono::seconds(1);
      while (true) {
        auto manager = pvs::Manager::open(manager_config);
        if (manager) {
          api.set_manager(std::shared_ptr<pvs::Manager>(std::move(*manager)));
          pvs::log::info("manager ready: " + std::to_string(api.manager()->list().size()) +
                         " sandboxes recovered");
          return;
        }
        pvs::log::warn("cannot open the manager (retrying in " + std::to_string(delay.count()) +
                       " s): " + manager.error().message);
        std::unique_lock lock(mu);
        if (cv.wait_for(lock, delay, [&] { return stopping; })) return;
        delay = std::min(delay * 2, std::chrono::seconds(30));
      }
    });

    // Signals are blocked in every thread (see run()); wait for them here.
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGQUIT, SIGHUP}) sigaddset(&set, s);
    while (true) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (sig == SIGHUP) {
        if (auto st = (*audit)->reopen(); !st) pvs::log::error(st.error().message);
        pvs::log::info("SIGHUP: audit log reopened");
        continue;
      }
      pvs::log::info(std::string("stopping on ") + (sig == SIGTERM ? "SIGTERM" : "signal"));
      break;
    }
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    cv.notify_all();
    server.stop();
    opener.join();  // Manager::open is bounded by its own timeouts
    api.set_manager(nullptr);
    return EXIT_OK;
  }

  std::string config_path_ = "/etc/pve-sandbox/controller.yaml";
  std::string token_name_;
  Mode mode_ = Mode::kServe;
};

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists: every thread inherits the mask, so SIGTERM can only be taken by
  // sigwait() in serve() (Poco threads and std::threads would otherwise die of it).
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGQUIT, SIGHUP}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Controller app;
  return app.run(argc, argv);
}
