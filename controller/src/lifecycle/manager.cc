// Manager and Sandbox: see manager.h for the contract and docs/architecture.md ("Sandbox
// lifecycle") for the step list, the rollback of each step and recovery.
#include "pvesandbox/manager.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "pvesandbox/agent_client.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/mac_address.h"
#include "pvesandbox/id_pool.h"

namespace pvs {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kTag = "pve-sandbox";

std::int64_t now_unix() {
  return static_cast<std::int64_t>(std::time(nullptr));
}

Error pve_error(const pve::ApiError& e, std::string_view what) {
  Error out = e.to_error();
  out.message = std::string(what) + ": " + out.message;
  return out;
}

std::mt19937_64& rng() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return gen;
}

std::string random_hex(int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < digits; ++i) out += kHex[rng()() % 16];
  return out;
}

// The sandbox's MAC, derived from its address: 02:53:<the four address bytes>, locally
// administered and unicast. The controller chooses it so that it can BIND the port before the
// container starts, and deriving it (rather than drawing it) means an address always comes with
// the same MAC: the node's dnsmasq then hands a reused address to its new container even while
// the previous container's lease runs (it refuses an address leased to a different MAC), and
// neighbours' ARP caches are never stale.
MacAddress mac_for(Ipv4Address address) {
  auto a = address.to_uint();
  return MacAddress(MacAddress::Bytes{
      0x02, 0x53, static_cast<std::uint8_t>(a >> 24), static_cast<std::uint8_t>(a >> 16),
      static_cast<std::uint8_t>(a >> 8), static_cast<std::uint8_t>(a)});
}

bool valid_hostname(std::string_view h) {
  if (h.empty() || h.size() > 63) return false;
  if (h.front() == '-' || h.back() == '-') return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The label of a pooled clone that names the template it was cloned from.
constexpr std::string_view kPoolTemplateLabel = "pve-sandbox/template";

std::string port_name(int vmid, bool firewall) {
  return firewall ? "fwpr" + std::to_string(vmid) + "p0" : "veth" + std::to_string(vmid) + "i0";
}

// "name=eth0,bridge=vmbr1,hwaddr=..,ip=..": key -> value.
std::map<std::string, std::string> parse_property_string(std::string_view text) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    auto comma = text.find(',', pos);
    auto part =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    auto eq = part.find('=');
    if (eq != std::string_view::npos)
      out[std::string(part.substr(0, eq))] = std::string(part.substr(eq + 1));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

int config_int(const pve::Config& c, const std::string& key, int fallback) {
  auto it = c.find(key);
  if (it == c.end()) return fallback;
  try {
    return std::stoi(it->second);
  } catch (...) {
    return fallback;
  }
}

// The size of a disk property string ("local-lvm:vm-100-disk-0,size=8G") in GiB; 0 if absent.
double size_gib(const std::string& rootfs) {
  auto props = parse_property_string(rootfs);
  auto it = props.find("size");
  if (it == props.end() || it->second.empty()) return 0;
  try {
    double v = std::stod(it->second);
    char unit = it->second.back();
    if (unit == 'T') v *= 1024;
    if (unit == 'M') v /= 1024;
    if (unit == 'K') v /= 1024 * 1024;
    return v;
  } catch (...) {
    return 0;
  }
}

int size_gb(const std::string& rootfs) {
  return static_cast<int>(size_gib(rootfs));
}

// Latencies and outcomes of calls to one peer; lock-free, read as a CallStats.
class LatencyRecorder {
 public:
  void record(Clock::duration d, bool ok) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
    if (ns < 0) ns = 0;
    std::size_t i = 0;
    while (i < CallStats::kBucketBoundsMs.size() &&
           ns > static_cast<std::int64_t>(CallStats::kBucketBoundsMs[i]) * 1000000)
      ++i;
    sum_ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
    if (!ok) errors_.fetch_add(1, std::memory_order_relaxed);
    buckets_[i].fetch_add(1, std::memory_order_relaxed);
  }
  CallStats snapshot() const {
    CallStats s;
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      total += buckets_[i].load(std::memory_order_relaxed);
      s.buckets[i] = total;
    }
    s.count = total;
    s.errors = std::min(total, errors_.load(std::memory_order_relaxed));
    s.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
    return s;
  }

 private:
  std::array<std::atomic<std::uint64_t>, CallStats::kBucketBoundsMs.size() + 1> buckets_{};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<std::uint64_t> sum_ns_{0};
};

template <class F>
auto timed(LatencyRecorder& recorder, F&& f) {
  auto start = Clock::now();
  auto r = f();
  recorder.record(Clock::now() - start, r.has_value());
  return r;
}

// The Proxmox calls the lifecycle makes, each timed into `calls` (tasks into `tasks`).
class TimedPve {
 public:
  explicit TimedPve(std::unique_ptr<pve::Client> client) : c_(std::move(client)) {}

  pve::Result<std::string> call(std::string_view method, std::string_view path,
                                const pve::Params& params = {}) {
    return timed(calls, [&] { return c_->call(method, path, params); });
  }
  pve::Result<std::vector<pve::ContainerStatus>> list_containers(std::string_view node) {
    return timed(calls, [&] { return c_->list_containers(node); });
  }
  pve::Result<std::string> clone(std::string_view node, const pve::CloneRequest& request) {
    return timed(calls, [&] { return c_->clone(node, request); });
  }
  pve::Result<pve::Config> config(std::string_view node, int vmid) {
    return timed(calls, [&] { return c_->config(node, vmid); });
  }
  pve::Status update_config(std::string_view node, int vmid, const pve::Params& changes) {
    return timed(calls, [&] { return c_->update_config(node, vmid, changes); });
  }
  pve::Result<std::string> resize(std::string_view node, int vmid, std::string_view disk,
                                  std::string_view size) {
    return timed(calls, [&] { return c_->resize(node, vmid, disk, size); });
  }
  pve::Result<std::string> start(std::string_view node, int vmid) {
    return timed(calls, [&] { return c_->start(node, vmid); });
  }
  pve::Result<std::string> stop(std::string_view node, int vmid) {
    return timed(calls, [&] { return c_->stop(node, vmid); });
  }
  pve::Result<pve::ContainerStatus> status(std::string_view node, int vmid) {
    return timed(calls, [&] { return c_->status(node, vmid); });
  }
  pve::Result<std::string> destroy(std::string_view node, int vmid,
                                   const pve::DestroyOptions& options) {
    return timed(calls, [&] { return c_->destroy(node, vmid, options); });
  }
  pve::Result<std::vector<pve::Snapshot>> snapshots(std::string_view node, int vmid) {
    return timed(calls, [&] { return c_->snapshots(node, vmid); });
  }
  pve::Result<std::string> create_snapshot(std::string_view node, int vmid, std::string_view name,
                                           std::string_view description) {
    return timed(calls, [&] { return c_->create_snapshot(node, vmid, name, description); });
  }
  pve::Result<std::string> rollback_snapshot(std::string_view node, int vmid, std::string_view name,
                                             bool start_after) {
    return timed(calls, [&] { return c_->rollback_snapshot(node, vmid, name, start_after); });
  }
  pve::Result<std::string> delete_snapshot(std::string_view node, int vmid, std::string_view name) {
    return timed(calls, [&] { return c_->delete_snapshot(node, vmid, name); });
  }
  pve::Result<pve::TaskStatus> wait_task(std::string_view upid, const pve::WaitOptions& options) {
    return timed(tasks, [&] { return c_->wait_task(upid, options); });
  }

  LatencyRecorder calls;
  LatencyRecorder tasks;

 private:
  std::unique_ptr<pve::Client> c_;
};

// pve-sandbox-agent through the public AgentClient, every request timed. Agent errors carry
// the verb ("agent: REVOKE: ...") so that logs say which step failed.
class TimedAgent {
 public:
  explicit TimedAgent(const ManagerAgentOptions& o) : client_(client_options(o)) {}

