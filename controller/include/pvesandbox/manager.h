// The sandbox lifecycle: Manager creates, finds and destroys sandboxes; Sandbox is one of them.
//
//   auto manager = pvs::Manager::open(config);          // recovers state from Proxmox first
//   pvs::CreateOptions options;
//   options.internet = true;
//   options.ttl = std::chrono::hours(1);
//   auto sandbox = (*manager)->create(options);         // clone, configure, start, SSH ready
//   auto result = (*sandbox)->exec("python3 -c 'print(42)'");
//   (*sandbox)->write_file("/tmp/in.txt", "data");
//   (*sandbox)->set_internet(false);
//   (*sandbox)->set_egress(pvs::Egress::allow({"pypi.org", "files.pythonhosted.org"}));
//   (*sandbox)->destroy();                              // revoke first, then stop + purge
//
// Proxmox is the source of truth: every sandbox is a container in the configured pool, tagged
// `pve-sandbox`, with its metadata in the description (sandbox_metadata.h). open() and every
// reconcile() rebuild the registry from there, destroy orphans (interrupted creates/destroys,
// expired sandboxes, containers without readable metadata) and make the agent's set exactly the
// addresses of live sandboxes that have internet.
//
// Failure contract: create() either returns a ready sandbox or leaves nothing behind (no
// container, no set entry, VMID and address released). destroy() revokes internet first and
// never ignores a failed revoke: the address stays quarantined until the agent confirms it is
// gone. Everything here is safe to call from many threads.
//
// Errors are pvs::Error with coarse codes a service maps to HTTP: kInvalidArgument (400),
// kNotFound (404), kConflict (409: locked, wrong phase, name taken), kTooLarge (413),
// kUnavailable (503: Proxmox, agent or SSH unreachable, capacity exhausted), kTimeout (504),
// kPermissionDenied (403), kInternal (500).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/call_stats.h"
#include "pvesandbox/common/error.h"
#include "pvesandbox/common/io.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/protocol.h"
#include "pvesandbox/custom_templates.h"
#include "pvesandbox/egress.h"
#include "pvesandbox/port_stream.h"
#include "pvesandbox/proxmox_client.h"
#include "pvesandbox/sandbox_metadata.h"
#include "pvesandbox/ssh_session.h"
#include "pvesandbox/template_recipe.h"
#include "pvesandbox/usage.h"
#include "pvesandbox/volumes.h"

