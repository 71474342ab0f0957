// The lifecycle's private core: ManagerCore (the Manager's state and logic) and SandboxImpl
// (the Sandbox handle). Where the parts live, all in controller/src/lifecycle/:
//   create.cc     validation, the create steps and their rollback, the template clone
//   pools/pools.cc the warm pool and its refill thread; the hot pools: members made, checked,
//                 claimed, destroyed (pools/hot_keep.cc: keeping or adopting them during reconcile)
//   egress.cc     grant/revoke, the one quarantine, bind/unbind, SYNC with the agent
//   container.cc  task waits, description writes, destroying a container, waiting for SSH
//   reconcile.cc  recovery and reconciliation against Proxmox
//   sandbox.cc    SandboxImpl: exec and files over SSH, internet, snapshots, TTL; pause.cc: pause
//                 (stop, disk kept) and resume (start, SSH on its own key)
//   manager.cc    destroy, lookups, health, stats, the loop, Manager::open; helpers.cc: helpers
//   pools/replicas.cc template replicas: made, checked, rebuilt; the clone source picked
//   ../templates/ custom templates on this core: recipe.cc (the recipe: parser, canonical form,
//                 digest), build.cc (a copy built), spread.cc (a cluster's copies; pool_size's
//                 pools), catalog.cc (read back, listed, deleted), capture.cc (from a sandbox)
//   ../volumes/   rules.cc (names, paths), holders.cc (the holders), mounts.cc (a create's)
//   nodes.cc      the cluster: node state, placement, drain; placement.* the pure placement
//                 decision (filters and score); node.h: one node's state
//   peers.h/.cc   ProxmoxApi and AgentApi, their real implementations, call timing
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "id_pool.h"
#include "manager_testing.h"
#include "node.h"
#include "peers.h"
#include "pools/clone_queue.h"
#include "pvesandbox/common/mac_address.h"
#include "pvesandbox/manager.h"

namespace pvs::lifecycle {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kTag = "pve-sandbox";
// The label of a pooled clone that names the template it was cloned from.
constexpr std::string_view kPoolTemplateLabel = "pve-sandbox/template";
// The label of a hot pool member (a running pooled clone) that names its profile.
constexpr std::string_view kPoolProfileLabel = "pve-sandbox/profile";
// The labels of a template replica: the primary's VMID, and the primary's digest when it was
// made (template_digest).
constexpr std::string_view kReplicaOfLabel = "pve-sandbox/replica-of";
constexpr std::string_view kTemplateDigestLabel = "pve-sandbox/template-digest";

// replicas.cc: what a template's copies must share with it: SHA-256 (first 128 bits, hex)
// over its config without what differs per VMID or per state (digest, description, lock,
// template, parent, unused volumes, the volume ids of rootfs/mpN, the MACs of netN).
std::string template_digest(const pve::Config& config);

// helpers.cc
std::int64_t now_unix();
// The coarse Error of a Proxmox failure, its message prefixed with `what`.
Error pve_error(const Error& e, std::string_view what);
std::string random_hex(int digits);
std::string sha256_hex(std::string_view text);  // lower-case hex, 64 digits
// templates/build.cc: the hosts (and ports) of the http(s) URIs in apt's sources (sources.list
// and deb822 "URIs:" lines alike): an allowlist for a build's packages step; off if none.
Egress apt_mirror_egress(const std::string& sources);
// The sandbox's MAC, derived from its address: 02:53:<the four address bytes>, locally
// administered and unicast, so the controller can BIND the port before the container starts
// and a reused address always comes with the same MAC (dnsmasq leases, ARP caches).
MacAddress mac_for(Ipv4Address address);
bool valid_hostname(std::string_view hostname);
std::string upper(std::string s);
std::string port_name(int vmid, bool firewall);  // veth<vmid>i0, or fwpr<vmid>p0
// "name=eth0,bridge=vmbr1,hwaddr=..,ip=..": key -> value.
std::map<std::string, std::string> parse_property_string(std::string_view text);
int config_int(const pve::Config& c, const std::string& key, int fallback);
// The size of a disk property string ("local-lvm:vm-100-disk-0,size=8G") in GiB; 0 if absent.
double size_gib(const std::string& rootfs);
int size_gb(const std::string& rootfs);  // rounded down
// kConflict for a snapshot (capture, fork) of a sandbox with volumes: it would include them.
Status no_volumes(const SandboxMetadata& md);

class ManagerCore;

class SandboxImpl final : public Sandbox {
 public:
  SandboxImpl(std::shared_ptr<ManagerCore> core, Node& node, SandboxMetadata md,
              std::string hostname, int cpus, int memory_mb, int disk_gb, proto::Binding binding)
      : Sandbox(md.id),
        core_(std::move(core)),
        node_(node),
        md_(std::move(md)),
        hostname_(std::move(hostname)),
        cpus_(cpus),
        memory_mb_(memory_mb),
        disk_gb_(disk_gb),
        binding_(std::move(binding)) {}

