// pvesim: command-line front end of the Proxmox VE API simulator. See README.md.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"
#include "pvesandbox/common/log.h"
#include "sim.h"
#include "timing.h"

namespace {

const char* kUsage = R"(usage: pvesim [options]
  --listen ADDR            address to listen on (127.0.0.1)
  --port N                 port (0: any free port; see --info-file)
  --node NAME              node name (pve)
  --node-def SPEC          a cluster node (repeatable; replaces --node/--template): SPEC is
                           name=N[,templates=V:V..][,maxmem=SIZE][,base-mem=SIZE][,maxcpu=N]
                           [,bridge=B][,bridge-cidr=C][,gateway=G][,ns-prefix=P]
                           [,node-netns=NS]; SIZE like 64G, 512M or bytes; unset netns keys
                           come from --bridge, --ns-prefix, ... (defaults 64G, 2G, 16)
  --shared-template VMID[@NODE]  template on shared storage shared-rbd, clonable with
                           target=<any node> (repeatable; NODE default: the first node)
  --schema FILE            request schema (the pve-schema.json next to the sources)
  --token ID=SECRET        accepted API token, e.g. root@pam!test=uuid (repeatable)
  --token-file ID=PATH     same, secret read from the first line of PATH
  --auth-delay-ms N        delay before a 401 (3000, as pveproxy)
  --task-ms TYPE=MS        duration of tasks of TYPE (vzclone, vzstart, ...) (repeatable)
  --default-task-ms MS     duration of other tasks (50)
  --timing fast|realistic  task durations of a named profile (README.md cites the realistic
                           one); a later --task-ms overrides one type
  --latency-ms N           added to every API request (0)
  --fault 'METHOD PATH=STATUS[:RATE[:COUNT[:MESSAGE]]]'
                           e.g. 'POST /nodes/{node}/lxc/{vmid}/clone=595:1:2' (repeatable;
                           METHOD and PATH may be *)
  --fail-task TYPE=MSG     tasks of TYPE end with 'TASK ERROR: MSG' (repeatable); a MSG
                           'WARNINGS: n' makes them succeed with warnings
  --lock VMID=LOCK         a stuck lock on a CT present at start (e.g. 9000=backup)
  --interfaces-delay-ms N  started CTs report no IPv4 for N ms (DHCP)
  --rrd-delay-ms N         new guests show status 'unknown' in /cluster/resources for N ms
  --rrd-step-seconds N     rrddata's step for timeframe=hour (60; the others scale with it)
  --template VMID          template CT present at start (repeatable; default 9000)
  --no-template            start without any template
  --template-disk SIZE     rootfs size of the templates present at start (8G)
  --pool NAME              pool present at start (repeatable)
  --nextid-number          answer /cluster/nextid with a JSON number (real: a string)
  --dhcp-cidr CIDR         simulated DHCP range for ip=dhcp (10.99.0.0/16)
  --backend model|netns|lxc  what a started CT is (model)
  netns and lxc backends:
  --bridge NAME            bridge the CT veths join (pvesimbr0)
  --bridge-cidr ADDR/LEN   host address on the bridge, when pvesim creates it (10.99.0.1/16)
  --gateway ADDR            default route of CTs with ip=dhcp (the --bridge-cidr address)
  --no-create-bridge       use an existing bridge
  --ns-prefix P            namespace name prefix (pvesim-)
  --node-netns NS          the node's bridge and the CTs' host veth ends live in network
                           namespace NS (/run/netns/NS) instead of pvesim's
  --authorized-keys FILE   public key(s) the CT's sshd accepts (required)
  --sshd PATH              sshd binary (/usr/sbin/sshd)
  --ssh-user NAME          user allowed to log in (root)
  --private-tmp            each CT's sshd and sessions get their own tmpfs /tmp
  --ssh-port N             sshd port inside the CT (22)
  --dhcp-client PATH       ip=dhcp CTs run `PATH run <ifname>` (a real DHCP exchange, e.g.
                           tests/pvesim/dhcp-client.sh) instead of the simulated lease
  lxc backend (each CT an unprivileged LXC container; also --bridge, --bridge-cidr,
  --gateway, --no-create-bridge, --node-netns, --authorized-keys for root, --dhcp-client):
  --lxc-rootfs DIR         the template's root file system (built by scripts/lxc-rootfs)
  --lxc-dir DIR            where the run's containers, disks and config live (/tmp)
  --lxc-sweep              only remove what killed runs left under --lxc-dir, then exit
  --info-file PATH         write port=, fingerprint=, cert= lines once listening
  --log-level LEVEL        debug|info|warn|error
)";

bool split_eq(const std::string& text, std::string* key, std::string* value) {
  auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0) return false;
  *key = text.substr(0, eq);
  *value = text.substr(eq + 1);
  return true;
}