namespace pvs {

using Labels = std::map<std::string, std::string>;

// How the manager reaches pve-sandbox-agent (through pvs::AgentClient, agent_client.h): the
// local unix socket, or, for a controller on another machine, a command that relays
// stdin/stdout to the agent (e.g. {"ssh", "-T", "pve-sandbox-relay@node1"} with the forced
// command `pve-sandbox-agent relay`).
struct ManagerAgentOptions {
  std::string socket_path{kDefaultAgentSocket};
  std::chrono::milliseconds timeout{10000};  // per request (and at most 5 s to connect)
  std::vector<std::string> command;          // not empty: spawn this relay instead
};

// One Proxmox node that hosts sandboxes (ManagerConfig::nodes). Each node has its own agent,
// sandbox bridge and network (CIDRs of two nodes must not overlap: a controller routes to each
// node's network through that node) and its template.
struct NodeConfig {
  std::string name;           // as Proxmox names it (/cluster/resources, /nodes/{node})
  ManagerAgentOptions agent;  // its pve-sandbox-agent: the local socket, or a relay command
  std::string bridge = "vmbr1";
  Cidr sandbox_cidr;
  Ipv4Address gateway;
  std::vector<Cidr> reserved;
  // A template on this node's own storage. 0: ManagerConfig::template_vmid, which then lives
  // on shared storage and is cloned to this node with `target` (Proxmox refuses `target` for a
  // template on local storage). Clones of one template are serial on Proxmox: one template per
  // node gives one clone queue per node.
  int template_vmid = 0;
  // Copies of template_vmid to clone from, the template itself included (1..16; 0:
  // ManagerConfig::template_replicas). See ManagerConfig::template_replicas.
  int template_replicas = 0;
  int max_sandboxes = 0;       // live + being created on this node; 0: no limit of its own
  int min_free_memory_mb = 0;  // what must stay free on the node after a new sandbox
  Labels labels;               // matched by CreateOptions::node_selector
  bool drained = false;        // start drained (Manager::drain changes it at run time)
};

// One profile of hot pool members (ManagerConfig::hot_pools).
struct HotPoolProfile {
  std::string name;       // 1-32 of [a-z0-9-], unique among the profiles
  int template_vmid = 0;  // 0: ManagerConfig::template_vmid
  // A custom template's name (Manager::build_template) instead of template_vmid: its members
  // are made once the template is built (each reconcile looks it up; until then the profile
  // has none, and its refills fail with "not built yet"), on each node from the copy that node
  // clones. Such a profile replaces the pool the template's own pool_size would make.
  std::string template_name;
  // Copies of its template to clone from (1..16; 0: as many as a node's configuration that
  // names the same template wants, else 1). See ManagerConfig::template_replicas.
  int template_replicas = 0;
  int cpus = 1;  // what an idle member may use (a claim writes the caller's values)
  int memory_mb = 512;
  int disk_gb = 0;  // 0: the template's size; members serve requests for at most this
  int size = 0;     // members kept ready (0: off)
};

// A profile name: 1-32 of [a-z0-9-].
bool valid_pool_profile_name(std::string_view name);

struct ManagerConfig;
// The nodes a Manager made from `config` uses: ManagerConfig::nodes with their templates
// resolved, or the single node; kInvalidArgument for a bad name, a node named twice, a missing
// template, bad labels or two sandbox networks that overlap (each names the nodes).
Result<std::vector<NodeConfig>> cluster_nodes(const ManagerConfig& config);

struct ManagerConfig {
  // Proxmox: where sandboxes live and what they are cloned from.
  pve::ClientOptions proxmox;
  // A cluster: the nodes that host sandboxes. Empty: one node made of `node`, `agent`,
  // `bridge`, `sandbox_cidr`, `gateway`, `reserved` and `template_vmid` below. A create goes to
  // the node place() picks (online in /cluster/resources, agent reachable, not drained,
  // labels, capacity; then the most free memory): see docs/architecture.md ("Cluster").
  std::vector<NodeConfig> nodes;
  std::string node;       // the single node: hosts the sandbox bridge and the agent
  int template_vmid = 0;  // an LXC template prepared by `pve-sandbox-setup template`
  std::string pool = "pve-sandbox";
  std::string storage;      // clone target storage; empty: the template's
  bool full_clone = false;  // linked clones are faster; full clones survive the template
  // Template replicas (1..16, the template itself counted; 1: none). Proxmox clones one source
  // at a time (the clone holds `lock: disk` on it), so one template makes one clone at a time.
  // With N, the controller keeps N-1 copies of the template next to it (clones of the
  // template converted into templates, VMIDs from the range, description phase "pooled" with
  // the labels pve-sandbox/replica-of and pve-sandbox/template-digest) and sends each clone
  // (creates and pool refills) to the copy with the fewest clones in flight: N at once. Each
  // copy is checked against the template by a digest of its configuration (docs/operations.md,
  // "Template replicas and sizing"); a reconcile pass makes the missing ones and destroys and
  // remakes those whose template changed. NodeConfig and HotPoolProfile may set their own.
  int template_replicas = 1;
  // Stopped clones of the template kept ready, per node (0: off). create() takes one instead of
  // cloning, so the clone (serial per template on Proxmox) leaves the critical path; a background
  // thread refills the pool. Pooled containers carry phase "pooled" and the template's VMID in
  // their description: a restart keeps them, a changed template or a smaller pool destroys them.
  int warm_pool = 0;
  // Hot pools: per profile and node, `size` RUNNING clones, each bound at the agent (internet off)
  // with its own SSH host key and a live, idle SSH connection. create() claims one with ONE config
  // write (description with owner, labels and ttl; cores and memory as asked, hot-applied by
  // Proxmox) plus an ALLOW if internet is asked, and hands over the connection: nothing waits
  // on a Proxmox task. A profile serves a create that names no hostname (members booted as
  // "sandbox-<vmid>"; a hostname is only applied at start), asks for disk_gb 0 or at most the
  // profile's, and names this profile or none (then only profiles of template_vmid serve).
  // Otherwise the warm pool, then a clone. Members never appear in list() or attach(); one
  // whose connection drops, that stops, or whose config changes behind our back is destroyed
  // and replaced, never handed out. A restart adopts running members of today's profiles that
  // answer on their own host key; the rest are destroyed. Members hold addresses and VMIDs.
  std::vector<HotPoolProfile> hot_pools;
  int hot_pool_refill_parallel = 2;  // members being made (or destroyed) at once: 1..16
  // Proxmox `cpuunits` (CPU weight, 0..10000; 0: the default) of a member while it is made and
  // waits, so a refill yields the CPU to sandboxes handed out; the claim's write deletes it.
  int hot_pool_member_cpuunits = 0;
  // After a claim, a profile still at least half full starts its refill only once no claim came
  // for this long: the new sandbox's first commands do not share the node with a clone, a start
  // and a new member's SSH. Below half, it refills at once. 0: at once always.
  std::chrono::milliseconds hot_pool_refill_delay{0};
  std::chrono::milliseconds hot_pool_check_interval{2000};  // each member's connection check
  // A shell command each new hot pool member runs once it is up, before it is ready (the
  // service sets what the E2B API's first command would otherwise do: the login snapshot,
  // docs/e2b.md). A failure is logged; the member is ready all the same. Empty: none.
  std::string hot_pool_warmup;
  std::uint32_t vmid_min = 10000;  // VMIDs the controller may use (inclusive)
  std::uint32_t vmid_max = 19999;

