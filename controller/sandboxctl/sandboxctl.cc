// sandboxctl: a command-line client for the pve-sandbox REST API. See docs/cli.md.
//
//   sandboxctl create --internet --label team=ml      # prints the new sandbox
//   sandboxctl exec sb-0123456789ab -- python3 -c 'print(42)'   # exit code = the command's
//   sandboxctl cp ./in.txt sb-0123456789ab:/tmp/in.txt
//
// Server, token and CA come from flags (--url, --token, --cacert), the environment
// (SANDBOXCTL_URL, SANDBOXCTL_TOKEN, SANDBOXCTL_CACERT) or a config file (--config,
// SANDBOXCTL_CONFIG, else ~/.config/sandboxctl/config.yaml with keys url, token or token_file,
// cacert), in that order.
#include <curl/curl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/JSON/Stringifier.h>
#include <yaml-cpp/yaml.h>

#include "pvesandbox/common/text.h"
#include "sandboxctl.h"

using namespace pvs::cli;

namespace {

const char* kUsage =
    R"(usage: sandboxctl [--url URL] [--token TOKEN] [--cacert FILE] [--config FILE] [--json]
                  COMMAND ...

commands:
  create [--cpus N] [--memory MB] [--disk GB] [--internet] [--ttl SECONDS]
         [--on-expiry destroy|pause] [--auto-resume]   what the TTL's end does
         [--allow NAME]... [--ports 80,443] | [--list L]   egress to these hosts only
         [--label KEY=VALUE]... [--hostname NAME] [--profile NAME] [--template NAME]
         [--node NAME] [--node-selector KEY=VALUE]...
         [--volume NAME:PATH[:ro]]...   mount your volume at PATH (read-only with :ro)
  list [--label KEY=VALUE]...
  show ID
  ports ID                   what listens in the sandbox, with each port's preview path
  usage ID [--since S] [--until U]
                             what it used over time (Proxmox's history; unix seconds)
  preview ID PORT [--expires SECONDS]
                             a link to the port a browser opens without the token
  pause ID                   stop it with its files kept (processes end)
  resume ID [--ttl SECONDS]  start a paused sandbox again
  exec ID [--cwd DIR] [--env NAME=VALUE]... [--timeout SECONDS] [--stdin] -- COMMAND...
  shell ID [-- COMMAND...]   an interactive terminal (default: the login shell)
  cp SRC DST            one side is ID:/path; '-' is stdin/stdout   [--mode 0644]
  ls ID PATH
  edit ID PATH --old TEXT --new TEXT [--all]
                        replace TEXT (once; every occurrence with --all); prints the diff
  internet ID on|off    all HTTP/HTTPS egress, or none
  internet ID allow NAME... [--ports 80,443]
                        egress only to these DNS names (*.example.com: its subdomains)
  internet ID allow --list L   an operator's named allowlist
  internet ID log [--since MS] [--limit N]
                        what its allowlist allowed and refused, per name and window
  ttl ID SECONDS
  snapshot ID NAME [--description TEXT]
  snapshots ID
  rollback ID NAME
  delete-snapshot ID NAME
  capture ID [NAME]     a template of its files now (yours; create --template NAME)
  fork ID [--count N] [--ttl SECONDS]   N sandboxes of its files now, all or none
  destroy ID...
  health
  pool                  the hot pools and the warm pool (admin token)
  nodes                 the cluster's nodes: health, capacity, pools (admin token)
  node drain|undrain NAME   stop or resume placing sandboxes on a node (admin token)
  template build FILE   build a custom template from a recipe, its output as it goes (admin)
  template list | rm NAME   the custom templates (the operator's and your captures); delete
                        one nothing uses (your capture, or any with an admin token)
  volume create NAME [--size GB] [--node NAME]   a disk of yours that outlives sandboxes
  volume list | show ID | rm ID | resize ID GB
  audit [--limit N] [--action A] [--sandbox ID]   the audit log's last records (admin token)
  approvals [list [--all]]  pending approvals (approver or admin token: everyone's)
  approvals watch [--interval-ms N] [--count N]   print approvals as they turn up and are decided
  approvals approve ID      let the waiting call go through
  approvals deny ID [--reason TEXT]   refuse it; the caller sees the reason

exec exits with the remote command's exit code (124 if it timed out); so does shell.
--cacert FILE: PEM CA (or self-signed certificate) that an https:// server must chain to;
without it the system's CA store is used. The server's name is always verified.
environment: SANDBOXCTL_URL, SANDBOXCTL_TOKEN, SANDBOXCTL_CACERT, SANDBOXCTL_CONFIG
)";

// Fills url/token from the config file for what flags and environment left empty.
void load_file_config(Options& o, std::string path) {
  bool explicit_path = !path.empty();
  if (path.empty()) {
    if (const char* e = std::getenv("SANDBOXCTL_CONFIG")) {
      path = e;
      explicit_path = true;
    } else if (const char* home = std::getenv("HOME")) {
      path = std::string(home) + "/.config/sandboxctl/config.yaml";
    }
  }
  if (path.empty()) return;
  std::ifstream in(path);
  if (!in) {
    if (explicit_path) throw std::runtime_error("cannot read config " + path);
    return;
  }
  std::ostringstream text;
  text << in.rdbuf();
  YAML::Node root = YAML::Load(text.str());
  if (!root.IsMap()) throw std::runtime_error(path + ": must be a mapping");
  for (auto it = root.begin(); it != root.end(); ++it) {
    std::string k = it->first.as<std::string>();
    if (k != "url" && k != "token" && k != "token_file" && k != "cacert") {
      throw std::runtime_error(path + ": " + k + ": unknown key");
    }
  }
  if (o.url.empty() && root["url"]) o.url = root["url"].as<std::string>();
  if (o.cacert.empty() && root["cacert"]) o.cacert = root["cacert"].as<std::string>();
  if (o.token.empty() && root["token"]) o.token = root["token"].as<std::string>();
  if (o.token.empty() && root["token_file"]) {
    std::ifstream t(root["token_file"].as<std::string>());
    if (!t) throw std::runtime_error(path + ": token_file: cannot read it");
    std::getline(t, o.token);
  }
}

// Each COMMAND and what runs it.
const std::map<std::string, int (*)(Client&, Args&)>& commands() {
  static const std::map<std::string, int (*)(Client&, Args&)> table = {
      {"create", cmd_create},
      {"list", cmd_list},
      {"show", cmd_show},
      {"ports", cmd_ports},
      {"usage", cmd_usage},
      {"preview", cmd_preview},
      {"pause", cmd_pause},
      {"resume", cmd_resume},
      {"exec", cmd_exec},
      {"shell", cmd_shell},
      {"cp", cmd_cp},
      {"ls", cmd_ls},
      {"edit", cmd_edit},
      {"internet", cmd_internet},
      {"ttl", cmd_ttl},
      {"snapshot", cmd_snapshot},
      {"snapshots", cmd_snapshots},
      {"rollback", cmd_rollback},
      {"capture", cmd_capture},
      {"fork", cmd_fork},
      {"delete-snapshot", cmd_delete_snapshot},
      {"destroy", cmd_destroy},
      {"health", cmd_health},
      {"pool", cmd_pool},
      {"nodes", cmd_nodes},
      {"node", cmd_node},
      {"template", cmd_template},
      {"audit", cmd_audit},
      {"approvals", cmd_approvals},
      {"volume", cmd_volume}};
  return table;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::string config_path;
  Args args;
  try {
    int i = 1;
    for (; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&](const std::string& flag) -> std::string {
        auto eq = a.find('=');
        if (eq != std::string::npos) return a.substr(eq + 1);
        if (i + 1 >= argc) throw UsageError(flag + " needs a value");
        return argv[++i];
      };
      if (a == "--json")
        options.json = true;
      else if (a == "--url" || a.rfind("--url=", 0) == 0)
        options.url = value("--url");
      else if (a == "--token" || a.rfind("--token=", 0) == 0)
        options.token = value("--token");
      else if (a == "--cacert" || a.rfind("--cacert=", 0) == 0)
        options.cacert = value("--cacert");
      else if (a == "--config" || a.rfind("--config=", 0) == 0)
        config_path = value("--config");
      else if (a == "-h" || a == "--help") {
        std::cout << kUsage;
        return 0;
      } else if (a.rfind("--", 0) == 0) {
        throw UsageError("unknown option " + a);
      } else {
        break;
      }
    }
    for (; i < argc; ++i) args.v.push_back(argv[i]);
    if (options.url.empty()) {
      if (const char* e = std::getenv("SANDBOXCTL_URL")) options.url = e;
    }
    if (options.token.empty()) {
      if (const char* e = std::getenv("SANDBOXCTL_TOKEN")) options.token = e;
    }
    if (options.cacert.empty()) {
      if (const char* e = std::getenv("SANDBOXCTL_CACERT")) options.cacert = e;
    }
    load_file_config(options, config_path);
    if (!options.cacert.empty() && !std::ifstream(options.cacert)) {
      throw std::runtime_error("--cacert: cannot read " + options.cacert);
    }
    if (options.url.empty()) options.url = "http://127.0.0.1:8787";
    if (!args.more()) throw UsageError("missing COMMAND");

    curl_global_init(CURL_GLOBAL_DEFAULT);
    Client client(options);
    std::string cmd = args.next("COMMAND");
    auto it = commands().find(cmd);
    if (it == commands().end()) throw UsageError("unknown command " + cmd);
    std::cout.flush();
    int rc = it->second(client, args);
    std::cout.flush();
    return rc;
  } catch (const UsageError& e) {
    std::cerr << "sandboxctl: " << pvs::terminal_safe(e.what()) << "\n\n" << kUsage;
    return kExitUsage;
  } catch (const Poco::Exception& e) {
    std::cerr << "sandboxctl: bad reply: " << pvs::terminal_safe(e.displayText()) << "\n";
    return kExitError;
  } catch (const std::exception& e) {
    std::cerr << "sandboxctl: " << pvs::terminal_safe(e.what()) << "\n";
    return kExitError;
  }
}