  Status allow(Ipv4Address address, std::uint32_t ttl_seconds) {
    return named("ALLOW", timed(calls, [&] { return client_.allow(address, ttl_seconds); }));
  }
  Status revoke(Ipv4Address address) {
    return named("REVOKE", timed(calls, [&] { return client_.revoke(address); }));
  }
  Result<std::uint64_t> sync(const std::vector<proto::Grant>& grants) {
    return named("SYNC", timed(calls, [&] { return client_.sync(grants); }));
  }
  Status bind(const proto::Binding& binding) {
    return named("BIND", timed(calls, [&] { return client_.bind(binding); }));
  }
  Status unbind(const std::string& port) {
    return named("UNBIND", timed(calls, [&] { return client_.unbind(port); }));
  }
  Result<std::vector<proto::Binding>> bindings() {
    return named("BINDINGS", timed(calls, [&] { return client_.bindings(); }));
  }
  Result<proto::StatusFields> status() {
    return named("STATUS", timed(calls, [&] { return client_.status(); }));
  }
  // A HELLO on the (re)connected link: notices an agent that went away and came back.
  Status ping() {
    auto r = timed(calls, [&] { return client_.call(proto::HelloRequest{}); });
    if (!r) return named("HELLO", Status(fail(r.error())));
    return {};
  }
  std::uint64_t connects() const { return client_.connections(); }

  LatencyRecorder calls;

 private:
  static AgentClientOptions client_options(const ManagerAgentOptions& o) {
    AgentClientOptions a;
    a.socket_path = o.socket_path;
    a.command = o.command;
    a.request_timeout = o.timeout;
    a.connect_timeout = std::min(o.timeout, milliseconds(5000));
    a.retries = 1;
    return a;
  }
  template <class R>
  static R named(std::string_view verb, R r) {
    if (!r) r.error().message = "agent: " + std::string(verb) + ": " + r.error().message;
    return r;
  }

  AgentClient client_;
};

class ManagerCore;

class SandboxImpl final : public Sandbox {
 public:
  SandboxImpl(std::shared_ptr<ManagerCore> core, SandboxMetadata md, std::string hostname, int cpus,
              int memory_mb, int disk_gb, proto::Binding binding)
      : Sandbox(md.id),
        core_(std::move(core)),
        md_(std::move(md)),
        hostname_(std::move(hostname)),
        cpus_(cpus),
        memory_mb_(memory_mb),
        disk_gb_(disk_gb),
        binding_(std::move(binding)) {}

  SandboxInfo info() const override;
  Result<ExecResult> exec(std::string command, ExecOptions options) override {
    auto ssh = session();
    if (!ssh) return fail(ssh.error());
    auto r = (*ssh)->exec(std::move(command), std::move(options));
    if (!r) return fail(static_cast<const Error&>(r.error()));
    return std::move(*r);
  }
  Status write_file(const std::string& path, std::string_view data, std::uint32_t mode) override {
    auto ssh = session();
    if (!ssh) return fail(ssh.error());
    UploadOptions o;
    o.mode = mode;
    auto r = (*ssh)->upload(path, data, o);
    if (!r) return fail(static_cast<const Error&>(r.error()));
    return {};
  }
  Result<std::string> read_file(const std::string& path, std::uint64_t max_size) override {
    auto ssh = session();
    if (!ssh) return fail(ssh.error());
    DownloadOptions o;
    o.max_size = max_size;
    auto r = (*ssh)->download(path, o);
    if (!r) return fail(static_cast<const Error&>(r.error()));
    return std::move(*r);
  }
  Status upload(const std::string& path, std::istream& in, const UploadOptions& options,
                std::optional<std::uint64_t> size_hint) override {
    auto ssh = session();
    if (!ssh) return fail(ssh.error());
    (void)size_hint;  // SshSession sizes its pipeline itself
    auto r = (*ssh)->upload(path, in, options);
    if (!r) return fail(static_cast<const Error&>(r.error()));
    return {};
  }
  Result<std::uint64_t> download(const std::string& path, std::ostream& out,
                                 const DownloadOptions& options) override {
    auto ssh = session();
    if (!ssh) return fail(ssh.error());
    auto r = (*ssh)->download(path, out, options);
    if (!r) return fail(static_cast<const Error&>(r.error()));
    return *r;
  }
  Result<std::vector<SftpEntry>> list_dir(const std::string& path) override {
    auto ssh = session();
    if (!ssh) return fail(ssh.error());
    auto r = (*ssh)->list_dir(path);
    if (!r) return fail(static_cast<const Error&>(r.error()));
    return std::move(*r);
  }
  Result<SftpAttributes> stat(const std::string& path) override {
    auto ssh = session();
    if (!ssh) return fail(ssh.error());
    auto r = (*ssh)->stat(path);
    if (!r) return fail(static_cast<const Error&>(r.error()));
    return *r;
  }

  Status set_internet(bool enabled) override;
  Result<pve::ContainerStatus> status() override;
  bool is_connected() const override {
    std::lock_guard lock(mu_);
    return ssh_ && ssh_->is_connected();
  }
  Status snapshot(const std::string& name, const std::string& description) override;
  Result<std::vector<SnapshotInfo>> snapshots() override;
  Status rollback(const std::string& name) override;
  Status delete_snapshot(const std::string& name) override;
  Status extend_ttl(std::chrono::seconds ttl) override;
  Status destroy() override;

  // For the manager.
  SandboxMetadata metadata() const {
    std::lock_guard lock(mu_);
    return md_;
  }
  int vmid() const { return md_.vmid; }  // never changes
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
  void close_session() {
    std::shared_ptr<SshSession> ssh;
    {
      std::lock_guard lock(mu_);
      ssh = std::move(ssh_);
    }
    if (ssh) ssh->close();
  }
  // Serialises state-changing operations (internet, ttl, snapshots, destroy) on this sandbox.
  std::mutex& op_mutex() { return op_mu_; }
  void set_phase(SandboxMetadata::Phase p) {
    std::lock_guard lock(mu_);
    md_.phase = p;
  }
  bool destroyed() const { return destroyed_.load(); }
  void mark_destroyed() { destroyed_ = true; }

 private:
  Result<std::shared_ptr<SshSession>> session();
  Result<bool> has_snapshot(const std::string& name);
  // Writes md into the description (op_mu_ held).
  Status write_metadata(const SandboxMetadata& md);

  std::shared_ptr<ManagerCore> core_;
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
  ManagerCore(ManagerConfig config, std::unique_ptr<pve::Client> pve,
              std::unique_ptr<AddressPool> addresses)
      : cfg_(std::move(config)),
        pve_(std::move(pve)),
        agent_(cfg_.agent),
        vmids_(cfg_.vmid_min, cfg_.vmid_max),
        addrs_(std::move(addresses)) {}

  ~ManagerCore() { stop_background(); }

  const ManagerConfig& config() const { return cfg_; }
  TimedPve& pve() { return pve_; }

  Result<std::shared_ptr<Sandbox>> create(const CreateOptions& options);
  Result<std::shared_ptr<Sandbox>> attach(const std::string& id);
  std::vector<SandboxInfo> list(const Labels& selector) const;
  Status destroy_by_id(const std::string& id);
  Status destroy(SandboxImpl& sandbox);
  Status reconcile();
  Health health();
  ManagerStats stats() const;

  Status grant(Ipv4Address address);
  Status ungrant(Ipv4Address address);
  Status wait(const pve::Result<std::string>& upid, std::string_view what);
  Status write_description(int vmid, const SandboxMetadata& md);

  void start_background();
  void start_pool();  // the warm pool's refill thread (if warm_pool > 0)
  void stop_background();
  // Drops the registry (it holds the sandboxes, which hold this core): called when the
  // Manager goes away, so that nothing keeps the core alive but handles still in use.
  void forget_all() {
    std::map<std::string, std::shared_ptr<SandboxImpl>> gone;
    std::lock_guard lock(mu_);
    gone.swap(registry_);
  }