  SandboxInfo info() const override;
  Result<ExecResult> exec(std::string command, ExecOptions options) override;
  void exec_then(std::string command, ExecOptions options, ExecDone done) override;
  Status write_file(const std::string& path, std::string_view data, std::uint32_t mode) override;
  Result<std::string> read_file(const std::string& path, std::uint64_t max_size) override;
  Status upload(const std::string& path, std::istream& in, const UploadOptions& options,
                std::optional<std::uint64_t> size_hint) override;
  Result<std::uint64_t> download(const std::string& path, std::ostream& out,
                                 const DownloadOptions& options) override;
  Result<DirListing> list_dir(const std::string& path, const ListOptions& options) override;
  Result<SftpAttributes> stat(const std::string& path) override;
  Result<std::string> realpath(const std::string& path) override;
  Result<std::unique_ptr<PtyChannel>> open_pty(PtyOptions options) override;
  Result<std::unique_ptr<TcpTunnel>> open_tunnel(TunnelOptions options) override;
  Result<std::unique_ptr<PortStream>> open_route(RouteOptions options) override;  // routes.h
  Status set_egress(const Egress& egress) override;
  Result<EgressLog> egress_log() override;
  Result<pve::ContainerStatus> status() override;
  Result<std::vector<UsageSample>> usage(std::int64_t since, std::int64_t until) override;
  bool is_connected() const override {
    std::lock_guard lock(mu_);
    return ssh_ && ssh_->is_connected();
  }
  Status snapshot(const std::string& name, const std::string& description) override;
  Result<std::vector<SnapshotInfo>> snapshots() override;
  Status rollback(const std::string& name) override;
  Status delete_snapshot(const std::string& name) override;
  Status extend_ttl(std::chrono::seconds ttl) override;
  Status pause(PauseMode mode) override;
  Status resume(std::chrono::seconds ttl) override;
  Status destroy() override;

  // For the manager.
  SandboxMetadata metadata() const {
    std::lock_guard lock(mu_);
    return md_;
  }
  int vmid() const { return md_.vmid; }  // never changes
  Node& node() const { return node_; }
  int memory_mb() const { return memory_mb_; }
  Ipv4Address address() const { return *md_.address; }
  const proto::Binding& binding() const { return binding_; }
  void set_status(std::string s) {
    std::lock_guard lock(mu_);
    status_ = std::move(s);
  }
  void adopt_session(std::shared_ptr<SshSession> ssh) {
    std::lock_guard lock(mu_);
    ssh_ = std::move(ssh);
  }
  void close_session();  // sandbox.cc
  // Serialises state-changing operations (internet, ttl, snapshots, destroy) on this sandbox.
  std::mutex& op_mutex() { return op_mu_; }
  void set_phase(SandboxMetadata::Phase p) {
    std::lock_guard lock(mu_);
    md_.phase = p;
  }
  // What the description now says (op_mutex held; pause.cc writes it first).
  void set_metadata(SandboxMetadata md) {
    std::lock_guard lock(mu_);
    md_ = std::move(md);
  }
  bool paused() const {
    std::lock_guard lock(mu_);
    return md_.phase == SandboxMetadata::Phase::kPaused;
  }
  bool destroyed() const { return destroyed_.load(); }
  void mark_destroyed() { destroyed_ = true; }

