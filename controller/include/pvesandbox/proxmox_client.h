// A client for the Proxmox VE REST API (the subset that manages LXC sandboxes).
//
//   pvs::pve::ClientOptions options;
//   options.base_url = "https://pve1:8006";
//   options.token_id = "sandbox@pve!controller";
//   options.token_secret = *pvs::pve::read_secret_file("/etc/pve-sandbox/token");
//   options.fingerprint = "AB:CD:...";             // or ca_file, or the system store
//   auto client = pvs::pve::Client::create(options);
//   auto upid = (*client)->clone("pve1", {.source_vmid = 9000, .new_vmid = 120, .pool = "sb"});
//   auto done = (*client)->wait_task(*upid);
//   if (!done && done.error().kind == pvs::pve::ErrorKind::kLocked) ...
//
// One Client is meant to be shared by every thread of a process: calls are thread-safe and
// reuse a bounded pool of keep-alive connections. Every call returns pvs::pve::Result<T>, whose
// error carries an ErrorKind to switch on. GETs (and requests that provably never reached the
// API daemon) are retried with exponential backoff; a clone, delete or any other mutation is
// never retried once it may have been accepted.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs::pve {

// What went wrong, for the orchestrator to act on (the kinds live in pvs::Error).
using ErrorKind = ProxmoxErrc;

// Stable lower-case name, e.g. "not_found".
std::string_view to_string(ErrorKind kind);

// Every call returns a pvs::Result: a failure is a pvs::Error with the coarse code (kLocked ->
// kConflict, kTls -> kUnavailable, ...) and ProxmoxDetail in Error::proxmox (its kind, the
// HTTP status, parameter errors, the task and its log). Test the kind with error.is(kind).
template <typename T>
using Result = pvs::Result<T>;
using Status = pvs::Status;

// The Error of a Proxmox failure of this kind (the code goes with the kind).
Error make_error(ErrorKind kind, int http_status, std::string message);
// Changes the kind of a Proxmox error, and its code with it.
void set_kind(Error& error, ErrorKind kind);
// The kind of a Proxmox error (kServer if the error did not come from Proxmox).
inline ErrorKind kind_of(const Error& error) {
  return error.proxmox ? error.proxmox->kind : ErrorKind::kServer;
}
// "locked: 500 CT is locked (disk) [param: message] (task UPID:...)", for logs and messages.
std::string describe(const Error& error);

// Classifies an HTTP error status and message the way the client does.
ErrorKind classify(int http_status, std::string_view message);

// The token secret, from the first line of a file or from an environment variable.
pvs::Result<std::string> read_secret_file(const std::string& path);
pvs::Result<std::string> read_secret_env(const std::string& variable);

struct ClientOptions {
  std::string base_url;      // "https://host:8006"; the client appends "/api2/json"
  std::string token_id;      // "user@realm!tokenid"
  std::string token_secret;  // the UUID; never logged

  // TLS: verified by default against the system store. Set one of:
  std::string ca_file;      // PEM CA bundle, e.g. the node's pve-root-ca.pem
  std::string fingerprint;  // SHA-256 of the server certificate, "AB:CD:..." (hex, colons optional)
  bool insecure_skip_verify = false;  // no verification at all; logs a warning

  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds request_timeout{60000};
  int max_attempts = 4;  // for retryable failures, including the first attempt
  std::chrono::milliseconds backoff_initial{200};
  std::chrono::milliseconds backoff_max{3000};
  int max_connections = 8;  // concurrent requests; more callers wait for a free connection
};

using Params = std::vector<std::pair<std::string, std::string>>;
using Config = std::map<std::string, std::string>;  // numbers as decimal text

// A UPID, e.g. "UPID:pve:000D7AA2:08D5A17C:63DF62A5:vzclone:200:root@pam!tok:".
struct Upid {
  std::string node, type, id, user;
  uint32_t pid = 0;
  uint64_t pstart = 0;
  uint32_t starttime = 0;
  static pvs::Result<Upid> parse(std::string_view text);
};

struct ContainerStatus {  // an item of GET .../lxc and GET .../status/current
  int vmid = 0;
  std::string name;
  std::string status;  // "running" | "stopped"
  std::string lock;    // "" when unlocked
  std::string tags;    // ';'-separated
  bool is_template = false;
  int64_t pid = 0;  // 0 unless running
  int64_t uptime = 0, mem = 0, maxmem = 0, disk = 0, maxdisk = 0, swap = 0, maxswap = 0;
  int64_t netin = 0, netout = 0;
  double cpu = 0, cpus = 0;
  bool ha_managed = false;
};

struct ClusterResource {  // an item of GET /cluster/resources
  std::string id;         // "lxc/105"
  std::string type;       // "lxc", "qemu", "node", "storage", ...
  std::string node, status, name, pool, tags, lock;
  int vmid = 0;
  bool is_template = false;
  std::string storage;                // type "lxc"/"qemu": absent; type "storage": its id
  std::uint64_t mem = 0, maxmem = 0;  // bytes (nodes and guests)
  double cpu = 0;                     // share of maxcpu in use
  int maxcpu = 0;
  std::int64_t uptime = 0;
};

// A row of GET .../lxc/{vmid}/rrddata: pvestatd's averages over the step that ends at `time`.
// A row from before the guest existed, or while it was stopped, holds its time alone.
struct RrdPoint {
  std::int64_t time = 0;  // unix seconds
  bool has_data = false;
  double cpu = 0, maxcpu = 0;                         // cpu: share of maxcpu in use (0..1)
  double mem = 0, maxmem = 0, disk = 0, maxdisk = 0;  // bytes
};