 private:
  struct Step;  // rollback bookkeeping of one create
  Status rollback(Step& step);
  // Clones the template into a free VMID (step.vmid, busy), queued per template; `describe`
  // fills in the clone's hostname and description once the VMID is known. "already exists"
  // means somebody else's container: the VMID stays used and the next one is tried.
  Status clone_template(Step& step,
                        const std::function<void(int vmid, pve::CloneRequest&)>& describe);
  // The warm pool: stopped clones with phase "pooled" (under mu_).
  struct Pooled {
    int vmid;
    std::string id;  // the id in its description
  };
  std::optional<Pooled> take_pooled();  // marks the VMID busy
  Status fill_pool_once();
  void pool_loop();
  // Stops and purges a container if it is ours (description id == id, or unreadable marker
  // when id is empty). kNotFound from Proxmox is success.
  Status destroy_container(int vmid, const std::string& id);
  Status destroy_container_once(int vmid, const std::string& id);
  Status bind(const proto::Binding& binding);
  void unbind(const std::string& port);
  // Makes the agent's set exactly granted_ (renewing every lease), its bindings exactly
  // bound_, and frees quarantined addresses that the set no longer holds.
  Status sync_agent(const std::set<std::string>& keep_ports = {});
  Result<std::shared_ptr<SshSession>> wait_for_ssh(Ipv4Address address);
  void busy(int vmid, bool on) {
    std::lock_guard lock(mu_);
    if (on)
      busy_vmids_.insert(vmid);
    else
      busy_vmids_.erase(vmid);
  }
  void loop();
  Status hook(std::string_view step) const {
    return cfg_.fault_hook ? cfg_.fault_hook(step) : Status{};
  }

  const ManagerConfig cfg_;
  TimedPve pve_;
  TimedAgent agent_;
  VmidPool vmids_;
  std::unique_ptr<AddressPool> addrs_;

  mutable std::mutex mu_;  // registry_, busy_vmids_, inflight_, stats_
  std::map<std::string, std::shared_ptr<SandboxImpl>> registry_;
  std::set<int> busy_vmids_;  // creates/destroys in flight in this process
  int inflight_ = 0;
  ManagerStats stats_;
  std::deque<Pooled> pool_;
  std::condition_variable pool_cv_;  // with mu_: the pool shrank, or stop
  bool pool_stop_ = false;
  std::thread pool_thread_;

  std::mutex agent_mu_;  // granted_, bound_, quarantine_; held around agent calls
  std::set<Ipv4Address> granted_;
  std::map<std::string, proto::Binding> bound_;
  std::set<Ipv4Address> quarantine_;
  std::atomic<std::size_t> quarantined_{0};  // quarantine_.size(), readable without agent_mu_

  std::mutex clone_mu_;  // clones of the template are serial on Proxmox: queue them here
  std::mutex reconcile_mu_;

  std::thread thread_;
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stop_ = false;
};

// ---- agent state --------------------------------------------------------------------------

Status ManagerCore::grant(Ipv4Address address) {
  std::lock_guard lock(agent_mu_);
  granted_.insert(address);
  auto ttl = static_cast<std::uint32_t>(cfg_.internet_lease.count());
  if (auto r = agent_.allow(address, ttl); !r) {
    // The agent may have committed before the failure reached us: the address stays out of
    // the desired set, and the next SYNC removes it if it got in.
    granted_.erase(address);
    if (!agent_.revoke(address)) {
      quarantine_.insert(address);
      quarantined_ = quarantine_.size();
    }
    return r;
  }
  return {};
}

Status ManagerCore::ungrant(Ipv4Address address) {
  std::lock_guard lock(agent_mu_);
  granted_.erase(address);
  if (auto r = agent_.revoke(address); !r) {
    // Never ignored: the address is quarantined until a SYNC or LIST proves it is gone.
    quarantine_.insert(address);
    quarantined_ = quarantine_.size();
    addrs_->quarantine(address);
    log::warn("revoke of " + address.to_string() +
              " failed, address quarantined: " + r.error().message);
    return r;
  }
  return {};
}

Status ManagerCore::bind(const proto::Binding& binding) {
  std::lock_guard lock(agent_mu_);
  bound_[binding.port] = binding;
  auto r = agent_.bind(binding);
  if (!r) bound_.erase(binding.port);
  return r;
}

void ManagerCore::unbind(const std::string& port) {
  std::lock_guard lock(agent_mu_);
  bound_.erase(port);
  if (auto r = agent_.unbind(port); !r)
    log::warn("unbind of " + port + " failed (reconcile retries): " + r.error().message);
}

Status ManagerCore::sync_agent(const std::set<std::string>& keep_ports) {
  std::lock_guard lock(agent_mu_);
  std::vector<proto::Grant> grants;
  auto ttl = static_cast<std::uint32_t>(cfg_.internet_lease.count());
  for (auto a : granted_) grants.push_back(proto::Grant{a, ttl});
  if (auto r = agent_.sync(grants); !r) return fail(r.error());
  // The set is now exactly granted_: every quarantined address not in it is confirmed gone.
  std::set<Ipv4Address> live;
  {
    std::lock_guard reg(mu_);
    for (auto& [id, sb] : registry_) live.insert(sb->address());
  }
  for (auto a : quarantine_) {
    if (granted_.count(a)) continue;
    if (live.count(a))
      addrs_->mark_used(a);
    else
      addrs_->release_quarantined(a);
  }
  quarantine_.clear();
  quarantined_ = 0;

  auto current = agent_.bindings();
  if (!current) return fail(current.error());
  std::map<std::string, proto::Binding> have;
  for (auto& b : *current) have[b.port] = b;
  for (auto& [port, b] : have) {
    if (!bound_.count(port) && !keep_ports.count(port)) {
      if (auto r = agent_.unbind(port); !r) return r;
    }
  }
  for (auto& [port, b] : bound_) {
    auto it = have.find(port);
    if (it == have.end() || !(it->second == b)) {
      if (auto r = agent_.bind(b); !r) return r;
    }
  }
  return {};
}

// ---- Proxmox helpers -------------------------------------------------------------------------

Status ManagerCore::wait(const pve::Result<std::string>& upid, std::string_view what) {
  if (!upid) return fail(pve_error(upid.error(), what));
  // A failed status poll says nothing about the task, which runs on: poll again until the
  // deadline (giving up early would roll back while the task still works, e.g. a start).
  auto deadline = Clock::now() + cfg_.task_timeout;
  auto delay = milliseconds(100);
  for (;;) {
    pve::WaitOptions w;
    w.timeout = std::max(milliseconds(1),
                         std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    w.poll_initial = milliseconds(20);
    w.poll_max = milliseconds(500);
    auto done = pve_.wait_task(*upid, w);
    if (done) return {};
    auto kind = done.error().kind;
    bool poll_failed = kind == pve::ErrorKind::kServer || kind == pve::ErrorKind::kTransport ||
                       kind == pve::ErrorKind::kProtocol || kind == pve::ErrorKind::kTimeout;
    if (!poll_failed || Clock::now() + delay >= deadline)
      return fail(pve_error(done.error(), what));
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, milliseconds(1000));
  }
}

Status ManagerCore::write_description(int vmid, const SandboxMetadata& md) {
  auto r = pve_.update_config(cfg_.node, vmid, {{"description", encode_description(md)}});
  if (!r) return fail(pve_error(r.error(), "write metadata"));
  return {};
}

Status ManagerCore::destroy_container(int vmid, const std::string& id) {
  // Stop and delete are safe to repeat (not running / not found count as done), so a failed
  // attempt is retried a few times before the reconciler has to take over.
  auto delay = milliseconds(50);
  Status r;
  for (int attempt = 0; attempt < 8; ++attempt) {
    r = destroy_container_once(vmid, id);
    if (r || r.error().code == ErrorCode::kPermissionDenied) return r;
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, milliseconds(1000));
  }
  return r;
}