  // Network: addresses from the controller's allocator, written into net0 (static) or handed
  // out by the node's dnsmasq from the reservation the agent publishes at BIND (dhcp).
  Cidr sandbox_cidr;    // e.g. 10.99.0.0/16
  Ipv4Address gateway;  // e.g. 10.99.0.1
  std::string bridge = "vmbr1";
  std::vector<Cidr> reserved;  // never allocated (addresses something else on the bridge uses)
  bool dhcp = false;           // net0 ip=dhcp: needs the agent's dhcp_hosts_dir + dnsmasq
  bool firewall = false;       // net0 firewall=1 (the bridge port is then fwpr<vmid>p0)

  // SSH into sandboxes: host/port are filled in per sandbox; everything else is the template.
  SshConfig ssh;
  std::chrono::milliseconds ssh_ready_timeout{60000};  // start -> first successful exec
  bool wait_for_ssh = true;  // false: create() returns once started (templates without sshd)
  // Every clone starts with the template's SSH host key, which every tenant can read in its own
  // container. With this on, create() replaces it through the first session (the one `ssh`'s
  // policy verifies: the template's key) by a fresh ed25519 key, deletes the template's other
  // host keys, and records the new fingerprint in the sandbox's metadata. Either way every
  // later session of the sandbox, also after a restart, pins the fingerprint recorded at
  // create. Needs wait_for_ssh.
  bool per_sandbox_host_keys = true;

  // The node agent.
  ManagerAgentOptions agent;
  std::chrono::seconds internet_lease{300};  // element timeout; renewed at half-life

  // Limits and defaults.
  int max_sandboxes = 256;
  std::chrono::seconds default_ttl{3600};  // for CreateOptions::ttl == 0
  std::chrono::seconds max_ttl{7 * 24 * 3600};
  // The paused TTL: a paused sandbox (Sandbox::pause) is destroyed this long after its pause
  // unless resumed first (its own TTL stops while paused).
  std::chrono::seconds max_paused{7 * 24 * 3600};
  int max_cpus = 8;
  int max_memory_mb = 16384;
  int max_disk_gb = 64;
  // Snapshots one sandbox may keep (each holds its disk's changes on the node's storage);
  // beyond: kConflict, delete one first.
  int max_snapshots = 4;
  // Sandboxes one fork makes at most (Manager::fork).
  int max_fork = 16;
  // Templates captured from sandboxes (Manager::capture_template) one owner may keep; beyond:
  // kConflict, delete one first. Fork bases are not counted.
  int max_templates_per_owner = 8;
  std::chrono::seconds reconcile_interval{30};  // also the reaper's period
  // Proxmox task deadline (clone, start, stop, destroy, ...).
  std::chrono::milliseconds task_timeout{std::chrono::minutes(5)};
  // A task's status is polled at 20 ms, then doubling up to this: how late at most a create
  // sees a task end (each waiting create asks Proxmox about 1/task_poll_max times a second).
  std::chrono::milliseconds task_poll_max{50};
  // A clone that meets `CT is locked` (another clone of the template) waits and retries for
  // this long; clones from this controller are queued per template and never collide.
  std::chrono::milliseconds clone_lock_wait{std::chrono::minutes(5)};
  bool background = true;  // false: no reconciler thread (tests call reconcile())