 private:
  Result<std::shared_ptr<SshSession>> session();
  Status wake_if_paused();     // OnExpiry::auto_resume
  Error paused_error() const;  // kConflict: "paused; resume it first"
  Result<bool> has_snapshot(const std::string& name);
  Status write_metadata(const SandboxMetadata& md);  // into the description (op_mu_ held)

  std::shared_ptr<ManagerCore> core_;
  Node& node_;
  mutable std::mutex mu_;
  std::mutex op_mu_;
  SandboxMetadata md_;
  std::string hostname_;
  int cpus_, memory_mb_, disk_gb_;
  proto::Binding binding_;
  std::string status_ = "running";
  std::shared_ptr<SshSession> ssh_;
  std::atomic<bool> destroyed_{false};
};

class ManagerCore : public std::enable_shared_from_this<ManagerCore> {
 public:
  // `nodes`: one per ManagerConfig::nodes entry (or the single node), in that order.
  ManagerCore(ManagerConfig config, TestPeers peers, std::vector<std::unique_ptr<Node>> nodes);
  ~ManagerCore() { stop_background(); }

  const ManagerConfig& config() const { return cfg_; }
  TimedPve& pve() { return pve_; }

  Result<std::shared_ptr<Sandbox>> create(const CreateOptions& options);
  Result<std::shared_ptr<Sandbox>> attach(const std::string& id);
  std::vector<SandboxInfo> list(const Labels& selector) const;
  std::size_t count_owned(const std::string& owner) const;
  std::size_t count_paused(const std::string& owner) const;  // mu_ not held
  Status destroy_by_id(const std::string& id);
  Status destroy(SandboxImpl& sandbox);
  // pause.cc: Sandbox::pause and Sandbox::resume, within Manager::set_owner_limits.
  void set_owner_limits(Manager::OwnerLimits limits);
  Status pause(SandboxImpl& sandbox, PauseMode mode);
  Status resume(SandboxImpl& sandbox, seconds ttl);
  // The reconcile's pause of a sandbox whose TTL ended (OnExpiry::pause): a resume gives it its
  // TTL of creation again. Nothing if it is no longer ready (paused, destroyed meanwhile).
  Status pause_expired(SandboxImpl& sandbox);
  void count_auto_resume();
  Status reconcile();
  int nodes_reached() const { return nodes_reached_; }
  Health health();
  ManagerStats stats() const;

  Status grant(Node& node, Ipv4Address address);
  Status ungrant(Node& node, Ipv4Address address);
  // egress.cc: an allowlist at the agent (EGRESS) or none (EGRESS off); as grant/ungrant, a
  // failure leaves the address out of node.listed and quarantines it if it may still be listed.
  Status list(Node& node, Ipv4Address address, const EgressList& list);
  Status unlist(Node& node, Ipv4Address address);
  // From one egress to another in the order that never opens a window wider than either:
  // the new one first, then the old one removed. *in_effect: the new one is in place (then an
  // error is about removing the old one).
  Status change_egress(Node& node, Ipv4Address address, const Egress& from, const Egress& to,
                       bool* in_effect);
  // Ungrant and unlist (the latter only if listed): what destroys and rollbacks call.
  Status revoke_all(Node& node, Ipv4Address address);
  Status wait(const pve::Result<std::string>& upid, std::string_view what);
  Status write_description(const Node& node, int vmid, const SandboxMetadata& md);
  // nodes.cc
  std::vector<NodeInfo> nodes() const;
  Status drain(const std::string& name, bool drained);
  // Refreshes every node's status and memory from /cluster/resources.
  Status refresh_nodes();
  // Where each node's template lives (a template on another node is cloned with `target`).
  Status locate_templates();
  // replicas.cc: which templates want replicas and where (after locate_templates); making and
  // checking them (the end of every reconcile); what Manager::templates() reports.
  void plan_replicas();
  void sync_replicas();
  std::vector<TemplateInfo> templates() const;
  // Converts a stopped container into a template and waits until its config says so.
  Status make_template(const Node& node, int vmid);
  // templates/build.cc and catalog.cc: custom templates (custom_templates.h).
  Result<TemplateBuild> build_template(const TemplateRecipe& recipe, const BuildOutput& out);
  std::vector<CustomTemplate> custom_templates() const;
  Status delete_template(const std::string& name);
  Status remove_template(const std::string& name);  // not waiting for a build (fork bases)
  // templates/capture.cc: Manager::capture_template (a fork's base is in forking_ on return).
  Result<CustomTemplate> capture(const std::string& sandbox_id, std::string name,
                                 const std::string& owner, bool fork_base);
  using Forked = Result<std::vector<std::shared_ptr<Sandbox>>>;
  Forked fork(const std::string& id, int count, const std::string& owner,
              const Manager::ForkCreate& create);
  // May `owner` create from `name` (an operator's, its own); its host_key; unused bases dropped.
  bool may_use_template(const std::string& name, const std::string& owner) const;
  std::string template_host_key(const std::string& name) const;
  void drop_unused_fork_bases();
  // Reads the catalogue back from Proxmox (every reconcile).
  Status refresh_custom_templates();
  // Hot profiles that name a custom template get the VMID of the copy their node clones (or 0).
  void resolve_named_profiles();
  // templates/spread.cc: the hot pool profiles templates with a pool_size make (under no lock).
  void sync_template_pools();
  // Retires the pool `name`'s pool_size made and destroys its members (their fills finished).
  Status empty_template_pool(const std::string& name);

