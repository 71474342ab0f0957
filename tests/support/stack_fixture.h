// The whole pve-sandbox stack on one machine, for end-to-end tests and the demo:
//
//   node namespace "<id>-node" (the Proxmox node; this process enters it)
//     ├─ bridge vmbr1 10.99.0.1/16 (the sandbox bridge), lo up
//     ├─ nftables/sandbox.nft loaded (table inet sandbox + bridge sandbox_l2)
//     ├─ pve-sandbox-agent (the real binary) on <tmp>/agent.sock, uid 0 allowed
//     ├─ with StackOptions::dhcp: dnsmasq on vmbr1 answering only the reservations the agent
//     │  publishes in <tmp>/dhcp-hosts (as pve-sandbox-setup configures it); CTs with ip=dhcp
//     │  then get their address from it with a real DHCP client (tests/pvesim/dhcp-client.sh)
//     ├─ with StackOptions::egress (#20): pve-sandbox-resolver as nobody on 10.99.0.1:5353
//     │  (the ruleset's RESOLVER_PORT; agent.yaml resolver_uids: [65534]), forwarding to the
//     │  internet's DNS server; an uplink 203.0.113.2 -> namespace "<id>-internet" (router
//     │  203.0.113.1) holding an authoritative dnsmasq on kInternetDns for the zone "test"
//     │  (kEgressZone) and one HTTP server answering "hello from <address>" on port 80 of each
//     │  of its addresses (stack_egress.cc)
//     └─ pvesim in-process on 127.0.0.1 (HTTPS, pinned fingerprint), pool "pve-sandbox",
//        template 9000; backend "netns": every started CT is a namespace "<id>-<vmid>" on
//        vmbr1 running a real sshd that accepts the stack's ed25519 key for root
//
//   pvs::test::Stack stack;                          // throws std::runtime_error on failure
//   auto manager = pvs::Manager::open(stack.manager_config());
//   ...
//   stack.internet_set();                            // what `nft` says is in internet_allowed
//
// Cluster (StackOptions::nodes = N > 1): the calling thread enters the controller's namespace
// "<id>-node" (pvesim listens on its loopback); node i (1..N) is namespace "<id>-pve<i>" with
// vmbr1 10.(90+i).0.1/16, its ruleset (CONTROLLER_ADDRESSES = the controller's address on its
// link), its own real agent (socket <tmp>/agent-pve<i>.sock) and template 8999+i; a veth
// 172.31.<i>.1 (controller) - 172.31.<i>.2 (node) links them, the controller routes each
// node's sandbox network through it: SSH to sandboxes crosses the node's forward chain as it
// does for a controller on another host. pvesim has all N nodes behind one endpoint.
//
// The constructor moves the CALLING THREAD into the node namespace (threads created later
// inherit it), so construct the Stack before starting threads, and join them before the
// destructor, which returns the thread to its original namespace and removes everything it
// created (agent, simulator with its CT namespaces, node namespace, temp dir). Names carry
// the pid, so tests may run in parallel. Link `pvs_test_stack` (tests/lifecycle/CMakeLists.txt).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/manager.h"

namespace pvesim {
class Simulator;
}

namespace pvs::test {

struct StackOptions {
  // "netns" (a namespace + sshd per CT), "lxc" (real unprivileged LXC containers, root inside;
  // the template rootfs of scripts/lxc-rootfs, label lxc) or "model" (no namespaces per CT).
  std::string backend = "netns";
  int default_task_ms = 0;             // pvesim task duration
  std::map<std::string, int> task_ms;  // per task type
  bool agent = true;                   // start pve-sandbox-agent
  bool dhcp = false;                   // dnsmasq + real DHCP clients; manager_config().dhcp
  std::string id;                      // name prefix; default "pvs<pid>"
  // > 1: a cluster (see "Cluster" above): nodes pve1..pveN, each its own namespace, bridge,
  // ruleset and agent; this thread lives in the controller's namespace. dhcp is single-node.
  int nodes = 1;
  // Cluster: templates on pvesim's shared storage ("shared-rbd"), on pve1, cloned to any node
  // with `target` (a node whose NodeConfig::template_vmid names one uses it from there).
  std::vector<int> shared_templates;
  // Egress by domain (see above): resolver, internet namespace, DNS and HTTP. Single node.
  bool egress = false;
  // lxc: the template's disk (a sandbox's disk starts as a copy): small, so that a test fills a
  // (grown) disk in seconds; a template build of many packages needs more.
  std::string lxc_template_disk = "1G";
  // A second template, kVolumeHolderTemplate: the holder template of volumes (a controller's
  // volumes.holder_template_vmid). Single node.
  bool volume_holder = false;
};
inline constexpr int kVolumeHolderTemplate = 8990;

// StackOptions::egress: the internet's authoritative DNS server and its records (TTL 300).
inline constexpr const char* kInternetDns = "203.0.113.53";
inline const std::map<std::string, std::string> kEgressZone = {
    {"allowed.test", "203.0.113.20"},
    {"other.test", "203.0.113.21"},
    {"also.test", "203.0.113.22"},
    {"deb.test", "203.0.113.23"},  // serves Stack::www_dir() (a package mirror in tests)
};

// One run of tests/lifecycle/lifecycle_driver (a controller creating and destroying sandboxes
// from several threads until it is killed) against a Stack.
struct DriverRun {
  std::string driver;    // the driver binary
  std::string out_file;  // its stdout/stderr: one line per event ("begin create", ...)
  unsigned seed = 0;
  int threads = 4;
  int warm_pool = 0;
  int hot_pool = 0;  // members of one hot profile "hot" (the default template)
  // SIGKILL run_for after the driver has written `begun` "begin" lines and `finished`
  // "create"/"destroy" lines (0, 0: after its start), so that a round begins and finishes that
  // many operations however slow the machine is.
  std::chrono::milliseconds run_for{1000};
  int begun = 0;
  int finished = 0;
};

class Stack {
 public:
  explicit Stack(StackOptions options = {});
  ~Stack();
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;