struct TaskStatus {
  std::string upid, node, type, id, user;
  std::string status;      // "running" | "stopped"
  std::string exitstatus;  // "OK", "WARNINGS: 2", or the error; empty while running
  int64_t starttime = 0;
  bool running() const { return status == "running"; }
  bool succeeded() const;  // stopped with OK or WARNINGS: n
};

struct TaskLogLine {
  int n = 0;
  std::string t;
};

struct InterfaceAddress {
  std::string address;  // "10.99.0.5"
  std::string family;   // "inet" | "inet6"
  int prefix = 0;
};

struct Interface {
  std::string name, hwaddr;
  std::string inet, inet6;  // "addr/prefix" of the last address of the family, or ""
  std::vector<InterfaceAddress> addresses;
};

struct Snapshot {
  std::string name, description, parent;
  int64_t snaptime = 0;
  bool is_current = false;  // the "current" pseudo entry
};

struct PoolMember {
  std::string id, type, node, status;
  int vmid = 0;
};

struct Pool {
  std::string poolid, comment;
  std::vector<PoolMember> members;
};

struct CloneRequest {
  int source_vmid = 0;
  int new_vmid = 0;
  std::string hostname, description, pool, storage, snapname;
  std::optional<bool> full;  // unset: Proxmox's default (linked for templates)
  std::string target;        // another node (the source must be on shared storage); "": the same
};

struct DestroyOptions {
  bool purge = false;
  bool force = false;
  std::optional<bool> destroy_unreferenced_disks;
};

struct WaitOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::chrono::milliseconds poll_initial{100};
  std::chrono::milliseconds poll_max{1000};
  int log_lines = 20;  // kept in ProxmoxDetail::task_log on failure
};

// A raw API answer: the HTTP status and the JSON text of the whole body.
struct Response {
  int status = 0;
  std::string reason;
  std::string body;
};

class Client {
 public:
  static pvs::Result<std::unique_ptr<Client>> create(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Any call: method "GET" | "POST" | "PUT" | "DELETE", path below /api2/json. Parameters go
  // in the query string for GET and DELETE, form-encoded in the body otherwise. Returns the
  // JSON text of "data" on 2xx, the typed error otherwise.
  Result<std::string> call(std::string_view method, std::string_view path,
                           const Params& params = {});

  // Cluster.
  Result<int> next_id(std::optional<int> vmid = std::nullopt);  // reserves nothing
  Result<std::vector<ClusterResource>> resources(std::string_view type = "vm");

  // Containers. Calls that return a std::string return the UPID of the task they started.
  Result<std::vector<ContainerStatus>> list_containers(std::string_view node);
  Result<std::string> clone(std::string_view node, const CloneRequest& request);
  Result<Config> config(std::string_view node, int vmid, bool current = false);
  Status update_config(std::string_view node, int vmid, const Params& changes);
  Result<std::string> resize(std::string_view node, int vmid, std::string_view disk,
                             std::string_view size);
  Result<std::string> start(std::string_view node, int vmid);
  Result<std::string> stop(std::string_view node, int vmid);
  Result<std::string> shutdown(std::string_view node, int vmid, int timeout_seconds = 60,
                               bool force_stop = false);
  Result<ContainerStatus> status(std::string_view node, int vmid);
  // The container's RRD history, oldest first: `timeframe` "hour" (a row a minute), "day",
  // "week", "month" or "year" (70 rows each); AVERAGE rows.
  Result<std::vector<RrdPoint>> rrddata(std::string_view node, int vmid,
                                        std::string_view timeframe);
  // std::nullopt while the container is stopped.
  Result<std::optional<std::vector<Interface>>> interfaces(std::string_view node, int vmid);
  Result<std::string> destroy(std::string_view node, int vmid, const DestroyOptions& options = {});

  // Snapshots.
  Result<std::vector<Snapshot>> snapshots(std::string_view node, int vmid);
  Result<std::string> create_snapshot(std::string_view node, int vmid, std::string_view name,
                                      std::string_view description = "");
  Result<std::string> rollback_snapshot(std::string_view node, int vmid, std::string_view name,
                                        bool start_after = false);
  Result<std::string> delete_snapshot(std::string_view node, int vmid, std::string_view name,
                                      bool force = false);

  // Firewall options of a container ("enable", "ipfilter", "policy_in", ...).
  Result<Config> firewall_options(std::string_view node, int vmid);
  Status set_firewall_options(std::string_view node, int vmid, const Params& changes);

  // Pools.
  Result<std::vector<Pool>> pools();
  Result<Pool> pool(std::string_view poolid);
  Status create_pool(std::string_view poolid, std::string_view comment = "");
  Status add_to_pool(std::string_view poolid, const std::vector<int>& vmids,
                     bool allow_move = false);
  Status remove_from_pool(std::string_view poolid, const std::vector<int>& vmids);
  Status delete_pool(std::string_view poolid);

  // Tasks, always asked on the node named inside the UPID.
  Result<TaskStatus> task_status(std::string_view upid);
  // Lines [start, start+limit); *total (if given) receives the log's line count.
  Result<std::vector<TaskLogLine>> task_log(std::string_view upid, int start = 0, int limit = 50,
                                            int* total = nullptr);
  Status stop_task(std::string_view upid);
  // Polls until the task stops. OK and "WARNINGS: n" succeed; any other exit status is
  // kTaskFailed with the log's last lines; kTimeout when the deadline passes first.
  Result<TaskStatus> wait_task(std::string_view upid, const WaitOptions& options = {});

  // Requests sent so far (every attempt counts), for metrics and tests.
  uint64_t requests_sent() const;

 private:
  struct Impl;
  friend struct ClientAccess;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pvs::pve

namespace pvs {
using ProxmoxClient = pve::Client;  // the name docs/architecture.md uses
}  // namespace pvs