  void start_background();
  void start_pool();         // the warm pool's refill thread (if warm_pool > 0), the hot pools'
  void start_hot_workers();  // the hot pools' workers, once a profile has a size (not under mu_)
  std::vector<PoolInfo> pools() const;
  void stop_background();
  // Drops the registry (it holds the sandboxes, which hold this core): called when the
  // Manager goes away, so that nothing keeps the core alive but handles still in use.
  void forget_all();  // manager.cc
  // volumes/holders.cc: Manager's volumes (volumes.h), each held by a holder container.
  Result<VolumeInfo> create_volume(const VolumeRequest& request);
  std::vector<VolumeInfo> volumes() const;
  Status delete_volume(const std::string& id);
  Result<VolumeInfo> resize_volume(const std::string& id, int size_gb);

 private:
  // create.cc
  struct Step {  // rollback bookkeeping of one create
    std::string id;
    Node* node = nullptr;  // where it is made
    std::optional<Ipv4Address> address;
    int vmid = 0;
    bool container_maybe = false;  // a clone was sent: the container may exist
    std::string container_id;      // the id its description carries, if not `id` (a pooled clone)
    std::string port;              // BIND sent
    bool granted = false;
    std::shared_ptr<SshSession> ssh;
    std::string host_key;   // the sandbox's own host key, once replaced
    int template_vmid = 0;  // what to clone (0: the node's template)
    // A template build's container: it stays in phase "creating" (recovery destroys it) and
    // keeps its base's SSH host key (the one its clones must present).
    bool template_build = false;
  };
  // nodes.cc: picks the node for a create (among `only` if not empty) and reserves its place
  // and memory there; unreserve() gives them back (`made`: the sandbox now counts as used).
  // `memory`: what the sandbox adds to the node (0 for a hot member, which already runs there).
  Result<Node*> place_create(const CreateOptions& options, const std::set<const Node*>& only,
                             std::uint64_t memory);
  void unreserve(Node& node, std::uint64_t memory, bool made);
  Node* find_node(std::string_view name) const;
  Status validate(const CreateOptions& options);
  // The template's disk in GiB (0 when options.disk_gb is 0); kInvalidArgument if larger.
  Result<double> template_disk(const CreateOptions& options, const Node& node, int template_vmid);
  // The node that holds a template (cloned to other nodes with `target`); `node` if unknown.
  std::string template_home(int template_vmid, const Node& node) const;
  SandboxMetadata new_metadata(const Step& step, const CreateOptions& options) const;
  // The custom template's copy for `node`, else the profile's template there, else the node's
  // (0: no copy serves the node, or no such profile on it).
  int template_for(const CreateOptions& options, const Node& node) const;
  // The nodes where template_for != 0 (empty, meaning every node, if neither is named).
  std::set<const Node*> template_nodes(const CreateOptions& options) const;
  // `options` with the custom template its profile names, if it names none itself.
  CreateOptions with_template(const CreateOptions& options) const;
  Result<std::shared_ptr<SandboxImpl>> create_cold(Step& step, const CreateOptions& options);
  Result<std::shared_ptr<SandboxImpl>> build(Step& step, const CreateOptions& options,
                                             double template_gib);
  void register_created(const Step& step, const std::shared_ptr<SandboxImpl>& sandbox,
                        const CreateOptions& options);
  Status configure(Step& step, const CreateOptions& options, const std::string& hostname,
                   const proto::Binding& binding, const SandboxMetadata* pooled_md, int cpuunits);
  Status bring_up(Step& step, const CreateOptions& options, const proto::Binding& binding);
  Status rollback(Step& step);
  // egress.cc: the create's egress (step 7, or a hot claim), hook "internet" first.
  Status start_egress(Step& step, const CreateOptions& options);
  // Clones the template into a free VMID (step.vmid, busy), queued per template (callers
  // before pool refills); `describe` fills in the clone's hostname and description once the
  // VMID is known. "already exists" means somebody else's container: the VMID stays used and
  // the next one is tried.
  // The source is the template or one of its replicas, the one with the fewest clones in
  // flight (`primary_only`: the template itself).
  Status clone_template(Step& step,
                        const std::function<void(int vmid, pve::CloneRequest&)>& describe,
                        CloneQueue::Who who = CloneQueue::Who::kCaller, bool primary_only = false);
  // replicas.cc
  struct ReplicaSet {  // one template's replicas (under mu_)
    int primary = 0;
    int wanted = 1;          // the primary and its replicas
    std::string home;        // the node holding the primary (and the replicas)
    Node* node = nullptr;    // that node if it is one of ours (else no replicas)
    std::vector<int> ready;  // checked replicas, clone sources
    std::string digest, error;
    std::uint64_t rebuilt = 0;
    bool checked = false;  // a pass succeeded (wanted 1: no more passes needed)
  };
  struct Replica {
    int vmid;
    std::string id;  // the id in its description
  };
  // Replicas of `primary` on `home`: good (the digest everywhere) and stale ones; replicas of
  // a template no configuration names any more count as stale too.
  // The clone source for `primary` (its in-flight count raised); give_source lowers it.
  int take_source(int primary, bool primary_only);
  void give_source(int source);
  void drop_replica(int primary, int replica);  // gone: no longer a clone source
  Status sync_replica_set(int primary);
  Status find_replicas(const std::string& home, int primary, const std::string& digest,
                       std::vector<Replica>* good, std::vector<Replica>* stale);
  Result<int> make_replica(Node& node, int primary, const std::string& digest);
  // pools.cc: the warm pool, stopped clones with phase "pooled" (under mu_).
  struct Pooled {
    int vmid;
    std::string id;  // the id in its description
    Node* node;
  };
  std::optional<Pooled> take_pooled(const Node& node);  // marks the VMID busy
  Status fill_pool_once(Node& node);
  int pooled_on(const Node& node) const;  // mu_ held
  void pool_loop();
  // pools.cc: the hot pools (under mu_ unless said).
  struct HotMember {
    Node* node = nullptr;
    int vmid = 0;
    std::string id;  // "pool-..." in its description
    proto::Binding binding;
    std::shared_ptr<SshSession> ssh;  // connected, idle; null without wait_for_ssh
    std::string host_key;             // its own, pinned by ssh
    std::string digest;               // its config's digest once ready: a claim writes with it
    int cpus = 0, memory_mb = 0, disk_gb = 0;
    bool low_weight = false;  // its config has cpuunits (the claim deletes it)
  };
  struct HotProfile {  // one profile on one node
    HotPoolProfile p;  // template_vmid resolved
    Node* node = nullptr;
    std::deque<HotMember> ready;
    int filling = 0;
    int disk_gb = 0;  // the members' disk, once one was made (0: unknown)
    Clock::time_point not_before{}, quiet_until{};  // next fill: after a failure; a claim
    milliseconds backoff{500};
    std::uint64_t claims = 0, misses = 0, refill_failures = 0, replaced = 0;
    std::shared_ptr<LatencyRecorder> claim_latency = std::make_shared<LatencyRecorder>();
    bool implicit = false;  // made by a custom template's pool_size (sync_template_pools)
  };
  // The profile on `node` that may serve `options` (-1: none); `ready`: one with a member ready.
  int hot_profile_for(const CreateOptions& options, const Node& node, bool ready) const;
  // Nodes with a ready member that serves `options` (mu_ held).
  std::set<const Node*> hot_nodes(const CreateOptions& options) const;
  // A create placed on `node` with no member ready: a miss of the profile that would have
  // served it there (not under mu_).
  void count_hot_miss(const CreateOptions& options, const Node& node);
  // A connected member on `node` of a profile serving `options` (its VMID marked busy); one found
  // disconnected goes to the discard list. A miss counts on the first fitting profile.
  std::optional<HotMember> take_hot(const CreateOptions& options, const Node& node, int* profile);
  Result<std::shared_ptr<SandboxImpl>> claim(Step& step, const CreateOptions& options,
                                             const HotMember& member);
  Status fill_hot_once(int profile);        // not under mu_
  void warm_up(SshSession& ssh, int vmid);  // ManagerConfig::hot_pool_warmup, logged
  void destroy_member(HotMember member);    // not under mu_: unbind, destroy, release
  void discard_member(HotMember member, std::string_view why);  // mu_ held
  void hot_loop();
  void check_hot_members();              // mu_ held: disconnected members to the discard list
  bool claimed_or_busy(int vmid) const;  // mu_ held
  // hot_keep.cc (reconcile): false: destroy it as an orphan.
  bool keep_hot(Node& node, const pve::ContainerStatus& ct, const pve::Config& conf,
                const SandboxMetadata& md);
  std::optional<HotMember> adoptable_member(Node& node, const pve::ContainerStatus& ct,
                                            const pve::Config& conf, const SandboxMetadata& md,
                                            int* profile);
  // container.cc. Stops and purges a container if it is ours (description id == id, or unreadable
  // marker when id is empty). kNotFound from Proxmox is success.
  Status destroy_container(const Node& node, int vmid, const std::string& id);
  Status destroy_container_once(const Node& node, int vmid, const std::string& id);
  // egress.cc
  Status bind(Node& node, const proto::Binding& binding);
  void unbind(Node& node, const std::string& port);
  void quarantine(Node& node, Ipv4Address address);  // node.agent_mu held
  // Makes the node agent's set exactly node.granted (renewing every lease), its lists exactly
  // node.listed, its bindings exactly node.bound, and frees quarantined addresses neither holds;
  // on a node not recovered (a partial view) it only renews node.granted's leases.
  Status sync_agent(Node& node, const std::set<std::string>& keep_ports = {});
  Status sync_lists(Node& node);  // node.agent_mu held
  // The effective egress of a create (kInvalidArgument for internet and an egress at once).
  static Result<Egress> create_egress(const CreateOptions& options);
  // ssh_ready.cc: waits until the sandbox at `address` runs a command over SSH (verified by the
  // configured policy: the template's key), gives it its own host key
  // (per_sandbox_host_keys), and returns a connected session pinned to the key it has now;
  // *host_key gets that key's fingerprint.
  // `own_key` false: the template's key is kept (a template build). `first_key`: pinned by the
  // first connection instead of the policy (a capture's, CustomTemplate::host_key).
  Result<std::shared_ptr<SshSession>> wait_for_ssh(Ipv4Address address, std::string* host_key,
                                                   bool own_key = true,
                                                   const std::string& first_key = "");
  // Connects until `deadline`; a server that still presents `stale_key` (the key it was told
  // to replace: its listener has not re-read its keys yet) is waited for, not refused.
  Result<std::shared_ptr<SshSession>> connect_until(const SshConfig& config,
                                                    Clock::time_point deadline,
                                                    const std::string& stale_key = {});
  Result<std::string> replace_host_key(SshSession& session);
  CloneQueue& clone_queue(int template_vmid);  // create.cc
  void busy(int vmid, bool on);                // create.cc
  // reconcile.cc
  struct Orphan {
    int vmid;
    std::string id;  // "" for an unreadable marker
    std::optional<Ipv4Address> address;
    bool expired;
    bool busy_task = false;
  };
  struct Scan {
    Node* node = nullptr;
    std::vector<Orphan> orphans;
    std::vector<std::shared_ptr<SandboxImpl>> expired;
    std::vector<std::shared_ptr<SandboxImpl>> to_pause;  // expired, OnExpiry::pause
    // Paused sandboxes whose container runs (a pause or resume interrupted by a crash).
    std::vector<std::shared_ptr<SandboxImpl>> running_paused;
    std::set<int> present;  // VMIDs of the listing in our range
  };
  Status scan_container(const pve::ContainerStatus& ct, std::int64_t now, Scan& scan);
  bool keep_pooled(Node& node, const pve::ContainerStatus& ct, const pve::Config& conf,
                   const SandboxMetadata& md);
  std::shared_ptr<SandboxImpl> adopt(Node& node, const pve::ContainerStatus& ct,
                                     const pve::Config& conf, const SandboxMetadata& md);
  Status reconcile_node(Node& node);
  void mark_unreachable(Node& node, const std::string& why);
  void forget_vanished(Node& node, const std::set<std::string>& registered_before,
                       const std::set<int>& pooled_before, const std::set<int>& present);
  void forget_vanished_members(Node& node, const std::set<int>& hot_before,
                               const std::set<int>& present);
  std::set<std::string> busy_orphans(const Node& node, std::vector<Orphan>& orphans);
  Status reap(Scan& scan, bool synced);
  // volumes/holders.cc: a listed holder registered (false: an orphan, e.g. an interrupted
  // create); holders of `node` listed before and gone now forgotten.
  bool keep_holder(Node& node, const pve::Config& conf, const SandboxMetadata& md);
  void forget_vanished_holders(Node& node, const std::set<int>& before,
                               const std::set<int>& present);
  // volumes/mounts.cc: a create's volumes checked and claimed for `sandbox_id` until
  // release_volumes (the registry's metadata holds them from then on); `only` narrowed to their
  // node. The mpN of a configure write.
  Status claim_volumes(const CreateOptions& options, const std::string& sandbox_id,
                       std::set<const Node*>* only);
  void release_volumes(const std::string& sandbox_id);
  Result<pve::Params> mount_params(const std::vector<VolumeMount>& mounts) const;
  std::string holder_of(const std::string& volume) const;  // mu_ held: a sandbox id, or ""
  // pause.cc: the steps of pause and resume (op_mutex held, the VMID busy).
  Status stop_paused(SandboxImpl& sandbox);
  // ttl_left: what a resume gives back (-1: the time the sandbox had left).
  Status pause_steps(SandboxImpl& sandbox, std::int64_t ttl_left = -1);
  // A paused sandbox found running is stopped (the reconcile's part of pause.cc's contract).
  Status settle_paused(SandboxImpl& sandbox);
  Status resume_steps(SandboxImpl& sandbox, seconds ttl);
  // A session to the started sandbox once its SSH answers on its own key (null without
  // wait_for_ssh).
  Result<std::shared_ptr<SshSession>> reconnect(const SandboxMetadata& md);
  // templates/build.cc: turning a build's container into the template (its SSH closed, its
  // egress, binding and address given back, stopped, described, converted).
  // `nodes`: its kTemplateNodesLabel.
  Result<TemplateCopy> seal_template(Step& step, SandboxImpl& box, const TemplateRecipe& recipe,
                                     int base, const std::string& nodes);
  // templates/capture.cc: a capture's Proxmox steps (the sandbox's op lock held).
  Result<CustomTemplate> capture_steps(SandboxImpl& sandbox, const std::string& name,
                                       const std::string& owner, bool fork_base);
  // One copy built on `node` from `base` (its VMID left busy), its lines into `out`.
  Result<TemplateCopy> build_copy(const TemplateRecipe& recipe, Node& node, int base,
                                  const std::vector<std::string>& serves, const BuildOutput& out,
                                  std::string* log);
  // kUnavailable if `node` cannot build now (offline, agent down), for the copy of `group`.
  Status can_build(const Node& node, const std::vector<std::string>& group) const;
  // A copy of a build that failed elsewhere: destroyed, its VMID given back (not busy any more).
  void drop_copy(Node& node, const TemplateCopy& copy, const std::string& name);
  // The VMID a recipe's base names on `node` (its template, a VMID, a custom template's name).
  Result<int> recipe_base(const TemplateRecipe& recipe, const Node& node) const;
  // A custom template's VMID by name (mu_ held; 0: none): the copy a create on `node` clones.
  int custom_vmid_locked(const std::string& name, const Node& node) const;
  std::vector<std::string> node_names() const;  // in configuration order