  // Custom template builds (Manager::build_template). What cleans a built container before it
  // becomes a template (run as root over SSH, then the container stops). The default empties
  // /etc/machine-id, apt's caches and lists, /tmp, shell history and the logs, and only inside
  // a container (its init has `container=` in its environment, as LXC sets it): a "container"
  // of pvesim's netns stand-in shares the host's file system, so there it cleans nothing. The
  // template keeps its base's SSH host keys: they are what ssh's policy verifies at a clone's
  // first contact, and each sandbox replaces them by its own (per_sandbox_host_keys). Empty:
  // none.
  std::string template_clean_command =
      "if ! { " + std::string(kInsideContainerTest) +
      "; }; then "
      "echo 'not inside a container: nothing cleaned'; exit 0; fi; "
      "rm -f /etc/machine-id /var/lib/dbus/machine-id && : >/etc/machine-id && "
      "(apt-get clean || true) && rm -rf /var/lib/apt/lists/* /tmp/* /var/tmp/* "
      "/root/.bash_history && find /var/log -type f -exec truncate -s 0 {} +";
  // A step (packages, the script) that runs longer fails the build.
  std::chrono::milliseconds template_step_timeout{std::chrono::minutes(30)};
  VolumeConfig volumes;  // volumes.h
};

struct CreateOptions {
  std::string hostname;  // empty: "sandbox-<vmid>"; else a DNS label (RFC 1123)
  int cpus = 1;
  int memory_mb = 512;
  int disk_gb = 0;  // 0: the template's size; else grow the root disk to this
  // Egress (egress.h): `internet = true` is the shorthand for Egress::on(); an `egress` other
  // than off wins, and both at once is kInvalidArgument.
  bool internet = false;
  Egress egress;
  std::chrono::seconds ttl{0};  // 0: ManagerConfig::default_ttl
  // The TTL's end pauses the sandbox instead of destroying it, and (auto_resume, only with
  // pause_on_expiry, else kInvalidArgument) a data-plane call on it while paused resumes it
  // first; each resume gives it `ttl` again (OnExpiry in sandbox_metadata.h).
  bool pause_on_expiry = false;
  bool auto_resume = false;
  Labels labels;      // see validate_labels()
  std::string owner;  // the API token name (for per-token limits and the audit log)
  // A hot pool profile's name: create from its template (claiming one of its members when one
  // is ready and fits). Empty: ManagerConfig::template_vmid, served by any fitting profile of
  // that template. An unknown name is kInvalidArgument.
  std::string profile;
  // A custom template's name (Manager::build_template): create from it (a hot pool profile
  // of its template serves it). An unknown name is kInvalidArgument; with `profile`, both must
  // agree. The sandbox carries the label pve-sandbox/template-name.
  std::string template_name;
  // Cluster placement: a node to use (kInvalidArgument if unknown; kUnavailable if it cannot
  // take the sandbox now, with the reason), and labels a node must have (all pairs).
  std::string node;
  Labels node_selector;
  // Volumes of `owner` (volumes.h) mounted at start, each free (no other sandbox holds it);
  // placed on their node. kInvalidArgument for another's or an unknown one, kConflict if held.
  std::vector<VolumeMount> volumes;
};

// What is known about a sandbox, as a value.
struct SandboxInfo {
  std::string id;  // "sb-" + 12 hex digits; never reused
  int vmid = 0;
  std::string node;
  std::string hostname;
  std::optional<Ipv4Address> address;
  SandboxMetadata::Phase phase = SandboxMetadata::Phase::kCreating;
  // Proxmox's "running" | "stopped" as last seen; "unreachable" while its node is offline
  // (the sandbox is kept, never destroyed on a guess; reconcile converges when it returns).
  std::string status;
  bool internet = false;  // egress.mode == kOn
  Egress egress;          // the effective egress: off, on or an allowlist
  int cpus = 0;
  int memory_mb = 0;
  int disk_gb = 0;
  std::int64_t created_at = 0;  // unix seconds
  std::int64_t expires_at = 0;  // unix seconds; 0: never
  Labels labels;
  std::string owner;
  std::string host_key;  // "SHA256:...": the sandbox's own SSH host key; empty if not recorded
  OnExpiry on_expiry;    // what the TTL's end does
  std::vector<VolumeMount> volumes;
};

struct SnapshotInfo {
  std::string name;
  std::string description;
  std::int64_t created_at = 0;
};

// What a pause keeps (docs/design/pause.md). kFilesystem: the container is stopped with its
// disk kept; files survive, processes do not. kMemory (processes and RAM kept) has no
// supported Proxmox call behind it and is refused.
enum class PauseMode { kFilesystem, kMemory };

class Manager;

// What a sandbox in allowlist mode tried to reach (docs/api.md "Egress log"), as its node's
// agent keeps it: the names the resolver was asked for, allowed or refused, one line per name
// and window ("refused 1,234 times in the window from `window_ms`"), oldest first; and the
// connections the node's ruleset refused, per destination, most recent first (at most
// proto::kMaxRefusedPerReply, then one `others` item summing the rest).
struct EgressLog {
  std::vector<proto::EgressLogLine> names;
  std::vector<proto::RefusedConnection> connections;
};

class Sandbox {
 public:
  virtual ~Sandbox() = default;