Status ManagerCore::destroy_container_once(int vmid, const std::string& id) {
  auto conf = pve_.config(cfg_.node, vmid);
  if (!conf) {
    if (conf.error().kind == pve::ErrorKind::kNotFound) return {};
    return fail(pve_error(conf.error(), "read config of " + std::to_string(vmid)));
  }
  auto desc = conf->find("description");
  auto md = decode_description(desc == conf->end() ? "" : desc->second);
  bool ours = md ? (md->id == id || id.empty())
                 : (id.empty() && md.error().code == ErrorCode::kInvalidArgument);
  if (!ours)
    return fail(ErrorCode::kPermissionDenied,
                "container " + std::to_string(vmid) + " is not this sandbox's; left alone");
  auto stop = pve_.stop(cfg_.node, vmid);
  if (!stop) {
    auto k = stop.error().kind;
    if (k == pve::ErrorKind::kNotFound) return {};
    if (k != pve::ErrorKind::kNotRunning) return fail(pve_error(stop.error(), "stop"));
  } else if (auto w = wait(stop, "stop"); !w) {
    if (w.error().code == ErrorCode::kNotFound) return {};
    // A stop task that failed because the CT stopped meanwhile is fine; destroy decides.
  }
  pve::DestroyOptions d;
  d.purge = true;
  d.destroy_unreferenced_disks = true;
  auto del = pve_.destroy(cfg_.node, vmid, d);
  if (!del && del.error().kind == pve::ErrorKind::kNotFound) return {};
  if (auto w = wait(del, "destroy"); !w) {
    // The task may have failed because the container is gone already.
    auto again = pve_.status(cfg_.node, vmid);
    if (!again && again.error().kind == pve::ErrorKind::kNotFound) return {};
    return w;
  }
  return {};
}

Result<std::shared_ptr<SshSession>> ManagerCore::wait_for_ssh(Ipv4Address address) {
  SshConfig sc = cfg_.ssh;
  sc.host = address.to_string();
  sc.connect_timeout = std::min(sc.connect_timeout, milliseconds(2000));
  auto deadline = Clock::now() + cfg_.ssh_ready_timeout;
  Error last{ErrorCode::kTimeout, "ssh not ready"};
  auto delay = milliseconds(20);
  for (;;) {
    auto ssh = std::make_shared<SshSession>(sc);
    ExecOptions probe;
    probe.timeout = seconds(10);
    auto r = ssh->exec("true", probe);
    if (r && r->exit_code == 0) {
      ssh->close();
      // The sandbox's session keeps the configured connect timeout; it connects on first use.
      SshConfig full = cfg_.ssh;
      full.host = sc.host;
      return std::make_shared<SshSession>(full);
    }
    if (!r) last = r.error();
    ssh->close();
    // Errors that waiting does not fix.
    if (!r && (r.error().is(SshErrc::kAuthFailed) || r.error().is(SshErrc::kHostKeyMismatch) ||
               r.error().is(SshErrc::kKeyInvalid) || r.error().is(SshErrc::kKeyUnsupported)))
      return fail(ErrorCode::kUnavailable, "ssh: " + last.message);
    if (Clock::now() + delay >= deadline)
      return fail(ErrorCode::kTimeout, "ssh not ready in time: " + last.message);
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, milliseconds(500));
  }
}

// ---- create ----------------------------------------------------------------------------------

struct ManagerCore::Step {
  std::string id;
  std::optional<Ipv4Address> address;
  int vmid = 0;
  bool container_maybe = false;  // a clone was sent: the container may exist
  std::string container_id;      // the id its description carries, if not `id` (a pooled clone)
  std::string port;              // BIND sent
  bool granted = false;
  std::shared_ptr<SshSession> ssh;
};

Status ManagerCore::rollback(Step& s) {
  Status result;
  bool address_clean = true;
  if (s.ssh) s.ssh->close();
  if (s.granted) {
    if (auto r = ungrant(*s.address); !r) {
      address_clean = false;
      result = r;
    }
  }
  if (!s.port.empty()) unbind(s.port);
  bool container_gone = true;
  if (s.container_maybe) {
    auto r = destroy_container(s.vmid, s.container_id.empty() ? s.id : s.container_id);
    // A configure that failed in transport may still have written our description.
    if (!r && r.error().code == ErrorCode::kPermissionDenied && !s.container_id.empty())
      r = destroy_container(s.vmid, s.id);
    if (!r) {
      // Left with phase "creating" in its description: the reconciler destroys it.
      container_gone = false;
      log::error("rollback: container " + std::to_string(s.vmid) +
                 " not destroyed (reconcile retries): " + r.error().message);
      if (result) result = r;
    }
  }
  if (s.vmid != 0) {
    if (container_gone) vmids_.release(static_cast<std::uint32_t>(s.vmid));
    busy(s.vmid, false);
  }
  if (s.address && address_clean) addrs_->release(*s.address);
  return result;
}