  void loop();
  Status hook(std::string_view step) const { return hook_ ? hook_(step) : Status{}; }

  const ManagerConfig cfg_;
  const FaultHook hook_;
  TimedPve pve_;
  const std::vector<std::unique_ptr<Node>> nodes_;
  VmidPool vmids_;

  mutable std::mutex mu_;  // registry_, busy_vmids_, inflight_, stats_
  std::map<std::string, std::shared_ptr<SandboxImpl>> registry_;
  // Live sandboxes per owner, and each one's owner: kept with registry_ by enroll_locked and
  // unenroll_locked (the only writers of the three), so count_owned needs no walk.
  std::map<std::string, std::set<std::string>> owned_;  // owner -> the ids of its sandboxes
  std::map<std::string, std::string> owner_of_;
  void enroll_locked(const std::string& id, std::shared_ptr<SandboxImpl> sb,
                     const std::string& owner);
  void unenroll_locked(const std::string& id);
  std::set<int> busy_vmids_;  // creates/destroys in flight in this process
  int inflight_ = 0;
  ManagerStats stats_;
  LatencyRecorder pause_times_, resume_times_;  // pause.cc
  Manager::OwnerLimits owner_limits_;           // pause.cc (under mu_), asked by owner_admits
  Status owner_admits(const SandboxImpl& sandbox, bool pausing);
  std::deque<Pooled> pool_;
  std::condition_variable pool_cv_;  // with mu_: the pool shrank, or stop
  bool pool_stop_ = false;
  bool pool_started_ = false;  // start_pool ran: hot workers may start (start_hot_workers)
  std::thread pool_thread_;
  // Per cfg_.hot_pools entry (in order), per node (in order); then the custom templates' own
  // (sync_template_pools adds them, never removes one: indexes stay valid).
  std::deque<HotProfile> hot_;
  std::deque<HotMember> hot_discard_;  // members to destroy (their VMIDs busy)
  std::condition_variable hot_cv_;     // with mu_: a member taken or discarded, or stop
  std::vector<std::thread> hot_threads_;

