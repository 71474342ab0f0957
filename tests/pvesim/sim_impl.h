// pvesim's private state, shared by the files that implement Simulator (sim.h): the
// container/pool/task model and Simulator::Impl, whose member functions are defined in the
// file of their concern (named at each group of declarations below).
#pragma once

#include <Poco/Dynamic/Var.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "cluster.h"
#include "schema.h"
#include "sim.h"
#include "volumes.h"

namespace pvesim {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;
using Clock = std::chrono::steady_clock;

// Wall-clock unix seconds (RRD rows' times).
inline int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An error a handler raises: status, reason phrase, optional per-parameter errors.
struct ApiFail {
  int status;
  std::string message;
  ErrorMap errors;
};

inline ApiFail fail500(std::string message) {
  return ApiFail{500, std::move(message), {}};
}
inline ApiFail fail400(const std::string& param, std::string message) {
  return ApiFail{400, "Parameter verification failed.", {{param, std::move(message)}}};
}

inline std::string hex_upper(uint64_t value, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llX", width, static_cast<unsigned long long>(value));
  return buf;
}

// size strings "8G", "512M", "1024" (bytes) -> bytes
inline bool parse_size(const std::string& text, uint64_t* out) {
  if (text.empty()) return false;
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  if (i == 0) return false;
  double number = std::stod(text.substr(0, i));
  std::string unit = text.substr(i);
  double mult = 1;
  if (unit.rfind("K", 0) == 0)
    mult = 1024.0;
  else if (unit.rfind("M", 0) == 0)
    mult = 1024.0 * 1024;
  else if (unit.rfind("G", 0) == 0)
    mult = 1024.0 * 1024 * 1024;
  else if (unit.rfind("T", 0) == 0)
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty())
    return false;
  *out = static_cast<uint64_t>(number * mult);
  return true;
}

struct Snapshot {
  std::string name, description, parent;
  int64_t snaptime = 0;
  std::map<std::string, std::string> config;
};

struct Container {
  int vmid = 0;
  std::map<std::string, std::string> config;
  // Changes written while running that Proxmox applies only at the next start ([pve:pending]).
  std::map<std::string, std::string> pending;
  std::set<std::string> pending_delete;
  std::string node;  // the cluster node it lives on
  bool running = false;
  Clock::time_point created{};
  Clock::time_point started{};
  int64_t started_unix = 0;  // the same start on the wall clock, in seconds (rrddata's rows)
  std::vector<Snapshot> snapshots;
  std::map<std::string, std::string> firewall;
  std::string lease;  // DHCP address when ip=dhcp
};

struct Task {
  std::string upid, node, type, id, user;
  uint32_t pid = 0;
  uint64_t pstart = 0;
  int64_t starttime = 0;
  int64_t endtime = 0;
  bool running = true;
  std::string exitstatus;
  std::vector<std::string> log;
  // Phases at the end of the task: pre (state lock held; an error ends the task), work (no
  // lock: slow backend operations), finish (state lock held). "" = OK.
  std::function<std::string()> pre, work, finish;
  bool killed = false;
  Clock::time_point flock_wait_since{};  // first found the CT's config flock taken
};

struct Pool {
  std::string comment;
  std::set<int> members;
};

struct Simulator::Impl {
  Options options;
  Schema schema;
  const Endpoint* config_schema = nullptr;
  std::string tmpdir, key_file, cert_path, fingerprint;
  std::unique_ptr<Poco::Net::HTTPServer> server;
  int port = 0;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Volumes> volumes;  // mount point volumes (volumes.h)

  mutable std::mutex mutex;  // guards everything below
  std::unique_ptr<Cluster> cluster;
  std::map<int, Container> cts;  // VMIDs are unique cluster-wide
  std::map<std::string, Pool> pools;
  std::map<std::string, Task> tasks;
  std::vector<std::string> task_order;
  std::map<std::string, uint64_t> counts;
  uint64_t request_total = 0;
  uint64_t schema_rejections = 0;
  std::map<std::string, int> fault_used;
  uint32_t next_pid = 0x1000;
  std::mt19937_64 rng{std::random_device{}()};
  std::set<uint32_t> leases;
  // CTs whose config flock (/run/lock/lxc/pve-config-<vmid>.lock) a task holds during its slow
  // part: Proxmox's workers for start, stop, destroy, resize and snapshots all take it, so
  // such tasks on one CT run one after the other (a destroy waits for a start to end).
  std::set<std::string> flocked;
  std::set<std::string> held_types;  // Simulator::hold_tasks (under mutex)

  // Scheduler.
  std::mutex sched_mutex;
  std::condition_variable sched_cv;
  std::multimap<Clock::time_point, std::string> due;  // time -> upid
  bool stopping = false;
  std::vector<std::thread> schedulers;  // complete due tasks, several at a time

