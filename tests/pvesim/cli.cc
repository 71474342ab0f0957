// pvesim's command line: the options as a table (flag -> what it sets), the usage text.
#include "cli.h"

#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string_view>

#include "pvesandbox/common/log.h"
#include "timing.h"

namespace pvesim {
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

bool parse_fault(const std::string& text, FaultRule* rule) {
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
bool parse_node_def(const std::string& text, const NetnsOptions& base, NodeOptions* node) {
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

// The state a row of the table writes: the options, and what is resolved once every option
// is known (node definitions take their netns keys from the other flags).
struct Parsing {
  CommandLine cli;
  bool templates_given = false;
  std::vector<std::string> node_defs;
};

// An option that takes a value: sets it, or answers false for a value it cannot take (an
// exception from std::stoi counts as false too).
using Setter = std::function<bool(Parsing&, const std::string&)>;

// A setter that cannot refuse its value (std::stoi may still throw).
template <typename F>
Setter always(F set) {
  return [set](Parsing& p, const std::string& v) {
    set(p, v);
    return true;
  };
}

Setter text(std::string Options::*field) {
  return always([field](Parsing& p, const std::string& v) { p.cli.options.*field = v; });
}
Setter netns_text(std::string NetnsOptions::*field) {
  return always([field](Parsing& p, const std::string& v) { p.cli.options.netns.*field = v; });
}
Setter number(int Options::*field) {
  return always([field](Parsing& p, const std::string& v) { p.cli.options.*field = std::stoi(v); });
}

bool token_file(Parsing& p, const std::string& text) {
  std::string id, path, secret;
  if (!split_eq(text, &id, &path)) return false;
  std::ifstream in(path);
  if (!in || !std::getline(in, secret)) return false;
  p.cli.options.tokens[id] = secret;
  return true;
}

bool timing(Parsing& p, const std::string& name) {
  auto profile = timing_profile(name);
  for (auto& [type, ms] : profile) p.cli.options.task_ms[type] = ms;
  return !profile.empty();
}

bool template_vmid(Parsing& p, const std::string& vmid) {
  if (!p.templates_given) p.cli.options.templates.clear();
  p.templates_given = true;
  p.cli.options.templates.push_back(std::stoi(vmid));
  return true;
}

bool shared_template(Parsing& p, const std::string& text) {
  auto at = text.find('@');
  p.cli.options.shared_templates.push_back(
      {std::stoi(text.substr(0, at)), at == std::string::npos ? "" : text.substr(at + 1)});
  return true;
}

bool log_level(Parsing&, const std::string& name) {
  pvs::log::Level level;
  if (!pvs::log::parse_level(name, &level)) return false;
  pvs::log::set_level(level);
  return true;
}

// Options with a value (the usage text above says what each is).
const std::map<std::string_view, Setter>& valued() {
  static const std::map<std::string_view, Setter> table{
      {"--listen", text(&Options::listen)},
      {"--port", number(&Options::port)},
      {"--node", text(&Options::node)},
      {"--node-def", always([](Parsing& p, const std::string& v) { p.node_defs.push_back(v); })},
      {"--shared-template", shared_template},
      {"--schema", text(&Options::schema_file)},
      {"--token",
       [](Parsing& p, const std::string& v) {
         std::string id, secret;
         if (!split_eq(v, &id, &secret)) return false;
         p.cli.options.tokens[id] = secret;
         return true;
       }},
      {"--token-file", token_file},
      {"--auth-delay-ms", number(&Options::auth_delay_ms)},
      {"--task-ms",
       [](Parsing& p, const std::string& v) {
         std::string type, ms;
         if (!split_eq(v, &type, &ms)) return false;
         p.cli.options.task_ms[type] = std::stoi(ms);
         return true;
       }},
      {"--default-task-ms", number(&Options::default_task_ms)},
      {"--timing", timing},
      {"--latency-ms", number(&Options::latency_ms)},
      {"--fault",
       [](Parsing& p, const std::string& v) {
         FaultRule rule;
         if (!parse_fault(v, &rule)) return false;
         p.cli.options.faults.push_back(rule);
         return true;
       }},
      {"--fail-task",
       [](Parsing& p, const std::string& v) {
         auto eq = v.find('=');
         if (eq == std::string::npos) return false;
         p.cli.options.fail_tasks[v.substr(0, eq)] = v.substr(eq + 1);
         return true;
       }},
      {"--lock",
       [](Parsing& p, const std::string& v) {
         std::string vmid, lock;
         if (!split_eq(v, &vmid, &lock)) return false;
         p.cli.options.locks[std::stoi(vmid)] = lock;
         return true;
       }},
      {"--interfaces-delay-ms", number(&Options::interfaces_delay_ms)},
      {"--rrd-delay-ms", number(&Options::rrd_delay_ms)},
      {"--rrd-step-seconds", number(&Options::rrd_step_seconds)},
      {"--template", template_vmid},
      {"--template-disk", text(&Options::template_disk)},
      {"--pool",
       always([](Parsing& p, const std::string& v) { p.cli.options.pools.push_back(v); })},
      {"--dhcp-cidr", text(&Options::dhcp_cidr)},
      {"--backend", text(&Options::backend)},
      {"--bridge", netns_text(&NetnsOptions::bridge)},
      {"--bridge-cidr", netns_text(&NetnsOptions::bridge_cidr)},
      {"--gateway", netns_text(&NetnsOptions::gateway)},
      {"--ns-prefix", netns_text(&NetnsOptions::ns_prefix)},
      {"--node-netns", netns_text(&NetnsOptions::node_netns)},
      {"--authorized-keys", netns_text(&NetnsOptions::authorized_keys)},
      {"--sshd", netns_text(&NetnsOptions::sshd_path)},
      {"--ssh-user", netns_text(&NetnsOptions::user)},
      {"--ssh-port", always([](Parsing& p, const std::string& v) {
         p.cli.options.netns.ssh_port = std::stoi(v);
       })},
      {"--dhcp-client", netns_text(&NetnsOptions::dhcp_client)},
      {"--lxc-rootfs", netns_text(&NetnsOptions::lxc_rootfs)},
      {"--lxc-dir", netns_text(&NetnsOptions::lxc_dir)},
      {"--info-file", always([](Parsing& p, const std::string& v) { p.cli.info_file = v; })},
      {"--log-level", log_level},
  };
  return table;
}

// Options without a value.
const std::map<std::string_view, std::function<void(Parsing&)>>& bare() {
  static const std::map<std::string_view, std::function<void(Parsing&)>> table{
      {"--help", [](Parsing& p) { p.cli.help = true; }},
      {"-h", [](Parsing& p) { p.cli.help = true; }},
      {"--no-template",
       [](Parsing& p) {
         p.templates_given = true;
         p.cli.options.templates.clear();
       }},
      {"--nextid-number", [](Parsing& p) { p.cli.options.nextid_as_number = true; }},
      {"--no-create-bridge", [](Parsing& p) { p.cli.options.netns.create_bridge = false; }},
      {"--private-tmp", [](Parsing& p) { p.cli.options.netns.private_tmp = true; }},
      {"--lxc-sweep", [](Parsing& p) { p.cli.sweep_only = true; }},
  };
  return table;
}

pvs::Status take(Parsing& p, const std::vector<std::string>& args, std::size_t& i) {
  const std::string& arg = args[i];
  if (auto flag = bare().find(arg); flag != bare().end()) {
    flag->second(p);
    return {};
  }
  auto option = valued().find(arg);
  if (option == valued().end())
    return pvs::fail(pvs::ErrorCode::kInvalidArgument, "unknown option " + arg);
  if (i + 1 >= args.size())
    return pvs::fail(pvs::ErrorCode::kInvalidArgument, arg + " needs a value");
  const std::string& value = args[++i];
  bool ok = false;
  try {
    ok = option->second(p, value);
  } catch (const std::exception&) {
  }
  if (!ok)
    return pvs::fail(pvs::ErrorCode::kInvalidArgument, "bad value for " + arg + ": " + value);
  return {};
}

}  // namespace

const char* usage() {
  return kUsage;
}

pvs::Result<CommandLine> parse_command_line(const std::vector<std::string>& args) {
  Parsing p;
  for (std::size_t i = 0; i < args.size(); ++i)
    if (auto st = take(p, args, i); !st) return pvs::fail(st.error());
  if (p.cli.help || p.cli.sweep_only) return p.cli;
  for (const auto& def : p.node_defs) {
    NodeOptions node;
    bool ok = false;
    try {
      ok = parse_node_def(def, p.cli.options.netns, &node);
    } catch (const std::exception&) {
    }
    if (!ok) return pvs::fail(pvs::ErrorCode::kInvalidArgument, "bad --node-def " + def);
    p.cli.options.nodes.push_back(node);
  }
  if (p.cli.options.tokens.empty())
    return pvs::fail(pvs::ErrorCode::kInvalidArgument, "give at least one --token ID=SECRET");
  return p.cli;
}

}  // namespace pvesim