Result<std::shared_ptr<Sandbox>> ManagerCore::create(const CreateOptions& o) {
  // Validation.
  if (!o.hostname.empty() && !valid_hostname(o.hostname))
    return fail(ErrorCode::kInvalidArgument, "hostname must be a DNS label (RFC 1123)");
  if (o.cpus < 1 || o.cpus > cfg_.max_cpus)
    return fail(ErrorCode::kInvalidArgument, "cpus must be 1.." + std::to_string(cfg_.max_cpus));
  if (o.memory_mb < 16 || o.memory_mb > cfg_.max_memory_mb)
    return fail(ErrorCode::kInvalidArgument,
                "memory_mb must be 16.." + std::to_string(cfg_.max_memory_mb));
  if (o.disk_gb < 0 || o.disk_gb > cfg_.max_disk_gb)
    return fail(ErrorCode::kInvalidArgument,
                "disk_gb must be 0.." + std::to_string(cfg_.max_disk_gb));
  if (o.ttl.count() < 0 || o.ttl > cfg_.max_ttl)
    return fail(ErrorCode::kInvalidArgument, "ttl out of range");
  if (auto v = validate_labels(o.labels); !v) return fail(v.error());
  // A disk only grows: a smaller one is the caller's mistake, said before anything is cloned.
  double template_gib = 0;
  if (o.disk_gb > 0) {
    auto t = pve_.config(cfg_.node, cfg_.template_vmid);
    if (!t) return fail(pve_error(t.error(), "template config"));
    template_gib = t->count("rootfs") ? size_gib(t->at("rootfs")) : 0;
    if (o.disk_gb < template_gib) {
      std::ostringstream gib;
      gib << template_gib;
      return fail(ErrorCode::kInvalidArgument, "disk_gb " + std::to_string(o.disk_gb) +
                                                   " is smaller than the template's disk (" +
                                                   gib.str() +
                                                   " GiB): a container's disk can only grow");
    }
  }
  {
    std::lock_guard lock(mu_);
    if (static_cast<int>(registry_.size()) + inflight_ >= cfg_.max_sandboxes)
      return fail(ErrorCode::kUnavailable, "sandbox limit reached");
    ++inflight_;
  }
  struct Inflight {
    ManagerCore* m;
    ~Inflight() {
      std::lock_guard lock(m->mu_);
      --m->inflight_;
    }
  } inflight_guard{this};

  Step s;
  s.id = "sb-" + random_hex(12);
  auto address = addrs_->acquire();
  if (!address) {
    std::lock_guard lock(mu_);
    ++stats_.create_failures;
    return fail(ErrorCode::kUnavailable, "no free address: " + address.error().message);
  }
  s.address = *address;
  auto failed = [&](Error e) -> Result<std::shared_ptr<Sandbox>> {
    log::warn("create " + s.id + " failed: " + e.message);
    (void)rollback(s);
    std::lock_guard lock(mu_);
    ++stats_.create_failures;
    return fail(std::move(e));
  };

  SandboxMetadata md;
  md.id = s.id;
  md.phase = SandboxMetadata::Phase::kCreating;
  md.created_at = now_unix();
  auto ttl = o.ttl.count() == 0 ? cfg_.default_ttl : o.ttl;
  md.expires_at = ttl.count() == 0 ? 0 : md.created_at + ttl.count();
  md.internet = o.internet;
  md.address = *address;
  md.owner = o.owner;
  md.labels = o.labels;

  // 1. A stopped clone from the warm pool, else a clone (queued per template).
  if (auto h = hook("clone"); !h) return failed(h.error());
  auto pooled = take_pooled();
  if (pooled) {
    s.vmid = pooled->vmid;
    s.container_maybe = true;
    s.container_id = pooled->id;  // until the configure step writes our description
  } else {
    auto cloned = clone_template(s, [&](int vmid, pve::CloneRequest& req) {
      md.vmid = vmid;
      req.hostname = o.hostname.empty() ? "sandbox-" + std::to_string(vmid) : o.hostname;
      req.description = encode_description(md);
    });
    if (!cloned) return failed(cloned.error());
  }
  md.vmid = s.vmid;
  std::string hostname = o.hostname.empty() ? "sandbox-" + std::to_string(s.vmid) : o.hostname;
  {
    std::lock_guard lock(mu_);
    ++(pooled ? stats_.pool_hits : stats_.pool_misses);
  }
  if (pooled) pool_cv_.notify_all();  // refill

  // 2. Configure: resources, address, tag. Never `features`. With DHCP the address is still
  // ours: the agent's BIND publishes it as the node dnsmasq's reservation for this MAC.
  auto mac = mac_for(*address);
  proto::Binding binding{port_name(s.vmid, cfg_.firewall), mac, *address};
  std::string net0 = "name=eth0,bridge=" + cfg_.bridge + ",hwaddr=" + upper(mac.to_string());
  if (cfg_.dhcp) {
    net0 += ",ip=dhcp";
  } else {
    net0 += ",ip=" + address->to_string() + "/" + std::to_string(cfg_.sandbox_cidr.prefix()) +
            ",gw=" + cfg_.gateway.to_string();
  }
  net0 += ",type=veth";
  if (cfg_.firewall) net0 += ",firewall=1";
  if (auto h = hook("configure"); !h) return failed(h.error());
  pve::Params params = {{"cores", std::to_string(o.cpus)},
                        {"memory", std::to_string(o.memory_mb)},
                        {"swap", "0"},
                        {"hostname", hostname},
                        {"net0", net0},
                        {"tags", std::string(kTag)}};
  // A pooled clone becomes this sandbox in the same (atomic) config write.
  if (pooled) params.emplace_back("description", encode_description(md));
  auto conf = pve_.update_config(cfg_.node, s.vmid, params);
  if (!conf) return failed(pve_error(conf.error(), "configure"));
  s.container_id.clear();
  // 3. Resize (Proxmox refuses a resize to the size the disk has).
  int disk_gb = o.disk_gb;
  if (o.disk_gb > 0 && static_cast<double>(o.disk_gb) != template_gib) {
    if (auto h = hook("resize"); !h) return failed(h.error());
    if (auto r = wait(pve_.resize(cfg_.node, s.vmid, "rootfs", std::to_string(o.disk_gb) + "G"),
                      "resize");
        !r)
      return failed(r.error());
  }
  // 4. L2 guard before the first frame.
  if (auto h = hook("bind"); !h) return failed(h.error());
  if (auto r = bind(binding); !r) return failed(r.error());
  s.port = binding.port;
  // 5. Start.
  if (auto h = hook("start"); !h) return failed(h.error());
  if (auto r = wait(pve_.start(cfg_.node, s.vmid), "start"); !r) return failed(r.error());
  // 6. SSH.
  if (auto h = hook("ssh"); !h) return failed(h.error());
  if (cfg_.wait_for_ssh) {
    auto ssh = wait_for_ssh(*address);
    if (!ssh) return failed(ssh.error());
    s.ssh = *ssh;
  }
  // 7. Internet, with a lease the reconciler renews.
  if (o.internet) {
    s.granted = true;  // rollback revokes even if ALLOW failed half-way
    if (auto h = hook("internet"); !h) return failed(h.error());
    if (auto r = grant(*address); !r) return failed(r.error());
  }
  // 8. Ready: the only step that makes the container survive a restart.
  md.phase = SandboxMetadata::Phase::kReady;
  if (auto h = hook("ready"); !h) return failed(h.error());
  if (auto r = write_description(s.vmid, md); !r) return failed(r.error());

  if (disk_gb == 0) {
    auto c = pve_.config(cfg_.node, s.vmid);
    if (c && c->count("rootfs")) disk_gb = size_gb(c->at("rootfs"));
  }
  auto sandbox = std::make_shared<SandboxImpl>(shared_from_this(), md, hostname, o.cpus,
                                               o.memory_mb, disk_gb, binding);
  if (s.ssh) sandbox->adopt_session(s.ssh);
  {
    std::lock_guard lock(mu_);
    registry_[md.id] = sandbox;
    busy_vmids_.erase(s.vmid);
    ++stats_.creates;
  }
  log::info("created " + md.id + " vmid=" + std::to_string(s.vmid) +
            " address=" + address->to_string() + (o.internet ? " internet" : ""));
  return std::shared_ptr<Sandbox>(sandbox);
}

Status ManagerCore::clone_template(
    Step& s, const std::function<void(int vmid, pve::CloneRequest&)>& describe) {
  for (int attempt = 0;; ++attempt) {
    auto vmid = vmids_.acquire();
    if (!vmid) return fail(ErrorCode::kUnavailable, "no free VMID in the range");
    s.vmid = static_cast<int>(*vmid);
    busy(s.vmid, true);
    pve::CloneRequest req;
    req.source_vmid = cfg_.template_vmid;
    req.new_vmid = s.vmid;
    req.pool = cfg_.pool;
    req.storage = cfg_.storage;
    if (cfg_.full_clone) req.full = true;
    describe(s.vmid, req);
    Status cloned;
    bool exists = false;
    {
      std::unique_lock clone_lock(clone_mu_);
      auto lock_deadline = Clock::now() + cfg_.clone_lock_wait;
      auto delay = milliseconds(50);
      for (;;) {
        auto upid = pve_.clone(cfg_.node, req);
        if (!upid && upid.error().kind == pve::ErrorKind::kAlreadyExists) {
          exists = true;
          break;
        }
        if (upid) s.container_maybe = true;
        // A transport failure may still have created it.
        if (!upid && upid.error().kind == pve::ErrorKind::kTransport) s.container_maybe = true;
        bool locked = !upid && upid.error().kind == pve::ErrorKind::kLocked;
        if (locked && Clock::now() + delay < lock_deadline) {
          std::this_thread::sleep_for(delay);
          delay = std::min(delay * 2, milliseconds(1000));
          continue;
        }
        cloned = wait(upid, "clone");
        break;
      }
    }
    if (exists) {
      // Somebody else's: keep the VMID marked used, never touch that container.
      busy(s.vmid, false);
      s.vmid = 0;
      if (attempt < 16) continue;
      return fail(ErrorCode::kUnavailable, "no usable VMID after 16 attempts");
    }
    return cloned;
  }
}

// ---- warm pool -------------------------------------------------------------------------------

std::optional<ManagerCore::Pooled> ManagerCore::take_pooled() {
  std::lock_guard lock(mu_);
  if (pool_.empty()) return std::nullopt;
  auto p = pool_.front();
  pool_.pop_front();
  busy_vmids_.insert(p.vmid);
  return p;
}

Status ManagerCore::fill_pool_once() {
  Step s;
  SandboxMetadata md;
  md.id = "pool-" + random_hex(12);
  md.phase = SandboxMetadata::Phase::kPooled;
  md.created_at = now_unix();
  md.labels[std::string(kPoolTemplateLabel)] = std::to_string(cfg_.template_vmid);
  auto cloned = clone_template(s, [&](int vmid, pve::CloneRequest& req) {
    md.vmid = vmid;
    req.hostname = "pool-" + std::to_string(vmid);
    req.description = encode_description(md);
  });
  if (!cloned) {
    if (s.container_maybe) s.container_id = md.id;
    s.id = md.id;
    (void)rollback(s);
    return cloned;
  }
  std::lock_guard lock(mu_);
  pool_.push_back({s.vmid, md.id});
  busy_vmids_.erase(s.vmid);
  return {};
}

void ManagerCore::pool_loop() {
  auto backoff = milliseconds(500);
  for (;;) {
    {
      std::unique_lock lock(mu_);
      // Also wakes periodically: a reconcile may have dropped pooled containers.
      pool_cv_.wait_for(lock, seconds(5), [&] {
        return pool_stop_ || static_cast<int>(pool_.size()) < cfg_.warm_pool;
      });
      if (pool_stop_) return;
      if (static_cast<int>(pool_.size()) >= cfg_.warm_pool) continue;
    }
    if (auto r = fill_pool_once(); !r) {
      log::warn("warm pool: clone failed: " + r.error().message);
      std::unique_lock lock(mu_);
      if (pool_cv_.wait_for(lock, backoff, [&] { return pool_stop_; })) return;
      backoff = std::min(backoff * 2, milliseconds(30000));
    } else {
      backoff = milliseconds(500);
    }
  }
}