  ~Impl() { shutdown(); }

  // Handlers still running (Poco's stopAll does not wait for them).
  std::atomic<int> active{0};
  std::atomic<bool> closing{false};

  // ---- handlers -------------------------------------------------------------------------
  struct Call {
    const Endpoint* endpoint;
    ParamMap params;
    std::string user;  // token id user@realm!tokenid
    std::string method;
    std::string path;
  };

  struct Reply {
    Var data;
    int total = -1;
  };

  // sim.cc: the end of a run; the templates present at start.
  void shutdown();
  void add_template(int vmid, const std::string& node, const std::string& storage);
  void add_templates();

  // sim_http.cc: the HTTPS front end: TLS, the request pipeline, the /_pvesim/ control endpoints.
  void nap(int ms);
  pvs::Status make_certificate();
  void send(Poco::Net::HTTPServerResponse& resp, int status, const std::string& reason,
            const std::string& body);
  void send_error(Poco::Net::HTTPServerResponse& resp, const ApiFail& f);
  void handle(Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& resp);
  bool unreachable(const ParamMap& path_params);
  void control(const std::string& method, const std::string& path, const std::string& body,
               Poco::Net::HTTPServerResponse& resp);

  // sim_tasks.cc: the task machinery (scheduler, config flock) and the task API.
  int task_ms(const std::string& type);
  std::string start_task(const std::string& type, const std::string& id, const std::string& user,
                         const std::string& node, std::function<std::string()> finish,
                         std::function<std::string()> pre = nullptr,
                         std::function<std::string()> work = nullptr);
  void run_scheduler();
  static bool takes_flock(const std::string& type);
  void complete_task(const std::string& upid);
  static bool is_warnings(const std::string& text);
  void finish_task(Task& t, const std::string& error);
  Task& need_task(const Call& c);
  Object::Ptr task_object(const Task& t);
  Object::Ptr task_status(const Call& c);
  Reply task_log(const Call& c);
  Reply task_list(const Call& c);

  // sim_containers.cc: the container model: lookup, locks, config, status, leases.
  static std::string conf_missing(const std::string& node, int vmid);
  Container* find(int vmid);
  Container* find_on(const std::string& node, int vmid);
  std::string lock_of(const Container& ct);
  std::string random_mac();
  std::string pool_of(int vmid);
  std::string digest_of(const Container& ct);
  static std::map<std::string, std::string> with_pending(const Container& ct);
  void apply_pending(Container& ct);
  static bool hot_applied(const Container& ct, const std::string& key);
  uint64_t rootfs_size(const Container& ct);
  int64_t config_int(const Container& ct, const std::string& key, int64_t fallback);
  Object::Ptr vmstatus(const Container& ct);
  Array::Ptr rrddata(const Container& ct, const std::string& timeframe);
  const Endpoint* config_endpoint();
  Object::Ptr render_config(const std::map<std::string, std::string>& config);
  static std::string normalize_tags(const std::string& text);
  std::string ipv4_of(Container& ct);
  void release_lease(Container& ct);

  // sim_routes.cc: the handlers' helpers, the route table (dispatch), cluster listings, pools.
  int vmid_param(const Call& c, const char* name = "vmid");
  bool flag(const Call& c, const std::string& name);
  std::string param(const Call& c, const std::string& name, const std::string& fallback = "");
  void check_node(const Call& c);
  static std::string node_of(const Call& c);
  Container& need(const Call& c, int vmid);
  void check_unlocked(const Container& ct);
  void reap_dead();
  Reply dispatch(Call& c);
  Object::Ptr render_firewall(const std::map<std::string, std::string>& fw);
  Array::Ptr resources(const std::string& type);
  std::map<std::string, NodeLoad> node_loads();
  Array::Ptr pool_list(const Call& c);
  void pool_update(const Call& c);

  // sim_guests.cc: a CT's config, resize, start/stop/shutdown/reboot, interfaces, destroy.
  void update_config(Call& c);
  static void warn_all(const Container& ct, const std::vector<std::string>& lines);
  std::string resize(Call& c);
  std::string start(Call& c);
  std::string stop_like(Call& c);
  Var interfaces(Container& ct);
  std::string destroy(Call& c);

  // sim_clone.cc: clone, template, snapshots.
  void renew_macs(std::map<std::string, std::string>& config);
  std::string clone(Call& c);
  void make_template(Call& c);
  Array::Ptr snapshot_list(Container& ct);
  std::string snapshot_create(Call& c);
  std::string snapshot_delete(Call& c);
  std::string snapshot_rollback(Call& c);
};

}  // namespace pvesim