  std::map<int, std::string> template_nodes_;  // template VMID -> its node (under mu_)
  // Clones of one template are serial on Proxmox: queued here, per template (under mu_).
  std::map<int, std::unique_ptr<CloneQueue>> clone_queues_;
  std::map<int, ReplicaSet> replica_sets_;  // by the primary's VMID (under mu_)
  std::map<int, int> clone_load_;           // clone source VMID -> clones in flight (under mu_)
  std::mutex reconcile_mu_;
  std::map<std::string, CustomTemplate> custom_;  // by name (under mu_)
  std::mutex build_mu_;                           // one template build at a time
  // Under mu_: names being captured, fork bases in use by a fork, captures made since the last
  // refresh_custom_templates began (kept by it though it did not see them).
  std::multiset<std::string> capturing_, forking_;
  std::set<std::string> captured_;
  std::map<std::string, std::pair<VolumeInfo, std::string>> volumes_;  // id -> its, mp0's volid
  std::map<std::string, std::string> volume_claims_;  // volume id -> the create's sandbox id
  std::set<std::pair<std::string, std::string>> volume_names_;  // (owner, name) being created
  std::atomic<int> nodes_reached_{0};  // nodes the last reconcile reached (Proxmox and agent)

  std::thread thread_;
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stop_ = false;
};

}  // namespace pvs::lifecycle
