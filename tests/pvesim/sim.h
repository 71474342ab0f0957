// pvesim: a Proxmox VE API simulator over real HTTPS (Poco), for tests and the demo.
//
//   pvesim::Options options;
//   options.tokens["root@pam!test"] = "secret";
//   auto sim = pvesim::Simulator::start(options);
//   // https://127.0.0.1:<(*sim)->port()>/api2/json, pin (*sim)->fingerprint()
//
// See README.md for the behaviours it models and its knobs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvesim {

// Answer `status message` instead of handling a matching request, with probability `rate`,
// at most `count` times (-1: unlimited). path is a schema template ("/nodes/{node}/lxc/{vmid}/
// config"), a path of the API ("/nodes/pve/lxc/10000/config": that container only) or "*".
struct FaultRule {
  std::string method = "*";
  std::string path = "*";
  int status = 500;
  std::string message = "simulated failure";
  double rate = 1.0;
  int count = -1;
};

// The netns backend: every started container becomes a network namespace "<prefix><vmid>"
// joined by a veth to `bridge` (host end named like Proxmox's bridge port: veth<vmid>i0, or
// fwpr<vmid>p0 when net0 has firewall=1), configured from net0 (static ip=/gw= or a lease
// from dhcp_cidr with `gateway` as router, or a real DHCP exchange with `dhcp_client`), running
// `sshd_path` with `authorized_keys` for `user`. Each container has its own /etc/ssh (as a
// clone has its own rootfs): /etc/netns/<prefix><vmid>/ssh, which `ip netns exec` mounts over
// /etc/ssh for the CT's sshd and its sessions, holding a copy of the template's host key from
// the first start until the CT is deleted; `user` owns it, so a session can replace the key.
struct NetnsOptions {
  std::string bridge = "pvesimbr0";
  std::string bridge_cidr = "10.99.0.1/16";  // the host's address on the bridge (if created)
  std::string gateway;  // default route of DHCP CTs; "" = bridge_cidr's address
  std::string ns_prefix = "pvesim-";
  std::string authorized_keys;  // file with the template's key(s); required
  std::string sshd_path = "/usr/sbin/sshd";
  std::string user = "root";  // who may log in (the sshd runs as root in the namespace)
  int ssh_port = 22;
  // Each started CT's sshd (and every session) gets its own tmpfs on /tmp, as a container has
  // its own filesystem (a file one CT writes there is not seen by another).
  bool private_tmp = false;
  bool create_bridge = true;  // create the bridge if missing, delete it at exit
  // A real DHCP client for CTs with ip=dhcp instead of the simulated lease: run inside the CT's
  // namespace as `<dhcp_client> run <ifname>` (tests/pvesim/dhcp-client.sh), exit 0 once the
  // interface has its lease from whatever DHCP server serves the bridge.
  std::string dhcp_client;
  // The network namespace (a name as in /run/netns/<name>) holding this node's bridge and the
  // host ends of its CTs' veths; "" = the namespace pvesim runs in. Must exist.
  std::string node_netns;
  // The lxc backend (backend "lxc"): every started CT is an unprivileged LXC container (root
  // 0 -> 100000 on the node) whose root file system is an overlay over `lxc_rootfs` (the
  // template, built by scripts/lxc-rootfs) on a disk image of the rootfs size; its sshd accepts
  // `authorized_keys` for root (`user`, `sshd_path`, `private_tmp` do not apply). Its files
  // live in `lxc_dir`/pvesim-lxc/<run>/ (swept by the next run if this process dies).
  std::string lxc_rootfs;
  std::string lxc_dir = "/tmp";
};

// One node of a simulated cluster (Options::nodes).
struct NodeOptions {
  std::string name;
  std::vector<int> templates;           // template CTs on this node's local storage (local-lvm)
  std::uint64_t maxmem = 64ull << 30;   // bytes
  std::uint64_t base_mem = 2ull << 30;  // mem in use with no CT running (host, page cache)
  int maxcpu = 16;
  // The netns backend: this node's bridge, ns_prefix, node_netns, ... (complete: set
  // authorized_keys etc. here too; Options::netns is not used for nodes).
  NetnsOptions netns;
};

// A template CT whose rootfs is on the shared storage ("shared-rbd"): it can be cloned with
// `target` to any node.
struct SharedTemplate {
  int vmid = 0;
  std::string node;  // the node its config is on; "" = the first node
};