bool parse_fault(const std::string& text, pvesim::FaultRule* rule) {
  // "METHOD PATH=STATUS[:RATE[:COUNT[:MESSAGE]]]"
  auto eq = text.find('=');
  auto sp = text.find(' ');
  if (eq == std::string::npos || sp == std::string::npos || sp > eq) return false;
  rule->method = text.substr(0, sp);
  rule->path = text.substr(sp + 1, eq - sp - 1);
  std::string rest = text.substr(eq + 1);
  std::string fields[4];
  for (int i = 0; i < 4 && !rest.empty(); ++i) {
    auto colon = i == 3 ? std::string::npos : rest.find(':');
    fields[i] = rest.substr(0, colon);
    rest = colon == std::string::npos ? "" : rest.substr(colon + 1);
  }
  try {
    rule->status = std::stoi(fields[0]);
    if (!fields[1].empty()) rule->rate = std::stod(fields[1]);
    if (!fields[2].empty()) rule->count = std::stoi(fields[2]);
  } catch (const std::exception&) {
    return false;
  }
  if (!fields[3].empty())
    rule->message = fields[3];
  else if (rule->status == 595)
    rule->message = "Errors during connection establishment, proxy handshake: No route to host";
  else if (rule->status == 596)
    rule->message = "Connection timed out";
  return true;
}

// "64G", "512M", "1024K", "1T" or bytes.
bool parse_bytes(const std::string& text, std::uint64_t* out) {
  std::size_t used = 0;
  unsigned long long number = std::stoull(text, &used);
  std::string unit = text.substr(used);
  int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : -1;
  if (unit == "T") shift = 40;
  if (shift < 0) return false;
  *out = static_cast<std::uint64_t>(number) << shift;
  return true;
}

// --node-def: "name=pve2,templates=9001:9002,maxmem=64G,...", netns keys over `base`.
bool parse_node_def(const std::string& text, const pvesim::NetnsOptions& base,
                    pvesim::NodeOptions* node) {
  node->netns = base;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    auto eq = item.find('=');
    if (eq == std::string::npos) return false;
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "name") {
      node->name = value;
    } else if (key == "templates") {
      std::stringstream list(value);
      for (std::string vmid; std::getline(list, vmid, ':');)
        node->templates.push_back(std::stoi(vmid));
    } else if (key == "maxmem" || key == "base-mem") {
      if (!parse_bytes(value, key == "maxmem" ? &node->maxmem : &node->base_mem)) return false;
    } else if (key == "maxcpu") {
      node->maxcpu = std::stoi(value);
    } else if (key == "bridge") {
      node->netns.bridge = value;
    } else if (key == "bridge-cidr") {
      node->netns.bridge_cidr = value;
    } else if (key == "gateway") {
      node->netns.gateway = value;
    } else if (key == "ns-prefix") {
      node->netns.ns_prefix = value;
    } else if (key == "node-netns") {
      node->netns.node_netns = value;
    } else {
      return false;
    }
  }
  return !node->name.empty();
}

}  // namespace