// ---- destroy ---------------------------------------------------------------------------------

Status ManagerCore::destroy(SandboxImpl& sb) {
  std::lock_guard op(sb.op_mutex());
  if (sb.destroyed()) return {};
  busy(sb.vmid(), true);
  auto md = sb.metadata();
  // 1. Mark: an interrupted destroy is finished by recovery.
  if (md.phase != SandboxMetadata::Phase::kDestroying) {
    md.phase = SandboxMetadata::Phase::kDestroying;
    Status r = hook("destroy:mark");
    if (r) r = write_description(sb.vmid(), md);
    if (!r && r.error().code != ErrorCode::kNotFound) {
      busy(sb.vmid(), false);
      std::lock_guard lock(mu_);
      ++stats_.destroy_failures;
      return r;
    }
    sb.set_phase(md.phase);
  }
  // 2. Revoke first; a failed revoke quarantines the address (never ignored).
  bool address_clean = true;
  if (auto h = hook("destroy:revoke"); !h) {
    // As a failed REVOKE: the agent may still hold the address.
    std::lock_guard lock(agent_mu_);
    granted_.erase(sb.address());
    quarantine_.insert(sb.address());
    quarantined_ = quarantine_.size();
    addrs_->quarantine(sb.address());
    address_clean = false;
  } else if (auto r = ungrant(sb.address()); !r) {
    address_clean = false;
  }
  unbind(sb.binding().port);
  sb.close_session();
  // 3. Stop and purge.
  Status gone = hook("destroy:delete");
  if (gone) gone = destroy_container(sb.vmid(), sb.id());
  if (auto r = gone; !r) {
    busy(sb.vmid(), false);
    std::lock_guard lock(mu_);
    ++stats_.destroy_failures;
    return r;  // still registered in phase "destroying": the reconciler retries
  }
  sb.mark_destroyed();
  vmids_.release(static_cast<std::uint32_t>(sb.vmid()));
  if (address_clean) addrs_->release(sb.address());
  {
    std::lock_guard lock(mu_);
    registry_.erase(sb.id());
    busy_vmids_.erase(sb.vmid());
    ++stats_.destroys;
  }
  log::info("destroyed " + sb.id() + " vmid=" + std::to_string(sb.vmid()));
  return {};
}

Status ManagerCore::destroy_by_id(const std::string& id) {
  std::shared_ptr<SandboxImpl> sb;
  {
    std::lock_guard lock(mu_);
    auto it = registry_.find(id);
    if (it == registry_.end()) return fail(ErrorCode::kNotFound, "no sandbox " + id);
    sb = it->second;
  }
  return destroy(*sb);
}

Result<std::shared_ptr<Sandbox>> ManagerCore::attach(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = registry_.find(id);
  if (it == registry_.end() || it->second->destroyed())
    return fail(ErrorCode::kNotFound, "no sandbox " + id);
  return std::shared_ptr<Sandbox>(it->second);
}

std::vector<SandboxInfo> ManagerCore::list(const Labels& selector) const {
  std::vector<std::shared_ptr<SandboxImpl>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, sb] : registry_) all.push_back(sb);
  }
  std::vector<SandboxInfo> out;
  for (auto& sb : all) {
    auto info = sb->info();
    bool match = std::all_of(selector.begin(), selector.end(), [&](auto& kv) {
      auto it = info.labels.find(kv.first);
      return it != info.labels.end() && it->second == kv.second;
    });
    if (match) out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const SandboxInfo& a, const SandboxInfo& b) {
    return std::tie(a.created_at, a.vmid) < std::tie(b.created_at, b.vmid);
  });
  return out;
}

// ---- recovery and reconciliation -------------------------------------------------------------