  virtual SandboxInfo info() const = 0;
  const std::string& id() const { return id_; }

  // Commands and files go over the sandbox's SSH session (reconnects transparently).
  virtual Result<ExecResult> exec(std::string command, ExecOptions options = {}) = 0;
  // As exec, without holding the caller or a thread: `done` gets the result once, on the SSH
  // session's I/O thread (SshSession::exec_then), or at once on the calling thread when the
  // command cannot be sent (E2B's processes: no thread per command).
  virtual void exec_then(std::string command, ExecOptions options, ExecDone done) = 0;
  virtual Status write_file(const std::string& path, std::string_view data,
                            std::uint32_t mode = 0644) = 0;
  virtual Result<std::string> read_file(const std::string& path,
                                        std::uint64_t max_size = 64 << 20) = 0;
  virtual Status upload(const std::string& path, std::istream& in,
                        const UploadOptions& options = {},
                        std::optional<std::uint64_t> size_hint = std::nullopt) = 0;
  virtual Result<std::uint64_t> download(const std::string& path, std::ostream& out,
                                         const DownloadOptions& options = {}) = 0;
  virtual Result<DirListing> list_dir(const std::string& path, const ListOptions& options = {}) = 0;
  // The attributes of a file (symbolic links followed).
  virtual Result<SftpAttributes> stat(const std::string& path) = 0;
  // The canonical absolute path of an existing file or directory, symbolic links resolved.
  virtual Result<std::string> realpath(const std::string& path) = 0;
  // An interactive program on a pseudo-terminal over the sandbox's SSH session (ssh_pty.h,
  // terminal.h). It ends, with an error in its PtyExit, when the sandbox is destroyed.
  virtual Result<std::unique_ptr<PtyChannel>> open_pty(PtyOptions options) = 0;
  // A TCP connection to a port in the sandbox (by default on its loopback), made by its sshd on
  // the sandbox's SSH session (ssh_tunnel.h): what the port proxy streams through.
  virtual Result<std::unique_ptr<TcpTunnel>> open_tunnel(TunnelOptions options) = 0;
  // A TCP connection from the controller to a port on the sandbox's own address, over a route
  // its node's agent keeps in the ruleset while the stream lives (port_stream.h): no SSH on the
  // way. kConnectRefused when nothing accepts connections there (a service on loopback only).
  virtual Result<std::unique_ptr<PortStream>> open_route(RouteOptions options) = 0;

  // Changes the sandbox's egress, recorded in the metadata: on grants HTTP/HTTPS with a renewed
  // lease, an allowlist gives the agent the list (EGRESS), off revokes both. A change never
  // opens a window wider than either end (docs/architecture.md, "Egress by domain"). If the
  // new egress is in place but removing the old one failed, the new one is recorded and the
  // error returned (the address is quarantined; the next reconcile repairs the agent).
  virtual Status set_egress(const Egress& egress) = 0;
  // The shorthand: Egress::on() or Egress::off().
  Status set_internet(bool enabled) { return set_egress(enabled ? Egress::on() : Egress::off()); }
  // The sandbox's egress log, read from its node's agent. Empty unless it has an allowlist: the
  // agent keeps a log only for listed sandboxes and forgets it when the list goes.
  virtual Result<EgressLog> egress_log() = 0;
  // Live status from Proxmox.
  virtual Result<pve::ContainerStatus> status() = 0;
  // What the sandbox used in [since, until] (unix seconds), oldest first (usage.h).
  virtual Result<std::vector<UsageSample>> usage(std::int64_t since, std::int64_t until) = 0;
  virtual bool is_connected() const = 0;