int main(int argc, char** argv) {
  pvesim::Options options;
  std::string info_file;
  bool sweep_only = false;
  bool templates_given = false;
  std::vector<std::string> node_defs;  // parsed once the netns flags are all known
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "pvesim: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    std::string k, v;
    try {
      if (arg == "--help" || arg == "-h") {
        std::fputs(kUsage, stdout);
        return 0;
      } else if (arg == "--listen")
        options.listen = next();
      else if (arg == "--port")
        options.port = std::stoi(next());
      else if (arg == "--node")
        options.node = next();
      else if (arg == "--node-def")
        node_defs.push_back(next());
      else if (arg == "--shared-template") {
        std::string text = next();
        auto at = text.find('@');
        options.shared_templates.push_back(
            {std::stoi(text.substr(0, at)), at == std::string::npos ? "" : text.substr(at + 1)});
      } else if (arg == "--node-netns")
        options.netns.node_netns = next();
      else if (arg == "--schema")
        options.schema_file = next();
      else if (arg == "--token" && split_eq(next(), &k, &v))
        options.tokens[k] = v;
      else if (arg == "--token-file" && split_eq(next(), &k, &v)) {
        std::ifstream in(v);
        std::string secret;
        if (!in || !std::getline(in, secret)) {
          std::fprintf(stderr, "pvesim: cannot read %s\n", v.c_str());
          return 2;
        }
        options.tokens[k] = secret;
      } else if (arg == "--auth-delay-ms")
        options.auth_delay_ms = std::stoi(next());
      else if (arg == "--task-ms" && split_eq(next(), &k, &v))
        options.task_ms[k] = std::stoi(v);
      else if (arg == "--timing") {
        auto profile = pvesim::timing_profile(next());
        if (profile.empty()) {
          std::fprintf(stderr, "pvesim: --timing: fast or realistic\n");
          return 2;
        }
        for (auto& [type, ms] : profile) options.task_ms[type] = ms;
      } else if (arg == "--default-task-ms")
        options.default_task_ms = std::stoi(next());
      else if (arg == "--latency-ms")
        options.latency_ms = std::stoi(next());
      else if (arg == "--fault") {
        pvesim::FaultRule rule;
        if (!parse_fault(next(), &rule)) {
          std::fprintf(stderr, "pvesim: bad --fault\n");
          return 2;
        }
        options.faults.push_back(rule);
      } else if (arg == "--fail-task") {
        std::string text = next();
        auto eq = text.find('=');
        if (eq == std::string::npos) return 2;
        options.fail_tasks[text.substr(0, eq)] = text.substr(eq + 1);
      } else if (arg == "--lock" && split_eq(next(), &k, &v)) {
        options.locks[std::stoi(k)] = v;
      } else if (arg == "--interfaces-delay-ms")
        options.interfaces_delay_ms = std::stoi(next());
      else if (arg == "--rrd-delay-ms")
        options.rrd_delay_ms = std::stoi(next());
      else if (arg == "--rrd-step-seconds")
        options.rrd_step_seconds = std::stoi(next());
      else if (arg == "--template-disk")
        options.template_disk = next();
      else if (arg == "--template") {
        if (!templates_given) options.templates.clear();
        templates_given = true;
        options.templates.push_back(std::stoi(next()));
      } else if (arg == "--no-template") {
        templates_given = true;
        options.templates.clear();
      } else if (arg == "--pool")
        options.pools.push_back(next());
      else if (arg == "--dhcp-cidr")
        options.dhcp_cidr = next();
      else if (arg == "--backend")
        options.backend = next();
      else if (arg == "--bridge")
        options.netns.bridge = next();
      else if (arg == "--bridge-cidr")
        options.netns.bridge_cidr = next();
      else if (arg == "--no-create-bridge")
        options.netns.create_bridge = false;
      else if (arg == "--ns-prefix")
        options.netns.ns_prefix = next();
      else if (arg == "--authorized-keys")
        options.netns.authorized_keys = next();
      else if (arg == "--sshd")
        options.netns.sshd_path = next();
      else if (arg == "--ssh-user")
        options.netns.user = next();
      else if (arg == "--dhcp-client")
        options.netns.dhcp_client = next();
      else if (arg == "--ssh-port")
        options.netns.ssh_port = std::stoi(next());
      else if (arg == "--private-tmp")
        options.netns.private_tmp = true;
      else if (arg == "--lxc-rootfs")
        options.netns.lxc_rootfs = next();
      else if (arg == "--lxc-dir")
        options.netns.lxc_dir = next();
      else if (arg == "--lxc-sweep")
        sweep_only = true;
      else if (arg == "--info-file")
        info_file = next();
      else if (arg == "--log-level") {
        pvs::log::Level level;
        if (!pvs::log::parse_level(next(), &level)) return 2;
        pvs::log::set_level(level);
      } else {
        std::fprintf(stderr, "pvesim: unknown or malformed option %s\n%s", arg.c_str(), kUsage);
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "pvesim: bad value for %s\n", arg.c_str());
      return 2;
    }
  }
  if (sweep_only) {
    std::printf("pvesim: swept %d dead lxc run(s)\n", pvesim::lxc_sweep(options.netns.lxc_dir));
    return 0;
  }
  for (const auto& def : node_defs) {
    pvesim::NodeOptions node;
    bool ok = false;
    try {
      ok = parse_node_def(def, options.netns, &node);
    } catch (const std::exception&) {
    }
    if (!ok) {
      std::fprintf(stderr, "pvesim: bad --node-def %s\n", def.c_str());
      return 2;
    }
    options.nodes.push_back(node);
  }
  if (options.tokens.empty()) {
    std::fprintf(stderr, "pvesim: give at least one --token ID=SECRET\n");
    return 2;
  }
  // Block the signals before any thread starts, then wait for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto sim = pvesim::Simulator::start(options);
  if (!sim) {
    std::fprintf(stderr, "pvesim: %s\n", sim.error().to_string().c_str());
    return 1;
  }
  std::string info = "port=" + std::to_string((*sim)->port()) +
                     "\nfingerprint=" + (*sim)->fingerprint() + "\ncert=" + (*sim)->cert_file() +
                     "\nssh_host_key=" + (*sim)->ssh_host_key_fingerprint() +
                     "\nlxc_run=" + (*sim)->lxc_run_dir() + "\n";
  if (!info_file.empty()) {
    std::string tmp = info_file + ".tmp";
    std::ofstream(tmp) << info;
    std::rename(tmp.c_str(), info_file.c_str());
  }
  std::printf("pvesim listening on https://%s:%d backend=%s fingerprint=%s\n",
              options.listen.c_str(), (*sim)->port(), options.backend.c_str(),
              (*sim)->fingerprint().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  pvs::log::info("pvesim: stopping");
  sim->reset();
  return 0;
}