Status ManagerCore::reconcile() {
  std::lock_guard rec(reconcile_mu_);
  auto fail_count = [&](Error e) -> Status {
    std::lock_guard lock(mu_);
    ++stats_.reconcile_failures;
    return fail(std::move(e));
  };
  // Only sandboxes registered (and clones pooled) before the listing can have vanished from it.
  std::set<std::string> registered_before;
  std::set<int> pooled_before;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, sb] : registry_) registered_before.insert(id);
    for (auto& p : pool_) pooled_before.insert(p.vmid);
  }
  auto cts = pve_.list_containers(cfg_.node);
  if (!cts) return fail_count(pve_error(cts.error(), "list containers"));

  struct Orphan {
    int vmid;
    std::string id;  // "" for an unreadable marker
    std::optional<Ipv4Address> address;
    bool expired;
    bool busy_task = false;
  };
  std::vector<Orphan> orphans;
  std::vector<std::shared_ptr<SandboxImpl>> expired;
  std::set<int> present;
  auto now = now_unix();
  for (auto& ct : *cts) {
    if (ct.vmid < static_cast<int>(cfg_.vmid_min) || ct.vmid > static_cast<int>(cfg_.vmid_max))
      continue;
    present.insert(ct.vmid);
    std::shared_ptr<SandboxImpl> known;
    {
      std::lock_guard lock(mu_);
      if (busy_vmids_.count(ct.vmid)) continue;
      for (auto& [id, sb] : registry_)
        if (sb->vmid() == ct.vmid) known = sb;
    }
    if (known) {
      known->set_status(ct.status);
      auto md = known->metadata();
      if (md.phase == SandboxMetadata::Phase::kDestroying ||
          (md.expires_at != 0 && md.expires_at <= now))
        expired.push_back(known);
      continue;
    }
    if (ct.is_template) {
      vmids_.mark_used(static_cast<std::uint32_t>(ct.vmid));
      continue;
    }
    auto conf = pve_.config(cfg_.node, ct.vmid);
    if (!conf) {
      if (conf.error().kind == pve::ErrorKind::kNotFound) continue;
      return fail_count(pve_error(conf.error(), "read config"));
    }
    vmids_.mark_used(static_cast<std::uint32_t>(ct.vmid));
    auto d = conf->find("description");
    auto md = decode_description(d == conf->end() ? "" : d->second);
    if (!md) {
      if (md.error().code == ErrorCode::kNotFound) continue;  // not ours
      orphans.push_back({ct.vmid, "", std::nullopt, false, false});
      continue;
    }
    if (md->vmid != ct.vmid) {  // a copy of a description, e.g. a manual clone: not a sandbox
      orphans.push_back({ct.vmid, md->id, std::nullopt, false, false});
      continue;
    }
    if (md->phase == SandboxMetadata::Phase::kPooled) {
      // A warm-pool clone: kept while it is stopped, of today's template and wanted.
      auto tpl = md->labels.find(std::string(kPoolTemplateLabel));
      // A clone still being made (a killed controller's) has a lock: look again next time.
      if (conf->count("lock")) continue;
      bool fits = tpl != md->labels.end() && tpl->second == std::to_string(cfg_.template_vmid) &&
                  ct.status == "stopped";
      {
        std::lock_guard lock(mu_);
        if (busy_vmids_.count(ct.vmid)) continue;  // claimed by a create meanwhile
        auto it = std::find_if(pool_.begin(), pool_.end(),
                               [&](const Pooled& p) { return p.vmid == ct.vmid; });
        if (it != pool_.end()) {
          if (fits) continue;
          pool_.erase(it);
        } else if (fits && static_cast<int>(pool_.size()) < cfg_.warm_pool) {
          pool_.push_back({ct.vmid, md->id});
          continue;
        }
      }
      pool_cv_.notify_all();
      orphans.push_back({ct.vmid, md->id, std::nullopt, false, false});
      continue;
    }
    if (md->address) addrs_->mark_used(*md->address);
    bool is_expired = md->expires_at != 0 && md->expires_at <= now;
    if (md->phase != SandboxMetadata::Phase::kReady || is_expired || !md->address) {
      orphans.push_back({ct.vmid, md->id, md->address, is_expired, false});
      continue;
    }
    // Adopt a live sandbox.
    auto net0 = parse_property_string(conf->count("net0") ? conf->at("net0") : "");
    auto mac = MacAddress::parse(net0["hwaddr"]);
    proto::Binding binding{port_name(ct.vmid, net0["firewall"] == "1"), mac ? *mac : MacAddress{},
                           *md->address};
    auto sb = std::make_shared<SandboxImpl>(
        shared_from_this(), *md, conf->count("hostname") ? conf->at("hostname") : "",
        config_int(*conf, "cores", 1), config_int(*conf, "memory", 512),
        conf->count("rootfs") ? size_gb(conf->at("rootfs")) : 0, binding);
    sb->set_status(ct.status);
    {
      std::lock_guard lock(agent_mu_);
      if (mac) bound_[binding.port] = binding;
      if (md->internet) granted_.insert(*md->address);
    }
    {
      std::lock_guard lock(mu_);
      registry_[md->id] = sb;
    }
    log::info("recovered " + md->id + " vmid=" + std::to_string(ct.vmid));
  }

  // Pooled clones that vanished behind our back.
  {
    std::lock_guard lock(mu_);
    auto gone = [&](const Pooled& p) {
      return pooled_before.count(p.vmid) && !present.count(p.vmid);
    };
    if (std::any_of(pool_.begin(), pool_.end(), gone)) {
      for (auto& p : pool_)
        if (gone(p)) vmids_.release(static_cast<std::uint32_t>(p.vmid));
      pool_.erase(std::remove_if(pool_.begin(), pool_.end(), gone), pool_.end());
      pool_cv_.notify_all();
    }
  }
  // Registered sandboxes whose container vanished behind our back.
  std::vector<std::shared_ptr<SandboxImpl>> vanished;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, sb] : registry_)
      if (registered_before.count(id) && !present.count(sb->vmid()) &&
          !busy_vmids_.count(sb->vmid()))
        vanished.push_back(sb);
  }
  for (auto& sb : vanished) {
    log::warn("sandbox " + sb->id() + " vanished from Proxmox; forgetting it");
    std::lock_guard op(sb->op_mutex());
    bool clean = true;
    if (!ungrant(sb->address())) clean = false;
    unbind(sb->binding().port);
    sb->close_session();
    sb->mark_destroyed();
    vmids_.release(static_cast<std::uint32_t>(sb->vmid()));
    if (clean) addrs_->release(sb->address());
    std::lock_guard lock(mu_);
    registry_.erase(sb->id());
  }

  // A task that a dead controller started (e.g. a start) may still run on an orphan: it is
  // left, bindings included, until the task ended (Proxmox serialises such a destroy anyway).
  std::set<std::string> keep_ports;
  for (auto& o : orphans) {
    auto active = pve_.call("GET", "/nodes/" + cfg_.node + "/tasks",
                            {{"vmid", std::to_string(o.vmid)}, {"source", "active"}});
    if (!active)
      log::warn("task list for " + std::to_string(o.vmid) + ": " + active.error().to_string());
    if (active && active->find("UPID:") != std::string::npos) {
      o.busy_task = true;
      keep_ports.insert(port_name(o.vmid, false));
      keep_ports.insert(port_name(o.vmid, true));
    }
  }
  // Agent: the set is exactly the live sandboxes with internet (orphans are not in it).
  Status agent_status = sync_agent(keep_ports);

  // Orphans and expired sandboxes.
  Status result;
  for (auto& o : orphans) {
    if (o.busy_task) {
      result = fail(ErrorCode::kConflict,
                    "orphan " + std::to_string(o.vmid) + " still has a running task; later");
      continue;
    }
    busy(o.vmid, true);
    if (o.address) {
      std::lock_guard lock(agent_mu_);
      if (!agent_status) {  // the SYNC did not remove it: try an explicit REVOKE
        if (!agent_.revoke(*o.address)) {
          quarantine_.insert(*o.address);
          quarantined_ = quarantine_.size();
          addrs_->quarantine(*o.address);
        }
      }
    }
    unbind(port_name(o.vmid, false));
    unbind(port_name(o.vmid, true));
    auto r = destroy_container(o.vmid, o.id);
    busy(o.vmid, false);
    if (!r) {
      log::warn("orphan " + std::to_string(o.vmid) + " not destroyed: " + r.error().message);
      result = r;
      continue;
    }
    vmids_.release(static_cast<std::uint32_t>(o.vmid));
    if (o.address) addrs_->release(*o.address);  // a quarantined one stays quarantined
    log::info("destroyed orphan vmid=" + std::to_string(o.vmid) + (o.expired ? " (expired)" : ""));
    std::lock_guard lock(mu_);
    ++(o.expired ? stats_.expired_destroyed : stats_.orphans_destroyed);
  }
  for (auto& sb : expired) {
    bool was_expired = sb->metadata().phase == SandboxMetadata::Phase::kReady;
    if (auto r = destroy(*sb); !r) {
      result = r;
      continue;
    }
    std::lock_guard lock(mu_);
    if (was_expired) ++stats_.expired_destroyed;
  }
  std::lock_guard lock(mu_);
  ++stats_.reconciles;
  if (!agent_status) {
    ++stats_.reconcile_failures;
    return agent_status;
  }
  if (!result) ++stats_.reconcile_failures;
  return result;
}

Health ManagerCore::health() {
  Health h;
  auto v = pve_.call("GET", "/version");
  h.proxmox_ok = v.has_value();
  if (!v) h.proxmox_error = v.error().to_string();
  auto s = agent_.status();
  if (!s) {
    h.agent_error = s.error().to_string();
  } else {
    auto table = proto::find_field(*s, "table");
    auto set = proto::find_field(*s, "set");
    h.agent_ok = (!table || *table == "present") && (!set || *set == "present");
    if (!h.agent_ok) h.agent_error = "ruleset missing on the node";
  }
  return h;
}

ManagerStats ManagerCore::stats() const {
  std::lock_guard lock(mu_);
  ManagerStats s = stats_;
  s.live = registry_.size();
  s.quarantined_addresses = quarantined_.load();
  s.pooled = pool_.size();
  s.proxmox_calls = pve_.calls.snapshot();
  s.proxmox_tasks = pve_.tasks.snapshot();
  s.agent_calls = agent_.calls.snapshot();
  return s;
}

void ManagerCore::start_background() {
  thread_ = std::thread([this] { loop(); });
}

void ManagerCore::start_pool() {
  if (cfg_.warm_pool > 0) pool_thread_ = std::thread([this] { pool_loop(); });
}

void ManagerCore::stop_background() {
  {
    std::lock_guard lock(loop_mu_);
    stop_ = true;
  }
  loop_cv_.notify_all();
  {
    std::lock_guard lock(mu_);
    pool_stop_ = true;
  }
  pool_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (pool_thread_.joinable()) pool_thread_.join();  // a clone in progress completes first
}

void ManagerCore::loop() {
  auto lease_period = std::max(seconds(1), cfg_.internet_lease / 2);
  auto reconcile_period = std::max(seconds(1), cfg_.reconcile_interval);
  auto tick = std::min(lease_period, reconcile_period);
  tick = std::min<seconds>(tick, seconds(5));  // notice agent reconnects soon enough
  auto next_lease = Clock::now() + lease_period;
  auto next_reconcile = Clock::now() + reconcile_period;
  auto agent_connects = agent_.connects();
  for (;;) {
    {
      std::unique_lock lock(loop_mu_);
      if (loop_cv_.wait_for(lock, tick, [&] { return stop_; })) return;
    }
    auto now = Clock::now();
    bool reconnected = agent_.ping() && agent_.connects() != agent_connects;
    if (now >= next_reconcile || reconnected) {
      if (auto r = reconcile(); !r) log::warn("reconcile: " + r.error().message);
      agent_connects = agent_.connects();
      next_reconcile = now + reconcile_period;
      next_lease = now + lease_period;
    } else if (now >= next_lease) {
      if (auto r = sync_agent(); !r) log::warn("lease renewal: " + r.error().message);
      next_lease = now + lease_period;
    }
  }
}

// ---- Sandbox ---------------------------------------------------------------------------------