  virtual Status snapshot(const std::string& name, const std::string& description = "") = 0;
  virtual Result<std::vector<SnapshotInfo>> snapshots() = 0;
  virtual Status rollback(const std::string& name) = 0;
  virtual Status delete_snapshot(const std::string& name) = 0;

  // Sets the expiry to now + ttl (at most ManagerConfig::max_ttl). kConflict while paused.
  virtual Status extend_ttl(std::chrono::seconds ttl) = 0;

  // Pauses the sandbox (PauseMode): its container stops with its disk kept; it keeps its id,
  // address, egress, labels, owner, own SSH host key and snapshots. Its SSH session and
  // terminals end. Its TTL stops: the expiry becomes now + ManagerConfig::max_paused and the
  // time it had left is kept for resume(). While paused, exec, files, terminals, extend_ttl and
  // rollback answer kConflict (with OnExpiry::auto_resume, exec, files, terminals and tunnels
  // resume it first). kConflict if paused already; kInvalidArgument for kMemory.
  virtual Status pause(PauseMode mode = PauseMode::kFilesystem) = 0;
  // Starts a paused sandbox again and returns once its SSH answers on its own host key (unless
  // ManagerConfig::wait_for_ssh is off). Its expiry becomes now + ttl, or, for ttl 0, now + the
  // time it had left when paused (at most max_ttl; none if it had none). kConflict if it is not
  // paused. A failure leaves it paused.
  virtual Status resume(std::chrono::seconds ttl = std::chrono::seconds(0)) = 0;
  // Idempotent; a container already gone is success.
  virtual Status destroy() = 0;

 protected:
  explicit Sandbox(std::string id) : id_(std::move(id)) {}