struct Options {
  std::string listen = "127.0.0.1";
  int port = 0;  // 0: any free port
  std::string node = "pve";
  std::string schema_file;                    // default: the pve-schema.json built in
  std::map<std::string, std::string> tokens;  // "user@realm!tokenid" -> secret
  int auth_delay_ms = 3000;                   // pveproxy delays failed logins ~3 s
  std::map<std::string, int> task_ms;         // per task type, e.g. {"vzclone", 500}
  int default_task_ms = 50;
  int latency_ms = 0;  // added to every API request
  std::vector<FaultRule> faults;
  std::map<std::string, std::string> fail_tasks;  // task type -> exit message
  int interfaces_delay_ms = 0;                    // a started CT has no IPv4 for this long (DHCP)
  int rrd_delay_ms = 0;              // new guests show status 'unknown' in /cluster/resources
  int rrd_step_seconds = 60;         // rrddata's step for timeframe=hour (pvestatd's RRD: 60 s)
  std::vector<int> templates{9000};  // template CTs present at start
  std::string template_disk = "8G";  // their rootfs size
  std::vector<std::string> pools;    // pools present at start
  std::map<int, std::string> locks;  // stuck locks at start, e.g. {9000, "backup"}
  std::string dhcp_cidr = "10.99.0.0/16";  // simulated DHCP leases for ip=dhcp
  bool nextid_as_number = false;  // answer nextid as a JSON number (real servers: a string)
  std::string backend = "model";  // "model" | "netns" | "lxc"
  NetnsOptions netns;
  // A cluster behind one API endpoint (as pveproxy proxies for every node). Empty: one node
  // made of `node`, `templates` and `netns`; else these nodes, and those three are ignored.
  std::vector<NodeOptions> nodes;
  std::vector<SharedTemplate> shared_templates;  // on storage "shared-rbd" (shared=1)
};

class Simulator {
 public:
  static pvs::Result<std::unique_ptr<Simulator>> start(Options options);
  ~Simulator();  // stops the server, the tasks and every netns container

  int port() const;
  std::string fingerprint() const;  // SHA-256 of the certificate, "AB:CD:..."
  std::string cert_file() const;    // PEM of the self-signed certificate
  // netns backend: the template's SSH host key ("SHA256:..."), which every clone starts with
  // in its own /etc/ssh (see NetnsOptions); "" for the model backend.
  std::string ssh_host_key_fingerprint() const;
  // netns backend: the template's private host key file (its .pub beside it); "" otherwise.
  std::string ssh_host_key_file() const;
  // lxc backend: the directory of this run's containers, disks and LXC configs; "" otherwise.
  std::string lxc_run_dir() const;

  // Requests seen for "METHOD /path/{template}" (every attempt, also failed ones).
  uint64_t count(const std::string& method, const std::string& path_template) const;
  uint64_t total_requests() const;
  // Requests refused by schema validation (400 Parameter verification failed.).
  uint64_t schema_rejections() const;
  void reset_counts();

  // Changes fault injection at run time (also reachable at POST /_pvesim/faults).
  void set_faults(std::vector<FaultRule> rules);
  void set_fail_task(const std::string& type, const std::string& message);
  void set_latency_ms(int ms);
  void set_interfaces_delay_ms(int ms);
  void set_task_ms(const std::string& type, int ms);
  void set_rrd_delay_ms(int ms);
  void set_rrd_step_seconds(int seconds);
  // A gate for tests: while held, tasks of `type` that are due do not end (they stay running,
  // their locks held) until released; then they end at once.
  void hold_tasks(const std::string& type, bool held);
  // Tasks of `type` running now, each by the id in its UPID (a clone: its source VMID).
  std::vector<std::string> running_tasks(const std::string& type) const;
  // A stuck lock on a container ("" removes it).
  pvs::Status set_lock(int vmid, const std::string& lock);
  // Cuts a node from the API (also POST /_pvesim/faults {"offline":{"pve2":true}}): requests
  // for /nodes/<node>/... answer 595 "No route to host", /cluster/resources and /nodes show it
  // offline; its tasks and CTs keep running. kNotFound for a node not in the cluster.
  pvs::Status set_node_offline(const std::string& node, bool offline);

  struct Impl;

 private:
  explicit Simulator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pvesim