SandboxInfo SandboxImpl::info() const {
  std::lock_guard lock(mu_);
  SandboxInfo i;
  i.id = md_.id;
  i.vmid = md_.vmid;
  i.node = core_->config().node;
  i.hostname = hostname_;
  i.address = md_.address;
  i.phase = md_.phase;
  i.status = status_;
  i.internet = md_.internet;
  i.cpus = cpus_;
  i.memory_mb = memory_mb_;
  i.disk_gb = disk_gb_;
  i.created_at = md_.created_at;
  i.expires_at = md_.expires_at;
  i.labels = md_.labels;
  i.owner = md_.owner;
  return i;
}

Result<std::shared_ptr<SshSession>> SandboxImpl::session() {
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  std::lock_guard lock(mu_);
  if (!ssh_) {
    SshConfig sc = core_->config().ssh;
    sc.host = md_.address->to_string();
    ssh_ = std::make_shared<SshSession>(sc);
  }
  return ssh_;
}

Status SandboxImpl::write_metadata(const SandboxMetadata& md) {
  if (auto r = core_->write_description(md_.vmid, md); !r) return r;
  std::lock_guard lock(mu_);
  md_ = md;
  return {};
}

Status SandboxImpl::set_internet(bool enabled) {
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  auto md = metadata();
  md.internet = enabled;
  if (enabled) {
    if (auto r = core_->grant(*md.address); !r) return r;
    if (auto r = write_metadata(md); !r) {
      (void)core_->ungrant(*md.address);
      return r;
    }
    return {};
  }
  // Revoke first, then record; a failed revoke is reported (and quarantined for the next SYNC).
  auto r = core_->ungrant(*md.address);
  if (auto w = write_metadata(md); !w) return w;
  return r;
}

Result<pve::ContainerStatus> SandboxImpl::status() {
  auto r = core_->pve().status(core_->config().node, md_.vmid);
  if (!r) return fail(pve_error(r.error(), "status"));
  set_status(r->status);
  return std::move(*r);
}

// Proxmox checks snapshot names only inside the task (a missing one fails the task with
// "snapshot 'x' does not exist", a taken one with "snapshot name 'x' already used"), which the
// client reports as a failed task (kInternal). Ask first, and map those task errors too, so
// that callers get kNotFound / kConflict.
Result<bool> SandboxImpl::has_snapshot(const std::string& name) {
  auto r = core_->pve().snapshots(core_->config().node, md_.vmid);
  if (!r) return fail(pve_error(r.error(), "snapshots"));
  return std::any_of(r->begin(), r->end(),
                     [&](const pve::Snapshot& s) { return !s.is_current && s.name == name; });
}

namespace {
Status snapshot_result(Status r, const std::string& name) {
  if (r) return r;
  const auto& m = r.error().message;
  if (m.find("does not exist") != std::string::npos)
    return fail(ErrorCode::kNotFound, "no snapshot " + name);
  if (m.find("already used") != std::string::npos)
    return fail(ErrorCode::kConflict, "snapshot " + name + " exists already");
  return r;
}
}  // namespace

Status SandboxImpl::snapshot(const std::string& name, const std::string& description) {
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  auto exists = has_snapshot(name);
  if (!exists) return fail(exists.error());
  if (*exists) return fail(ErrorCode::kConflict, "snapshot " + name + " exists already");
  return snapshot_result(
      core_->wait(core_->pve().create_snapshot(core_->config().node, md_.vmid, name, description),
                  "snapshot"),
      name);
}

Result<std::vector<SnapshotInfo>> SandboxImpl::snapshots() {
  auto r = core_->pve().snapshots(core_->config().node, md_.vmid);
  if (!r) return fail(pve_error(r.error(), "snapshots"));
  std::vector<SnapshotInfo> out;
  for (auto& s : *r)
    if (!s.is_current) out.push_back({s.name, s.description, s.snaptime});
  return out;
}

Status SandboxImpl::rollback(const std::string& name) {
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  auto exists = has_snapshot(name);
  if (!exists) return fail(exists.error());
  if (!*exists) return fail(ErrorCode::kNotFound, "no snapshot " + name);
  close_session();
  if (auto r = snapshot_result(
          core_->wait(core_->pve().rollback_snapshot(core_->config().node, md_.vmid, name, true),
                      "rollback"),
          name);
      !r)
    return r;
  // The snapshot's config carries the description of its time: write today's back.
  return write_metadata(metadata());
}

Status SandboxImpl::delete_snapshot(const std::string& name) {
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  auto exists = has_snapshot(name);
  if (!exists) return fail(exists.error());
  if (!*exists) return fail(ErrorCode::kNotFound, "no snapshot " + name);
  return snapshot_result(
      core_->wait(core_->pve().delete_snapshot(core_->config().node, md_.vmid, name),
                  "delete snapshot"),
      name);
}

Status SandboxImpl::extend_ttl(std::chrono::seconds ttl) {
  std::lock_guard op(op_mu_);
  if (destroyed_) return fail(ErrorCode::kNotFound, "sandbox " + id() + " is destroyed");
  if (ttl.count() <= 0) return fail(ErrorCode::kInvalidArgument, "ttl must be positive");
  ttl = std::min(ttl, core_->config().max_ttl);
  auto md = metadata();
  md.expires_at = now_unix() + ttl.count();
  return write_metadata(md);
}

Status SandboxImpl::destroy() {
  return core_->destroy(*this);
}

class ManagerHandle final : public Manager {
 public:
  explicit ManagerHandle(std::shared_ptr<ManagerCore> core) : core_(std::move(core)) {}
  ~ManagerHandle() override {
    core_->stop_background();
    core_->forget_all();
  }

  Result<std::shared_ptr<Sandbox>> create(const CreateOptions& options) override {
    return core_->create(options);
  }
  Result<std::shared_ptr<Sandbox>> attach(const std::string& id) override {
    return core_->attach(id);
  }
  std::vector<SandboxInfo> list(const Labels& selector) const override {
    return core_->list(selector);
  }
  Status destroy_by_id(const std::string& id) override { return core_->destroy_by_id(id); }
  Status reconcile() override { return core_->reconcile(); }
  Health health() override { return core_->health(); }
  ManagerStats stats() const override { return core_->stats(); }

 private:
  std::shared_ptr<ManagerCore> core_;
};

}  // namespace

Result<std::unique_ptr<Manager>> Manager::open(ManagerConfig config) {
  if (config.node.empty()) return fail(ErrorCode::kInvalidArgument, "node is required");
  if (config.template_vmid <= 0)
    return fail(ErrorCode::kInvalidArgument, "template_vmid is required");
  if (config.vmid_min < 100 || config.vmid_min > config.vmid_max)
    return fail(ErrorCode::kInvalidArgument, "bad VMID range");
  if (config.warm_pool < 0 ||
      static_cast<std::uint64_t>(config.warm_pool) > config.vmid_max - config.vmid_min + 1)
    return fail(ErrorCode::kInvalidArgument, "warm_pool must be 0..(size of the VMID range)");
  if (config.internet_lease.count() < 2 || config.internet_lease.count() > proto::kMaxTtlSeconds)
    return fail(ErrorCode::kInvalidArgument, "internet_lease out of range");
  auto addresses = AddressPool::create(config.sandbox_cidr, config.gateway, config.reserved);
  if (!addresses) return fail(addresses.error());
  auto client = pve::Client::create(config.proxmox);
  if (!client) return fail(client.error());
  bool background = config.background;
  auto core =
      std::make_shared<ManagerCore>(std::move(config), std::move(*client), std::move(*addresses));
  if (auto r = core->reconcile(); !r) {
    // Recovery must see Proxmox and the agent; orphans that could not be destroyed are
    // retried by the background loop, so only an unreachable peer fails open().
    if (r.error().code == ErrorCode::kUnavailable || r.error().code == ErrorCode::kTimeout ||
        r.error().code == ErrorCode::kUnauthenticated ||
        r.error().code == ErrorCode::kPermissionDenied)
      return fail(r.error());
    log::warn("initial reconcile incomplete: " + r.error().message);
  }
  if (background) core->start_background();
  core->start_pool();
  return std::unique_ptr<Manager>(std::make_unique<ManagerHandle>(core));
}

}  // namespace pvs