 private:
  std::string id_;
};

// Counters for /metrics and /v1/health.
struct ManagerStats {
  std::uint64_t live = 0;
  std::uint64_t creates = 0, create_failures = 0;
  std::uint64_t destroys = 0, destroy_failures = 0;
  std::uint64_t paused = 0;   // live sandboxes in phase "paused" (counted in `live` too)
  std::uint64_t volumes = 0;  // volumes (holders) known
  std::uint64_t reconciles = 0, reconcile_failures = 0;
  std::uint64_t orphans_destroyed = 0, expired_destroyed = 0;
  std::uint64_t expired_paused = 0;  // TTLs that ended in a pause (CreateOptions::pause_on_expiry)
  std::uint64_t auto_resumes = 0;    // resumes a data-plane call made (OnExpiry::auto_resume)
  std::uint64_t quarantined_addresses = 0;
  std::uint64_t pooled = 0;                      // stopped clones ready in the warm pool
  std::uint64_t pool_hits = 0, pool_misses = 0;  // creates served from the pool / by a clone
  // Every Proxmox API request the manager made (one call of pvs::pve::Client, its internal
  // retries included), waits for Proxmox tasks (start to end of the task: clone, start, stop,
  // destroy, resize, snapshots), and every request to the agent (HELLO pings included).
  CallStats proxmox_calls;
  CallStats proxmox_tasks;
  CallStats agent_calls;
  // Sandbox::pause and Sandbox::resume calls past their checks (not: paused already, not
  // paused), from call to return; resume includes the wait for SSH.
  CallStats pauses;
  CallStats resumes;
};

// One pool as Manager::pools() reports it (for operators: GET /v1/pools, metrics).
struct PoolInfo {
  std::string name;  // the hot profile's name, or "warm" for the warm pool
  std::string node;  // pools are per node
  bool hot = true;   // false: the warm pool (stopped clones)
  int template_vmid = 0;
  int cpus = 0, memory_mb = 0, disk_gb = 0;  // hot: the profile's (disk_gb 0: the template's)
  int size = 0;                              // members wanted
  int ready = 0;                             // members that can be claimed now
  int filling = 0;                           // members being made
  std::uint64_t claims = 0;                  // creates it served
  std::uint64_t misses = 0;                  // creates it would have served, but none was ready
  std::uint64_t refill_failures = 0;         // members that failed to be made
  std::uint64_t replaced = 0;  // members destroyed: failed a check, stopped or changed
  CallStats claim_latency;     // hot: create() calls it served, from call to return
};

// One node as Manager::nodes() reports it (for operators: GET /v1/nodes, metrics).
struct NodeInfo {
  std::string name;
  bool online = false;     // /cluster/resources said "online" and its containers were listed
  bool agent_ok = false;   // its agent answered the last ping
  bool drained = false;    // no new sandboxes (Manager::drain)
  bool recovered = false;  // each container on it read since start; until then nothing new on it
  std::string error;  // why it is offline, its agent down or not recovered; empty when all fine
  Labels labels;
  std::string bridge;
  Cidr sandbox_cidr;
  int template_vmid = 0;
  int sandboxes = 0;                          // live sandboxes on it
  int creating = 0;                           // creates placed on it and in flight
  int max_sandboxes = 0;                      // 0: no limit of its own
  std::uint64_t mem_total = 0, mem_used = 0;  // bytes, from /cluster/resources (0: unknown)
  std::uint64_t free_addresses = 0;           // in its sandbox network
  // Its egress log's totals, as its agent's STATUS said (read by health() and once per
  // reconcile; monotonic across agent restarts): names allowed and refused by its resolver,
  // and connections its ruleset refused to sandboxes with an allowlist.
  std::uint64_t egress_allowed = 0, egress_refused = 0, egress_connections_refused = 0;
};

// One template and its replicas as Manager::templates() reports them.
struct TemplateInfo {
  std::string node;            // where the template and its replicas live
  int template_vmid = 0;       // the primary (configured) template
  int wanted = 1;              // template_replicas: the primary and its replicas
  std::vector<int> replicas;   // replica VMIDs checked and in use
  std::vector<int> in_flight;  // clones in flight per source: the primary, then `replicas`
  std::string digest;          // the primary's configuration digest, as last read
  std::uint64_t rebuilt = 0;   // stale replicas destroyed (template changed, ...)
  std::string error;           // the last failure making or checking them; empty if none
};

struct Health {
  bool proxmox_ok = false;
  bool agent_ok = false;
  std::string proxmox_error;  // empty when ok
  std::string agent_error;
};

class Manager {
 public:
  // Connects to Proxmox and the agent, recovers the registry and reconciles once, then starts
  // the background reconciler/reaper/lease renewer (stopped by the destructor).
  static Result<std::unique_ptr<Manager>> open(ManagerConfig config);
  virtual ~Manager() = default;

  virtual Result<std::shared_ptr<Sandbox>> create(const CreateOptions& options) = 0;
  // The live sandbox with this id (kNotFound otherwise).
  virtual Result<std::shared_ptr<Sandbox>> attach(const std::string& id) = 0;
  // Sandboxes whose labels include every pair of `selector` (empty: all), oldest first.
  virtual std::vector<SandboxInfo> list(const Labels& selector = {}) const = 0;
  // How many live sandboxes `owner` has (CreateOptions::owner): O(log owners), for per-token
  // limits checked on every create.
  virtual std::size_t count_owned(const std::string& owner) const = 0;
  // How many of those are paused: O(the owner's sandboxes). Paused ones have a cap of their own.
  virtual std::size_t count_paused(const std::string& owner) const = 0;
  virtual Status destroy_by_id(const std::string& id) = 0;

  // One recovery/reconciliation pass now (the background loop calls the same).
  virtual Status reconcile() = 0;
  virtual Health health() = 0;
  virtual ManagerStats stats() const = 0;
  // The hot pools in configuration order, then the warm pool if configured; per node in the
  // order of ManagerConfig::nodes.
  virtual std::vector<PoolInfo> pools() const = 0;
  // The nodes in configuration order.
  virtual std::vector<NodeInfo> nodes() const = 0;
  // Every template with template_replicas > 1, ordered by VMID.
  virtual std::vector<TemplateInfo> templates() const = 0;
  // Per-owner limits on pause and resume (the service's tokens: docs/api.md "Pause and
  // resume"): called with the sandbox's owner and the owner's sandboxes now (running, paused)
  // before an explicit pause (`pausing` true) and before every resume, an auto-resume too
  // (false); a failed Status refuses the call with it. A pause at a TTL's end is never refused.
  // Unset (the default): no limits.
  using OwnerLimits = std::function<Status(const std::string& owner, bool pausing,
                                           std::size_t running, std::size_t paused)>;
  virtual void set_owner_limits(OwnerLimits limits) = 0;
  // Drains a node (no new sandboxes or pool members on it; its sandboxes stay) or undrains it.
  // kNotFound for an unknown node. Kept in memory: NodeConfig::drained says how it starts.
  virtual Status drain(const std::string& node, bool drained) = 0;