  pvesim::Simulator& sim() { return *sim_; }
  // A ManagerConfig for this stack: Proxmox URL/token/fingerprint, node "pve", template 9000,
  // VMIDs 10000-10999, 10.99.0.0/16 via 10.99.0.1 on vmbr1, the agent socket, SSH as user()
  // with the stack's key (the template's host key pinned), short timeouts, background loop
  // off.
  ManagerConfig manager_config() const;
  // The same for another process (e.g. a driver program) that knows the stack's simulator
  // port and fingerprint and its temp dir.
  static ManagerConfig config_for(int sim_port, const std::string& sim_fingerprint,
                                  const std::string& stack_dir, bool wait_for_ssh);

  // Addresses in `inet sandbox internet_allowed`, as `nft list set` prints them (cluster: on
  // node 1..N).
  std::set<std::string> internet_set(int node = 0) const;
  // `port=mac/ip` of the bridge bindings (set port_ip4), as `nft` prints them.
  std::set<std::string> bound_ports(int node = 0) const;
  // VMIDs of containers pvesim holds (templates excluded); cluster: on node 1..N, 0: all.
  std::vector<int> containers(int node = 0) const;
  int nodes() const { return options_.nodes; }
  static std::string node_name(int node) { return "pve" + std::to_string(node); }
  // CT namespaces of the netns backend that exist now.
  std::vector<std::string> ct_namespaces() const;

  // The agent's reservation directory (dnsmasq's dhcp-hostsdir) and dnsmasq's log and leases.
  std::string dhcp_hosts_dir() const { return dir_ + "/dhcp-hosts"; }
  std::string dnsmasq_log() const;
  std::string dnsmasq_leases() const;
  void stop_dnsmasq();  // SIGTERM and wait: DHCP goes unanswered

  // StackOptions::egress: the resolver (stop/start: SIGTERM and wait / again, same config), its
  // log, and tests/egress/egress_tool.py copied where a sandbox's user can run it
  // (`python3 <tool> dns 10.99.0.1 allowed.test`, `... connect 203.0.113.20 80`).
  void stop_resolver();
  // SIGUSR1: the resolver sends every open window of its egress log to the agent now.
  void flush_resolver_log();
  void start_resolver();
  std::string resolver_log() const;
  std::string egress_tool() const { return dir_ + "/egress_tool.py"; }
  // What the internet's HTTP server serves for the host deb.test (404 for what is not there).
  std::string www_dir() const { return dir_ + "/www"; }
  std::string internet_namespace() const { return id_ + "-internet"; }

  // Starts the driver, SIGKILLs it after run.run_for and returns the lines it printed; throws
  // std::runtime_error if it exited on its own.
  std::vector<std::string> run_driver_until_killed(const DriverRun& run) const;

  void stop_agent(int node = 0);   // SIGTERM and wait (cluster: node 1..N)
  void start_agent(int node = 0);  // again, same socket and state file
  void kill_agent(int node = 0);   // SIGKILL

  const std::string& id() const { return id_; }
  const std::string& dir() const { return dir_; }  // temp dir (keys, agent config/log/socket)
  const std::string& node_namespace() const { return node_ns_; }
  std::string agent_socket(int node = 0) const {
    return dir_ + (node == 0 ? "/agent.sock" : "/agent-" + node_name(node) + ".sock");
  }
  std::string agent_log(int node = 0) const;
  std::string ssh_key() const { return dir_ + "/id_ed25519"; }
  // The sandboxes' login user (a throw-away user with /bin/sh) and its writable home.
  const std::string& user() const { return user_; }
  std::string home() const { return dir_ + "/home"; }
  int port() const;
  std::string fingerprint() const;
  static constexpr const char* kTokenId = "root@pam!stack";
  static constexpr const char* kTokenSecret = "5e1f6b2a-stack-secret";

 private:
  void cleanup();
  void start_dnsmasq();
  void make_keys_and_user();
  void setup_single_node();
  void setup_egress();  // stack_egress.cc
  void stop_egress();
  void setup_cluster();  // stack_cluster.cc
  void setup_cluster_node(int node);
  std::string agent_config(int node) const;
  std::vector<std::string> in_node(int node, std::vector<std::string> argv) const;

  StackOptions options_;
  std::string id_, dir_, node_ns_;
  std::string user_;
  bool user_created_ = false;
  int original_ns_ = -1;
  bool entered_ = false;
  pid_t agent_pid_ = -1;
  std::vector<pid_t> node_agents_;  // cluster: node i's agent at [i - 1]
  pid_t dnsmasq_pid_ = -1;
  pid_t resolver_pid_ = -1, internet_dns_pid_ = -1, internet_http_pid_ = -1;
  std::unique_ptr<pvesim::Simulator> sim_;
};

// The steps of Manager::create, in order, as lifecycle::FaultHook (manager_testing.h) names them.
inline const std::vector<std::string> kCreateSteps = {"clone", "configure", "resize",   "bind",
                                                      "start", "ssh",       "internet", "ready"};

// A lifecycle::FaultHook that fails the step named by `failing` (read at every step, so a
// test switches the fault on, moves it, or clears it by assigning the string).
inline std::function<Status(std::string_view)> fail_step(const std::string& failing) {
  return [&failing](std::string_view step) -> Status {
    if (!failing.empty() && step == failing) {
      return fail(ErrorCode::kUnavailable, "injected at " + failing);
    }
    return {};
  };
}

}  // namespace pvs::test