  // Custom templates (custom_templates.h). Builds `recipe` on every node without a copy of it:
  // once per group of nodes sharing a base (shared storage; the others clone it with
  // `target`), else on each node, in parallel: clone its base, start, copy the files, install
  // the packages (egress allowlisted to the hosts of the container's apt sources for that step
  // only), run the script, clean, stop, convert. `out` gets the output as it comes, serialised
  // (on the calling thread, a build thread or an SSH I/O thread; keep it short), on a cluster
  // each line prefixed "[node] ". A copy of the same name and digest serving every node: a
  // cache hit at once. The same name with another digest: kConflict (delete it first). A
  // failing step on any node: its error (the node named) with the log's tail, and no
  // container or copy of this build left on any node. A recipe with pool_size > 0 gets a hot
  // pool profile of its own (named after it, on the nodes it serves) unless a configured
  // profile names the template or has its name. One build at a time per Manager.
  virtual Result<TemplateBuild> build_template(const TemplateRecipe& recipe,
                                               const BuildOutput& out) = 0;
  // The custom templates as last read from Proxmox (every reconcile) or built, by name.
  virtual std::vector<CustomTemplate> custom_templates() const = 0;
  // Destroys it on every node: kNotFound, or kConflict while sandboxes or a configured hot
  // pool profile use it (its own pool, from pool_size, is emptied first).
  virtual Status delete_template(const std::string& name) = 0;

  // A template of a sandbox's files as they are now (E2B's snapshots; docs/templates.md
  // "Templates from a sandbox"): a Proxmox snapshot of its container (none for a paused one,
  // whose container is stopped), a full clone of it converted into a template on the
  // sandbox's node, the snapshot deleted. Files are kept; processes, memory and the sandbox's
  // settings (egress, TTL, labels) are not. Named `name` (a template name, TemplateRecipe
  // rules; empty: "snap-" and 12 hex digits); owned by `owner` (the token asking; "": every
  // owner's): creates of other owners do not find it. kNotFound (no such sandbox), kConflict (the
  // name is taken, or the sandbox is being captured or destroyed), kInvalidArgument (a bad name).
  // Nothing is left behind when a step fails.
  virtual Result<CustomTemplate> capture_template(const std::string& sandbox_id,
                                                  const std::string& name,
                                                  const std::string& owner) = 0;
  // `count` (1..ManagerConfig::max_fork) sandboxes of a sandbox's files as they are now: a base
  // captured as above for `owner` (labelled kTemplateForkLabel), then `create(base name)` `count`
  // times at once, each on its own thread. All or none: when one fails, those made are destroyed
  // and the first error is returned. The base stays while a fork uses it; the reconcile destroys it
  // once none does.
  using ForkCreate =
      std::function<Result<std::shared_ptr<Sandbox>>(const std::string& template_name)>;
  virtual Result<std::vector<std::shared_ptr<Sandbox>>> fork(const std::string& sandbox_id,
                                                             int count, const std::string& owner,
                                                             const ForkCreate& create) = 0;

  // Volumes (volumes.h); kUnavailable without VolumeConfig::holder_template_vmid. Create:
  // kInvalidArgument (name, size, node), kConflict (name taken, or max_per_owner). Delete:
  // kNotFound, kConflict while a sandbox holds it. Resize: grows only (kInvalidArgument),
  // kConflict while held. Both kUnavailable while its node is not NodeInfo::recovered.
  virtual Result<VolumeInfo> create_volume(const VolumeRequest& request) = 0;
  virtual std::vector<VolumeInfo> volumes() const = 0;  // every owner's, oldest first
  virtual Status delete_volume(const std::string& id) = 0;
  virtual Result<VolumeInfo> resize_volume(const std::string& id, int size_gb) = 0;
};

}  // namespace pvs
