// pvesim core: HTTPS front end, request pipeline (auth, routing, faults, schema validation),
// the container/pool/task model, and the task scheduler.
#include "sim.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/JSON/Stringifier.h>
#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/SSLManager.h>
#include <Poco/Net/SecureServerSocket.h>
#include <Poco/URI.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "backend.h"
#include "cluster.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/log.h"
#include "schema.h"
#include "volumes.h"

#ifndef PVESIM_SCHEMA_FILE
#define PVESIM_SCHEMA_FILE "pve-schema.json"
#endif

namespace pvesim {

namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;
using Clock = std::chrono::steady_clock;

// An error a handler raises: status, reason phrase, optional per-parameter errors.
struct ApiFail {
  int status;
  std::string message;
  ErrorMap errors;
};

ApiFail fail500(std::string message) {
  return ApiFail{500, std::move(message), {}};
}
ApiFail fail400(const std::string& param, std::string message) {
  return ApiFail{400, "Parameter verification failed.", {{param, std::move(message)}}};
}

std::string hex_upper(uint64_t value, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llX", width, static_cast<unsigned long long>(value));
  return buf;
}

std::string sha1_hex(const std::string& text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), md, &len, EVP_sha1(), nullptr);
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", md[i]);
    out += b;
  }
  return out;
}

ParamMap parse_form(const std::string& text) {
  ParamMap out;
  std::stringstream in(text);
  std::string pair;
  while (std::getline(in, pair, '&')) {
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    std::string key = pair.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    std::replace(key.begin(), key.end(), '+', ' ');
    std::replace(value.begin(), value.end(), '+', ' ');
    std::string k, v;
    Poco::URI::decode(key, k);
    Poco::URI::decode(value, v);
    out[k] = v;
  }
  return out;
}

// size strings "8G", "512M", "1024" (bytes) -> bytes
bool parse_size(const std::string& text, uint64_t* out) {
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

std::vector<std::string> split_list_commas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

std::string json(const Var& v) {
  std::ostringstream out;
  Poco::JSON::Stringifier::stringify(v, out, 0, -1);
  return out.str();
}

}  // namespace

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

  // Sleeps, but returns early when the server shuts down.
  void nap(int ms) {
    auto until = Clock::now() + std::chrono::milliseconds(ms);
    while (!closing.load() && Clock::now() < until)
      std::this_thread::sleep_for(
          std::min<Clock::duration>(std::chrono::milliseconds(5), until - Clock::now()));
  }

  void shutdown() {
    closing = true;
    if (server) {
      server->stopAll(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let dispatched ones enter
      for (int i = 0; i < 2000 && active.load() > 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      server.reset();
    }
    {
      std::lock_guard lock(sched_mutex);
      stopping = true;
    }
    sched_cv.notify_all();
    for (auto& thread : schedulers)
      if (thread.joinable()) thread.join();
    schedulers.clear();
    if (backend) {
      std::lock_guard lock(mutex);
      for (auto& [vmid, ct] : cts)
        if (ct.running) backend->stop(vmid);
      backend->cleanup();
      backend.reset();
    }
    if (!tmpdir.empty()) {
      ::unlink(key_file.c_str());
      ::unlink(cert_path.c_str());
      ::rmdir(tmpdir.c_str());
      tmpdir.clear();
    }
  }

  // ---- TLS ------------------------------------------------------------------------------
  pvs::Status make_certificate() {
    // Under $TMPDIR when set: a test that kills the simulator with SIGKILL points it at a
    // directory of its own, which it removes.
    std::error_code ec;
    auto base = std::filesystem::temp_directory_path(ec);
    std::string tmpl = (ec ? std::string("/tmp") : base.string()) + "/pvesim-XXXXXX";
    if (!mkdtemp(tmpl.data())) return pvs::fail(pvs::errno_error("mkdtemp", errno));
    tmpdir = tmpl;
    key_file = tmpdir + "/key.pem";
    cert_path = tmpdir + "/cert.pem";
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(cert), static_cast<long>(rng() & 0x7fffffff));
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400L * 365);
    X509_set_version(cert, 2);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("PVE Cluster Node"), -1, -1,
                               0);
    X509_NAME_add_entry_by_txt(
        name, "CN", MBSTRING_ASC,
        reinterpret_cast<const unsigned char*>(cluster->first_node().c_str()), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, cert, cert, nullptr, nullptr, 0);
    std::string san = "DNS:localhost,DNS:" + cluster->first_node() + ",IP:127.0.0.1";
    if (options.listen != "0.0.0.0" && options.listen != "127.0.0.1")
      san += ",IP:" + options.listen;
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name, san.c_str());
    if (ext) {
      X509_add_ext(cert, ext, -1);
      X509_EXTENSION_free(ext);
    }
    X509_sign(cert, key, EVP_sha256());
    unsigned char md[32];
    unsigned int len = 0;
    X509_digest(cert, EVP_sha256(), md, &len);
    for (unsigned int i = 0; i < len; ++i) {
      if (i) fingerprint += ':';
      fingerprint += hex_upper(md[i], 2);
    }
    FILE* kf = std::fopen(key_file.c_str(), "w");
    FILE* cf = std::fopen(cert_path.c_str(), "w");
    bool ok = kf && cf && PEM_write_PrivateKey(kf, key, nullptr, nullptr, 0, nullptr, nullptr) &&
              PEM_write_X509(cf, cert);
    if (kf) std::fclose(kf);
    if (cf) std::fclose(cf);
    X509_free(cert);
    EVP_PKEY_free(key);
    if (!ok) return pvs::fail(pvs::ErrorCode::kIo, "cannot write the certificate");
    return {};
  }

  // ---- tasks ----------------------------------------------------------------------------
  int task_ms(const std::string& type) {
    auto it = options.task_ms.find(type);
    return it == options.task_ms.end() ? options.default_task_ms : it->second;
  }

  // Starts a task (state lock held). `finish` runs at the end, under the lock, and returns
  // "" for OK or the error message.
  std::string start_task(const std::string& type, const std::string& id, const std::string& user,
                         const std::string& node, std::function<std::string()> finish,
                         std::function<std::string()> pre = nullptr,
                         std::function<std::string()> work = nullptr) {
    Task t;
    t.node = node;  // the node in the request's path
    t.type = type;
    t.id = id;
    t.user = user;
    t.pid = next_pid++;
    t.pstart = 0x2A5F1C0 + t.pid;
    t.starttime = std::time(nullptr);
    t.upid = "UPID:" + t.node + ":" + hex_upper(t.pid, 8) + ":" + hex_upper(t.pstart, 8) + ":" +
             hex_upper(static_cast<uint64_t>(t.starttime), 8) + ":" + type + ":" + id + ":" + user +
             ":";
    t.finish = std::move(finish);
    t.pre = std::move(pre);
    t.work = std::move(work);
    std::string upid = t.upid;
    tasks[upid] = std::move(t);
    task_order.push_back(upid);
    {
      std::lock_guard lock(sched_mutex);
      due.emplace(Clock::now() + std::chrono::milliseconds(task_ms(type)), upid);
    }
    sched_cv.notify_all();
    return upid;
  }

  void run_scheduler() {
    std::unique_lock lock(sched_mutex);
    while (!stopping) {
      if (due.empty()) {
        sched_cv.wait(lock);
        continue;
      }
      auto when = due.begin()->first;
      if (Clock::now() < when) {
        sched_cv.wait_until(lock, when);
        continue;
      }
      std::string upid = due.begin()->second;
      due.erase(due.begin());
      lock.unlock();
      complete_task(upid);
      lock.lock();
    }
  }

  static bool takes_flock(const std::string& type) {
    return type != "vzclone";  // a clone locks the template (lock=disk) and the new CT
  }

  void complete_task(const std::string& upid) {
    std::function<std::string()> work;
    std::string warnings;
    std::string flock_id;
    {
      std::lock_guard lock(mutex);
      auto it = tasks.find(upid);
      if (it == tasks.end() || !it->second.running) return;
      Task& t = it->second;
      if (held_types.count(t.type)) {  // a test's gate: look again shortly
        {
          std::lock_guard sched(sched_mutex);
          due.emplace(Clock::now() + std::chrono::milliseconds(5), upid);
        }
        sched_cv.notify_all();
        return;
      }
      if (takes_flock(t.type) && flocked.count(t.id)) {
        // lock_config waits 10 s for the flock, then the task dies.
        auto now = Clock::now();
        if (t.flock_wait_since == Clock::time_point{}) t.flock_wait_since = now;
        if (now - t.flock_wait_since >= std::chrono::seconds(10)) {
          finish_task(t,
                      "can't lock file '/run/lock/lxc/pve-config-" + t.id + ".lock' - got timeout");
          return;
        }
        {
          std::lock_guard sched(sched_mutex);
          due.emplace(now + std::chrono::milliseconds(10), upid);
        }
        sched_cv.notify_all();
        return;
      }
      auto fail = options.fail_tasks.find(t.type);
      if (fail != options.fail_tasks.end() && !is_warnings(fail->second)) {
        std::string error = fail->second;
        // A failing clone still has to clean up after itself.
        if (t.type == "vzclone" && t.finish) {
          t.finish();
          error = "clone failed: " + fail->second;
        }
        finish_task(t, error);
        return;
      }
      if (fail != options.fail_tasks.end()) warnings = fail->second;
      if (t.pre) {
        std::string error = t.pre();
        if (!error.empty()) {
          finish_task(t, error);
          return;
        }
      }
      work = t.work;
      if (work && takes_flock(t.type)) {
        flocked.insert(t.id);
        flock_id = t.id;
      }
    }
    std::string error = work ? work() : "";
    std::lock_guard lock(mutex);
    if (!flock_id.empty()) flocked.erase(flock_id);
    auto it = tasks.find(upid);
    if (it == tasks.end() || !it->second.running) return;  // killed meanwhile
    Task& t = it->second;
    if (error.empty() && t.finish) error = t.finish();
    if (error.empty() && !warnings.empty()) {  // success with warnings
      t.log.push_back("WARN: simulated warning");
      error = warnings;
    }
    finish_task(t, error);
  }

  static bool is_warnings(const std::string& text) { return text.rfind("WARNINGS: ", 0) == 0; }

  void finish_task(Task& t, const std::string& error) {
    t.running = false;
    t.endtime = std::time(nullptr);
    if (error.empty()) {
      t.exitstatus = "OK";
      t.log.push_back("TASK OK");
    } else if (is_warnings(error)) {
      t.exitstatus = error;
      t.log.push_back("TASK " + error);
    } else {
      t.exitstatus = error;
      t.log.push_back("TASK ERROR: " + error);
    }
  }

  // ---- helpers --------------------------------------------------------------------------
  static std::string conf_missing(const std::string& node, int vmid) {
    return "Configuration file 'nodes/" + node + "/lxc/" + std::to_string(vmid) +
           ".conf' does not exist";
  }

  Container* find(int vmid) {
    auto it = cts.find(vmid);
    return it == cts.end() ? nullptr : &it->second;
  }

  // The CT if it is on `node` (a node has only its own CTs' configs).
  Container* find_on(const std::string& node, int vmid) {
    Container* ct = find(vmid);
    return ct && ct->node == node ? ct : nullptr;
  }

  std::string lock_of(const Container& ct) {
    auto it = ct.config.find("lock");
    return it == ct.config.end() ? "" : it->second;
  }

  std::string random_mac() {
    uint64_t r = rng();
    unsigned char b[6];
    for (int i = 0; i < 6; ++i) b[i] = static_cast<unsigned char>(r >> (8 * i));
    b[0] = static_cast<unsigned char>((b[0] & 0xfe) | 0x02);  // unicast, locally administered
    std::string out;
    for (int i = 0; i < 6; ++i) {
      if (i) out += ':';
      out += hex_upper(b[i], 2);
    }
    return out;
  }

  std::string pool_of(int vmid) {
    for (const auto& [id, pool] : pools)
      if (pool.members.count(vmid)) return id;
    return "";
  }

  std::string digest_of(const Container& ct) {  // of the whole file, [pve:pending] included
    std::string text;
    for (const auto& [k, v] : ct.config) text += k + ": " + v + "\n";
    if (!ct.pending.empty() || !ct.pending_delete.empty()) text += "[pve:pending]\n";
    for (const auto& [k, v] : ct.pending) text += k + ": " + v + "\n";
    for (const auto& k : ct.pending_delete) text += "delete: " + k + "\n";
    return sha1_hex(text);
  }

  // What GET config shows by default: the pending values merged in.
  static std::map<std::string, std::string> with_pending(const Container& ct) {
    auto out = ct.config;
    for (const auto& [k, v] : ct.pending) out[k] = v;
    for (const auto& k : ct.pending_delete) out.erase(k);
    return out;
  }

  void apply_pending(Container& ct) {
    std::vector<std::string> log;  // the volume keys first, as vmconfig_apply_pending
    volumes->apply_pending(ct.node, ct.vmid, ct.config, ct.pending, ct.pending_delete, &log);
    warn_all(ct, log);
    ct.config = with_pending(ct);
    ct.pending.clear();
    ct.pending_delete.clear();
  }

  // Whether Proxmox applies a change of `key` to a running CT at once (pve-container
  // vmconfig_hotplug_pending: the fastplug keys, memory/swap through the cgroup, CPU limits,
  // network devices; mount points and devices only when new).
  static bool hot_applied(const Container& ct, const std::string& key) {
    static const std::set<std::string> kAtOnce = {
        "description", "onboot", "startup", "protection", "hostname", "hookscript", "cores",
        "tags",        "lock",   "memory",  "swap",       "cpulimit", "cpuunits"};
    if (kAtOnce.count(key)) return true;
    auto numbered = [&](const char* prefix) {
      std::size_t n = std::strlen(prefix);
      return key.size() > n && key.compare(0, n, prefix) == 0 &&
             key.find_first_not_of("0123456789", n) == std::string::npos;
    };
    if (numbered("net")) return true;
    return (numbered("mp") || numbered("dev")) && !ct.config.count(key);
  }

  uint64_t rootfs_size(const Container& ct) {
    auto it = ct.config.find("rootfs");
    if (it == ct.config.end()) return 4ull << 30;
    std::map<std::string, std::string> parts;
    std::string error;
    parse_property_string(it->second, "volume", &parts, &error);
    uint64_t size = 0;
    if (parts.count("size") && parse_size(parts["size"], &size)) return size;
    return 4ull << 30;
  }

  int64_t config_int(const Container& ct, const std::string& key, int64_t fallback) {
    auto it = ct.config.find(key);
    if (it == ct.config.end()) return fallback;
    try {
      return std::stoll(it->second);
    } catch (const std::exception&) {
      return fallback;
    }
  }

  // PVE::LXC::vmstatus for one container.
  Object::Ptr vmstatus(const Container& ct) {
    Object::Ptr o = new Object;
    o->set("vmid", ct.vmid);
    auto host = ct.config.find("hostname");
    std::string name = host == ct.config.end() ? "CT" + std::to_string(ct.vmid) : host->second;
    name.erase(std::remove_if(name.begin(), name.end(), ::isspace), name.end());
    o->set("name", name);
    o->set("status", ct.running ? "running" : "stopped");
    o->set("type", "lxc");
    int64_t memory = config_int(ct, "memory", 512), swap = config_int(ct, "swap", 512);
    o->set("maxmem", memory * 1048576);
    o->set("maxswap", swap * 1048576);
    o->set("maxdisk", static_cast<Poco::Int64>(rootfs_size(ct)));
    o->set("cpus", config_int(ct, "cores", 1));
    auto uptime =
        ct.running
            ? std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - ct.started).count()
            : 0;
    o->set("uptime", static_cast<Poco::Int64>(uptime));
    o->set("cpu", 0);
    long long used = ct.running ? backend->memory_used(ct.vmid) : 0;
    o->set("mem", static_cast<Poco::Int64>(used >= 0 ? used : 48 * 1048576));
    o->set("swap", 0);
    o->set("disk", ct.running ? 700 * 1048576 : 0);
    o->set("diskread", 0);
    o->set("diskwrite", 0);
    o->set("netin", 0);
    o->set("netout", 0);
    if (ct.running) o->set("pid", 100000 + ct.vmid);
    if (config_int(ct, "template", 0)) o->set("template", 1);
    auto lock = ct.config.find("lock");
    if (lock != ct.config.end()) o->set("lock", lock->second);
    auto tags = ct.config.find("tags");
    if (tags != ct.config.end()) o->set("tags", tags->second);
    return o;
  }

  const Endpoint* config_endpoint() {
    if (!config_schema) config_schema = schema.match("PUT", "/nodes/x/lxc/100/config", nullptr);
    return config_schema;
  }

  // Config values rendered the way the real API does: integers and booleans as numbers.
  Object::Ptr render_config(const std::map<std::string, std::string>& config) {
    Object::Ptr o = new Object;
    for (const auto& [k, v] : config) {
      std::string type = config_endpoint() ? schema.type_of(*config_endpoint(), k) : "";
      if ((type == "integer" || type == "boolean") && !v.empty() &&
          v.find_first_not_of("-0123456789") == std::string::npos) {
        o->set(k, static_cast<Poco::Int64>(std::stoll(v)));
      } else if (type == "number" && !v.empty()) {
        try {
          o->set(k, std::stod(v));
        } catch (const std::exception&) {
          o->set(k, v);
        }
      } else {
        o->set(k, v);
      }
    }
    return o;
  }

  static std::string normalize_tags(const std::string& text) {
    std::set<std::string> tags;
    for (auto tag : split_list(text)) {
      std::transform(tag.begin(), tag.end(), tag.begin(), ::tolower);
      tags.insert(tag);
    }
    std::string out;
    for (const auto& t : tags) {
      if (!out.empty()) out += ';';
      out += t;
    }
    return out;
  }

  // Address the model reports for net0 (static ip= or a DHCP lease).
  std::string ipv4_of(Container& ct) {
    auto net0 = ct.config.find("net0");
    if (net0 == ct.config.end()) return "";
    std::map<std::string, std::string> parts;
    std::string error;
    parse_property_string(net0->second, "", &parts, &error);
    std::string ip = parts["ip"];
    if (ip.empty() || ip == "manual") return "";
    if (ip != "dhcp") return ip;
    if (ct.lease.empty()) {
      auto cidr = pvs::Cidr::parse(options.dhcp_cidr);
      if (!cidr) return "";
      uint32_t base = cidr->network().to_uint();
      uint32_t size = cidr->prefix() >= 31 ? 1 : (1u << (32 - cidr->prefix())) - 2;
      for (uint32_t i = 100; i < size; ++i) {
        if (!leases.count(base + i)) {
          leases.insert(base + i);
          ct.lease = pvs::Ipv4Address(base + i).to_string() + "/" + std::to_string(cidr->prefix());
          break;
        }
      }
    }
    return ct.lease;
  }

  void release_lease(Container& ct) {
    if (ct.lease.empty()) return;
    auto addr = pvs::Ipv4Address::parse(ct.lease.substr(0, ct.lease.find('/')));
    if (addr) leases.erase(addr->to_uint());
    ct.lease.clear();
  }

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

  int vmid_param(const Call& c, const char* name = "vmid") { return std::stoi(c.params.at(name)); }
  bool flag(const Call& c, const std::string& name) {
    auto it = c.params.find(name);
    return it != c.params.end() && it->second == "1";
  }
  std::string param(const Call& c, const std::string& name, const std::string& fallback = "") {
    auto it = c.params.find(name);
    return it == c.params.end() ? fallback : it->second;
  }

  void check_node(const Call& c) {
    auto it = c.params.find("node");
    if (it != c.params.end() && !cluster->has(it->second))
      throw fail500(unknown_node_message(it->second));
  }

  static std::string node_of(const Call& c) { return c.params.at("node"); }

  Container& need(const Call& c, int vmid) {
    Container* ct = find_on(node_of(c), vmid);
    if (!ct) throw fail500(conf_missing(node_of(c), vmid));
    return *ct;
  }

  void check_unlocked(const Container& ct) {
    std::string lock = lock_of(ct);
    if (!lock.empty()) throw fail500("CT is locked (" + lock + ")");
  }

  // Running CTs whose init died (the lxc backend) are stopped now, as pvestatd finds them.
  void reap_dead() {
    for (auto& [vmid, ct] : cts) {
      if (!ct.running || backend->alive(vmid)) continue;
      backend->stop(vmid);  // frees what the dead container left (its bridge port)
      ct.running = false;
      release_lease(ct);
    }
  }

  Reply dispatch(Call& c) {
    const std::string key = c.method + " " + c.endpoint->path;
    check_node(c);
    if (c.method == "GET") reap_dead();
    if (key == "GET /version") {
      Object::Ptr o = new Object;
      o->set("version", "9.1.3");
      o->set("release", "9.1");
      o->set("repoid", "5c9e4ea7");
      return {o};
    }
    if (key == "GET /nodes") {
      Array::Ptr a = new Array;
      auto loads = node_loads();
      for (const auto& node : cluster->nodes()) {
        auto n = cluster->node_entry(node.name, loads[node.name]);
        n->set("ssl_fingerprint", fingerprint);  // one endpoint, one certificate
        a->add(n);
      }
      return {a};
    }
    if (key == "GET /cluster/nextid") {
      if (c.params.count("vmid")) {
        int vmid = vmid_param(c);
        if (cts.count(vmid))
          throw fail400("vmid", "VM " + std::to_string(vmid) + " already exists");
        return {std::to_string(vmid)};
      }
      for (int id = 100; id < 1000000; ++id) {
        if (cts.count(id)) continue;
        if (options.nextid_as_number) return {id};
        return {std::to_string(id)};  // a string on the wire, as real servers send it
      }
      throw fail500("unable to get any free VMID in range [100, 1000000]");
    }
    if (key == "GET /cluster/resources") return {resources(param(c, "type"))};
    if (key == "GET /nodes/{node}/lxc") {
      Array::Ptr a = new Array;
      for (const auto& [vmid, ct] : cts)
        if (ct.node == node_of(c)) a->add(vmstatus(ct));
      return {a};
    }
    if (key == "GET /nodes/{node}/storage") return {cluster->node_storage(node_of(c), c.params)};
    if (key == "POST /nodes/{node}/lxc/{vmid}/clone") return {clone(c)};
    if (key == "GET /nodes/{node}/lxc/{vmid}/config") {
      Container& ct = need(c, vmid_param(c));
      bool current = c.params.count("current") && param(c, "current") == "1";
      auto o = render_config(current ? ct.config : with_pending(ct));
      o->set("digest", digest_of(ct));
      return {o};
    }
    if (key == "PUT /nodes/{node}/lxc/{vmid}/config") {
      update_config(c);
      return {Var()};
    }
    if (key == "PUT /nodes/{node}/lxc/{vmid}/resize") return {resize(c)};
    if (key == "POST /nodes/{node}/lxc/{vmid}/template") {
      make_template(c);
      return {Var()};  // the worker's UPID is not returned (pve-container returns null)
    }
    if (key == "POST /nodes/{node}/lxc/{vmid}/status/start") return {start(c)};
    if (key == "POST /nodes/{node}/lxc/{vmid}/status/stop" ||
        key == "POST /nodes/{node}/lxc/{vmid}/status/shutdown" ||
        key == "POST /nodes/{node}/lxc/{vmid}/status/reboot")
      return {stop_like(c)};
    if (key == "GET /nodes/{node}/lxc/{vmid}/status/current") {
      Container& ct = need(c, vmid_param(c));
      auto o = vmstatus(ct);
      Object::Ptr ha = new Object;
      ha->set("managed", 0);
      o->set("ha", ha);
      return {o};
    }
    if (key == "GET /nodes/{node}/lxc/{vmid}/interfaces")
      return {interfaces(need(c, vmid_param(c)))};
    if (key == "DELETE /nodes/{node}/lxc/{vmid}") return {destroy(c)};
    if (key == "GET /nodes/{node}/lxc/{vmid}/snapshot")
      return {snapshot_list(need(c, vmid_param(c)))};
    if (key == "POST /nodes/{node}/lxc/{vmid}/snapshot") return {snapshot_create(c)};
    if (key == "DELETE /nodes/{node}/lxc/{vmid}/snapshot/{snapname}") return {snapshot_delete(c)};
    if (key == "POST /nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback")
      return {snapshot_rollback(c)};
    if (key == "GET /nodes/{node}/tasks") return task_list(c);
    if (key == "GET /nodes/{node}/tasks/{upid}/status") return {task_status(c)};
    if (key == "GET /nodes/{node}/tasks/{upid}/log") return task_log(c);
    if (key == "DELETE /nodes/{node}/tasks/{upid}") {
      Task& t = need_task(c);
      if (t.running) {
        t.killed = true;
        t.log.push_back("received interrupt");
        finish_task(t, "unexpected status");
      }
      return {Var()};
    }
    if (key == "GET /pools") return {pool_list(c)};
    if (key == "GET /pools/{poolid}") {
      auto list = pool_list(c);
      auto o = list->getObject(0);
      o->remove("poolid");
      return {o};
    }
    if (key == "POST /pools") {
      std::string id = param(c, "poolid");
      if (!std::isalpha(static_cast<unsigned char>(id[0])))
        throw fail400("poolid", "invalid format - pool ID must start with a letter");
      if (pools.count(id)) throw fail500("pool '" + id + "' already exists");
      pools[id].comment = param(c, "comment");
      return {Var()};
    }
    if (key == "PUT /pools" || key == "PUT /pools/{poolid}") {
      pool_update(c);
      return {Var()};
    }
    if (key == "DELETE /pools") {
      std::string id = param(c, "poolid");
      auto it = pools.find(id);
      if (it == pools.end()) throw fail500("pool '" + id + "' does not exist");
      if (!it->second.members.empty())
        throw fail500("pool '" + id + "' is not empty (contains VM " +
                      std::to_string(*it->second.members.begin()) + ")");
      pools.erase(it);
      return {Var()};
    }
    if (key == "GET /nodes/{node}/lxc/{vmid}/firewall/options") {
      Container& ct = need(c, vmid_param(c));
      return {render_firewall(ct.firewall)};
    }
    if (key == "PUT /nodes/{node}/lxc/{vmid}/firewall/options") {
      Container& ct = need(c, vmid_param(c));
      for (const auto& name : split_list(param(c, "delete"))) ct.firewall.erase(name);
      for (const auto& [k, v] : c.params)
        if (k != "node" && k != "vmid" && k != "delete" && k != "digest") ct.firewall[k] = v;
      return {Var()};
    }
    if (key == "GET /nodes/{node}/lxc/{vmid}/firewall/rules") {
      need(c, vmid_param(c));
      return {Var(Array::Ptr(new Array))};
    }
    if (key == "POST /nodes/{node}/lxc/{vmid}/firewall/rules") {
      need(c, vmid_param(c));
      return {Var()};
    }
    throw ApiFail{501, "Method '" + c.method + " " + c.path + "' not implemented", {}};
  }

  Object::Ptr render_firewall(const std::map<std::string, std::string>& fw) {
    Object::Ptr o = new Object;
    for (const auto& [k, v] : fw) {
      if (v == "0" || v == "1")
        o->set(k, std::stoi(v));
      else
        o->set(k, v);
    }
    return o;
  }

  Array::Ptr resources(const std::string& type) {
    Array::Ptr a = new Array;
    auto now = Clock::now();
    if (type.empty() || type == "vm") {
      for (auto& [vmid, ct] : cts) {
        Object::Ptr o = vmstatus(ct);
        o->set("id", "lxc/" + std::to_string(vmid));
        o->set("node", ct.node);
        bool fresh = now - ct.created < std::chrono::milliseconds(options.rrd_delay_ms);
        if (cluster->offline(ct.node)) o->set("status", "unknown");  // no fresh RRD data
        if (fresh) {  // pvestatd has not written RRD data yet
          o->set("status", "unknown");
          o->remove("name");
        }
        std::string pool = pool_of(vmid);
        if (!pool.empty()) o->set("pool", pool);
        o->set("template", config_int(ct, "template", 0));
        a->add(o);
      }
    }
    if (type.empty() || type == "node") {
      auto loads = node_loads();
      for (const auto& node : cluster->nodes())
        a->add(cluster->node_entry(node.name, loads[node.name]));
    }
    if (type.empty() || type == "storage") cluster->add_storage_resources(*a);
    return a;
  }

  // Per node: the memory (config `memory`, MiB) of its running CTs, and how many run.
  std::map<std::string, NodeLoad> node_loads() {
    std::map<std::string, NodeLoad> out;
    for (const auto& [vmid, ct] : cts) {
      if (!ct.running) continue;
      out[ct.node].mem += static_cast<uint64_t>(config_int(ct, "memory", 512)) << 20;
      ++out[ct.node].running;
    }
    return out;
  }

  // New random MACs for every net<N> (pve-container's clone_vm).
  void renew_macs(std::map<std::string, std::string>& config) {
    for (auto& [k, v] : config) {
      if (k.rfind("net", 0) != 0 || k.size() <= 3 ||
          !std::isdigit(static_cast<unsigned char>(k[3])))
        continue;
      std::string out;
      bool replaced = false;
      for (const auto& part : split_list_commas(v)) {
        std::string item = part;
        if (part.rfind("hwaddr=", 0) == 0) {
          item = "hwaddr=" + random_mac();
          replaced = true;
        }
        out += (out.empty() ? "" : ",") + item;
      }
      if (!replaced) out += ",hwaddr=" + random_mac();
      v = out;
    }
  }

  std::string clone(Call& c) {
    int src = vmid_param(c), newid = vmid_param(c, "newid");
    const std::string node = node_of(c);
    Container& source = need(c, src);
    std::string pool = param(c, "pool");
    if (!pool.empty() && !pools.count(pool))
      throw ApiFail{403, "Permission check failed (pool '" + pool + "' does not exist)", {}};
    if (Container* taken = find(newid))
      throw fail500("CT " + std::to_string(newid) + " already exists on node '" + taken->node +
                    "'");
    // With `target`, the config is made here and moved to the target when the task ends.
    auto target = cluster->clone_target(node, param(c, "target"), volume_storages(source.config),
                                        param(c, "storage"));
    if (!target.error.empty()) throw fail500(target.error);
    bool is_template = config_int(source, "template", 0) != 0;
    bool full = c.params.count("full") ? flag(c, "full") : !is_template;
    if (!full && c.params.count("storage"))
      throw fail500("parameter 'storage' not allowed for linked clones");
    // pve-container's order: the snapshot, then (per volume) a full clone of a running CT.
    std::string snapname = param(c, "snapname");
    auto snap = std::find_if(source.snapshots.begin(), source.snapshots.end(),
                             [&](const Snapshot& s) { return s.name == snapname; });
    if (!snapname.empty() && snap == source.snapshots.end())
      throw fail500("snapshot '" + snapname + "' does not exist");
    if (full && source.running && !c.params.count("snapname"))
      throw fail500("Full clone of a running container is only possible from a snapshot");
    if (auto e = Volumes::refusal("clone", snapname.empty() ? source.config : snap->config);
        !e.empty())
      throw fail500(e);
    check_unlocked(source);
    source.config["lock"] = "disk";
    Container ct;
    ct.vmid = newid;
    ct.node = node;
    ct.created = Clock::now();
    ct.config = snapname.empty() ? source.config : snap->config;  // the snapshot's, as Proxmox
    ct.config.erase("template");
    ct.config["lock"] = "create";
    renew_macs(ct.config);
    if (c.params.count("hostname")) ct.config["hostname"] = param(c, "hostname");
    if (c.params.count("description")) ct.config["description"] = param(c, "description");
    auto rootfs = ct.config.find("rootfs");
    std::string source_volume;
    if (rootfs != ct.config.end()) {
      auto comma = rootfs->second.find(',');
      source_volume = rootfs->second.substr(0, comma);
      std::string rest = comma == std::string::npos ? "" : rootfs->second.substr(comma);
      // A linked clone stays on the template's storage, a full one goes to `storage` if given.
      std::string sid = param(c, "storage", source_volume.substr(0, source_volume.find(':')));
      rootfs->second = sid + ":vm-" + std::to_string(newid) + "-disk-0" + rest;
    }
    ct.firewall = source.firewall;
    cts[newid] = std::move(ct);
    backend->place(newid, node);
    // The storage step (the lxc backend's overlay or copy) runs without the state lock.
    auto storage_error = std::make_shared<std::string>();
    auto work = [this, src, newid, full, snapname, config = cts[newid].config, storage_error] {
      *storage_error = backend->clone(src, newid, full, snapname, config);
      return std::string();
    };
    auto done = [this, src, newid, pool, to = target.node, storage_error] {
      Container* s = find(src);
      Container* n = find(newid);
      if (s && lock_of(*s) == "disk") s->config.erase("lock");
      bool failing = false;
      for (const auto& [type, msg] : options.fail_tasks)
        if (type == "vzclone" && !is_warnings(msg)) failing = true;
      if (failing || !storage_error->empty()) {  // the worker frees the new volumes and config
        cts.erase(newid);
        backend->destroy(newid);
        return storage_error->empty() ? std::string() : "clone failed: " + *storage_error;
      }
      if (n) {
        if (!pool.empty() && pools.count(pool)) pools[pool].members.insert(newid);
        if (lock_of(*n) == "create") n->config.erase("lock");
        n->node = to;  // PVE::LXC::Config->move_config_to_node
        backend->place(newid, to);
      }
      return std::string();
    };
    std::string upid =
        start_task("vzclone", std::to_string(src), c.user, node, done, nullptr, work);
    tasks[upid].log.push_back(std::string(full ? "create full clone" : "create linked clone") +
                              " of mount point rootfs (" + source_volume + ")");
    return upid;
  }

  void update_config(Call& c) {
    Container& ct = need(c, vmid_param(c));
    ParamMap changes;
    for (const auto& [k, v] : c.params)
      if (k != "node" && k != "vmid" && k != "digest" && k != "delete" && k != "revert")
        changes[k] = v;
    auto deletes = split_list(param(c, "delete"));
    if (changes.empty() && deletes.empty() && !c.params.count("revert"))
      throw fail500("no options specified");
    // Feature flags other than nesting: root@pam only; tokens never.
    if (changes.count("features")) {
      std::map<std::string, std::string> want, have;
      std::string error;
      parse_property_string(changes["features"], "", &want, &error);
      if (ct.config.count("features"))
        parse_property_string(ct.config["features"], "", &have, &error);
      std::set<std::string> keys;
      for (const auto& [k, v] : want) keys.insert(k);
      for (const auto& [k, v] : have) keys.insert(k);
      for (const auto& k : keys) {
        if (k == "nesting") continue;
        if (want[k] != have[k])
          throw ApiFail{403,
                        "Permission check failed (changing feature flags (except nesting) is "
                        "only allowed for root@pam)",
                        {}};
      }
    }
    check_unlocked(ct);
    if (c.params.count("digest") && param(c, "digest") != digest_of(ct))
      throw fail500("detected modified configuration - file changed by other user? Try again.");
    if (changes.count("unprivileged") && changes["unprivileged"] != ct.config["unprivileged"])
      throw fail500("unable to modify read-only option: 'unprivileged'");
    if (auto e = volumes->check_update(c.user, ct.vmid, ct.config, changes, deletes))
      throw ApiFail{e.status, e.message, e.errors};
    for (const auto& d : deletes) {
      if (d == "memory" || d == "rootfs" || d == "ostype")
        throw fail400("delete", "unable to delete required option '" + d + "'");
      if (changes.count(d))
        throw fail400(d, "unable to delete and set the same option at the same time");
    }
    if (c.params.count("revert"))
      for (const auto& r : split_list(param(c, "revert"))) {
        ct.pending.erase(r);
        ct.pending_delete.erase(r);
      }
    // A stopped CT gets everything at once; a running one what Proxmox hot-plugs, the rest
    // waits in [pve:pending] for the next start. Mount point volumes go through `volumes`.
    std::vector<std::string> volume_deletes;
    ParamMap volume_changes;
    for (const auto& d : deletes) {
      ct.pending.erase(d);
      if (!ct.running || hot_applied(ct, d)) {
        if (is_mp_key(d) || is_unused_key(d))
          volume_deletes.push_back(d);
        else
          ct.config.erase(d);
        ct.pending_delete.erase(d);
      } else {
        ct.pending_delete.insert(d);
      }
    }
    for (auto& [k, v] : changes) {
      if (k == "tags") v = normalize_tags(v);
      ct.pending_delete.erase(k);
      if (!ct.running || hot_applied(ct, k)) {
        (is_mp_key(k) ? volume_changes[k] : ct.config[k]) = v;
        ct.pending.erase(k);
      } else {
        ct.pending[k] = v;
      }
    }
    std::vector<std::string> log;
    auto e = volumes->apply(ct.node, ct.vmid, ct.config, volume_deletes, volume_changes, &log);
    warn_all(ct, log);
    if (e) throw ApiFail{e.status, e.message, e.errors};
  }

  // Warnings of a synchronous API call (Proxmox's go to the syslog).
  static void warn_all(const Container& ct, const std::vector<std::string>& lines) {
    for (const auto& line : lines)
      pvs::log::warn("pvesim: CT " + std::to_string(ct.vmid) + ": " + line);
  }

  std::string resize(Call& c) {
    const std::string node = node_of(c);
    Container& ct = need(c, vmid_param(c));
    check_unlocked(ct);
    std::string disk = param(c, "disk"), size = param(c, "size"), volid;
    uint64_t current = rootfs_size(ct), target = 0;
    if (disk != "rootfs") {  // a mount point's volume (its owner only)
      if (auto e = volumes->check_resize(node, ct.vmid, ct.config, disk, size, &volid, &current,
                                         &target))
        throw ApiFail{e.status, e.message, e.errors};
    } else {
      bool grow = !size.empty() && size[0] == '+';
      uint64_t amount = 0;
      if (!parse_size(grow ? size.substr(1) : size, &amount))
        throw fail400("size", "unable to parse size '" + size + "'");
      target = grow ? current + amount : amount;
      if (target < current) throw fail500("unable to shrink disk size");
      if (target == current) throw fail500("disk is already at specified size");
    }
    int vmid = ct.vmid;
    auto work = [this, vmid, volid, target] {
      return volid.empty() ? "" : backend->resize_volume(vmid, volid, target);
    };
    auto done = [this, node, vmid, disk, volid, target] {
      Container* n = find_on(node, vmid);
      if (!n) return conf_missing(node, vmid);
      if (!volid.empty()) volumes->set_size(node, volid, target);
      auto& value = n->config[disk];
      auto pos = value.find("size=");
      if (pos != std::string::npos) {
        auto end = value.find(',', pos);
        value.replace(pos, end == std::string::npos ? std::string::npos : end - pos,
                      "size=" + format_disk_size(target));
      } else {
        value += ",size=" + format_disk_size(target);
      }
      return std::string();
    };
    return start_task("resize", std::to_string(vmid), c.user, node, done, nullptr, work);
  }

  // POST .../template: the checks under the config lock, then a `vztemplate` worker that turns
  // each volume into a base volume (vm-N-disk-0 -> base-N-disk-0) and sets template=1. The API
  // answers null: the caller sees the end only in the config (or the task list).
  void make_template(Call& c) {
    const std::string node = node_of(c);
    Container& ct = need(c, vmid_param(c));
    check_unlocked(ct);
    if (!ct.snapshots.empty())
      throw fail500("unable to create template, because CT contains snapshots");
    if (config_int(ct, "template", 0)) throw fail500("you can't convert a template to a template");
    if (ct.running) throw fail500("you can't convert a CT to template if the CT is running");
    int vmid = ct.vmid;
    start_task("vztemplate", std::to_string(vmid), c.user, node, [this, node, vmid] {
      Container* n = find_on(node, vmid);
      if (!n) return conf_missing(node, vmid);
      if (n->running) return std::string("you can't convert a CT to template if the CT is running");
      if (auto e = Volumes::refusal("template", n->config); !e.empty()) return e;
      auto rootfs = n->config.find("rootfs");
      const std::string from = ":vm-" + std::to_string(vmid) + "-disk-";
      if (rootfs != n->config.end())
        if (auto pos = rootfs->second.find(from); pos != std::string::npos)
          rootfs->second.replace(pos, from.size(), ":base-" + std::to_string(vmid) + "-disk-");
      n->config["template"] = "1";
      return std::string();
    });
  }

  std::string start(Call& c) {
    const std::string node = node_of(c);
    int vmid = vmid_param(c);
    if (flag(c, "skiplock") && c.user.rfind("root@pam", 0) != 0)
      throw fail400("skiplock", "Only root may use this option.");
    Container* ct = find_on(node, vmid);
    if (ct && ct->running) throw fail500("CT " + std::to_string(vmid) + " already running");
    // The namespace and sshd of the netns backend take a while: that part runs without the
    // state lock, so the API keeps answering (as pveproxy does while a CT starts).
    struct Start {
      bool skip = false;
      std::map<std::string, std::string> config;
      std::string ipv4;
    };
    auto st = std::make_shared<Start>();
    auto pre = [this, node, vmid, st] {
      Container* n = find_on(node, vmid);
      if (!n) return conf_missing(node, vmid);
      std::string lock = lock_of(*n);
      if (!lock.empty()) return "CT is locked (" + lock + ")";
      if (config_int(*n, "template", 0))
        return std::string("you can't start a CT if it's a template");
      st->skip = n->running;
      if (!st->skip) apply_pending(*n);  // vm_start: vmconfig_apply_pending
      if (auto e = volumes->check_start(node, n->config); !e.empty() && !st->skip) return e;
      st->config = n->config;
      st->ipv4 = ipv4_of(*n);
      return std::string();
    };
    auto work = [this, vmid, st] {
      if (st->skip) return std::string();
      std::string error = backend->start(vmid, st->config, st->ipv4);
      if (!error.empty())
        return "startup for container '" + std::to_string(vmid) + "' failed: " + error;
      return std::string();
    };
    auto finish = [this, node, vmid, st] {
      Container* n = find_on(node, vmid);
      if (!n) {  // destroyed meanwhile
        if (!st->skip) backend->stop(vmid);
        return conf_missing(node, vmid);
      }
      if (!st->skip) {
        n->running = true;
        n->started = Clock::now();
      }
      return std::string();
    };
    return start_task("vzstart", std::to_string(vmid), c.user, node, finish, pre, work);
  }

  std::string stop_like(Call& c) {
    const std::string node = node_of(c);
    int vmid = vmid_param(c);
    Container& ct = need(c, vmid);
    std::string kind = c.endpoint->path.substr(c.endpoint->path.rfind('/') + 1);
    if (!ct.running)
      throw fail500((kind == "reboot" ? "VM " : "CT ") + std::to_string(vmid) + " not running");
    std::string type = kind == "stop" ? "vzstop" : kind == "shutdown" ? "vzshutdown" : "vzreboot";
    bool skiplock = flag(c, "skiplock");
    if (type != "vzreboot") {
      auto skip = std::make_shared<bool>(false);
      auto pre = [this, node, vmid, skiplock, skip] {
        Container* n = find_on(node, vmid);
        if (!n) return conf_missing(node, vmid);
        std::string lock = lock_of(*n);
        if (!lock.empty() && lock != "mounted" && !skiplock) return "CT is locked (" + lock + ")";
        *skip = !n->running;
        return std::string();
      };
      auto work = [this, vmid, skip] {
        if (!*skip) backend->stop(vmid);
        return std::string();
      };
      auto finish = [this, node, vmid, skip] {
        Container* n = find_on(node, vmid);
        if (n && !*skip) {
          n->running = false;
          release_lease(*n);
        }
        return std::string();
      };
      return start_task(type, std::to_string(vmid), c.user, node, finish, pre, work);
    }
    return start_task(type, std::to_string(vmid), c.user, node, [this, node, vmid, type, skiplock] {
      Container* n = find_on(node, vmid);
      if (!n) return conf_missing(node, vmid);
      std::string lock = lock_of(*n);
      if (!lock.empty() && lock != "mounted" && !skiplock) return "CT is locked (" + lock + ")";
      if (!n->running) return std::string();
      backend->stop(vmid);
      if (type == "vzreboot") {
        std::string error = backend->start(vmid, n->config, ipv4_of(*n));
        if (!error.empty()) {
          n->running = false;
          return error;
        }
        n->started = Clock::now();
        return std::string();
      }
      n->running = false;
      release_lease(*n);
      return std::string();
    });
  }

  Var interfaces(Container& ct) {
    if (!ct.running) return Var();  // {"data":null}
    auto live = backend->interfaces(ct.vmid);
    bool dhcp_done =
        Clock::now() - ct.started >= std::chrono::milliseconds(options.interfaces_delay_ms);
    Array::Ptr a = new Array;
    for (const auto& iface : live) {
      Object::Ptr o = new Object;
      o->set("name", iface.name);
      o->set("hwaddr", iface.hwaddr);
      o->set("hardware-address", iface.hwaddr);
      Array::Ptr addrs = new Array;
      std::string inet, inet6;
      for (const auto& addr : iface.addresses) {
        bool v6 = addr.find(':') != std::string::npos;
        if (!v6 && iface.name != "lo" && !dhcp_done) continue;
        Object::Ptr ao = new Object;
        auto slash = addr.find('/');
        ao->set("ip-address", addr.substr(0, slash));
        ao->set("ip-address-type", v6 ? "inet6" : "inet");
        ao->set("prefix", std::stoi(addr.substr(slash + 1)));
        addrs->add(ao);
        (v6 ? inet6 : inet) = addr;  // only the last one of a family is kept
      }
      o->set("ip-addresses", addrs);
      if (!inet.empty()) o->set("inet", inet);
      if (!inet6.empty()) o->set("inet6", inet6);
      a->add(o);
    }
    return a;
  }

  std::string destroy(Call& c) {
    const std::string node = node_of(c);
    int vmid = vmid_param(c);
    Container& ct = need(c, vmid);
    if (config_int(ct, "protection", 0))
      throw fail500("can't remove CT " + std::to_string(vmid) + " - protection mode enabled");
    check_unlocked(ct);
    bool force = flag(c, "force"), unreferenced = flag(c, "destroy-unreferenced-disks");
    if (ct.running && !force)
      throw fail500("unable to destroy CT " + std::to_string(vmid) + " - container is running");
    ct.config["lock"] = "destroyed";
    auto upid = std::make_shared<std::string>();
    *upid = start_task("vzdestroy", std::to_string(vmid), c.user, node, [=, this] {
      Container* n = find_on(node, vmid);
      if (!n) return conf_missing(node, vmid);
      // The worker checks again under the config flock: a start that ran meanwhile wins.
      if (n->running && !force) {
        n->config.erase("lock");
        return "unable to destroy CT " + std::to_string(vmid) + " - container is running";
      }
      if (n->running) {
        backend->stop(vmid);
        n->running = false;
      }
      // destroy_lxc_container: the volumes the CT owns are freed, the others stay (logged).
      auto& log = tasks[*upid].log;
      if (auto e = volumes->destroy(node, vmid, {n->config, n->pending}, unreferenced, &log);
          !e.empty()) {
        n->config.erase("lock");
        return e;
      }
      backend->destroy(vmid);
      release_lease(*n);
      for (auto& [id, pool] : pools) pool.members.erase(vmid);
      cts.erase(vmid);
      return std::string();
    });
    return *upid;
  }

  Array::Ptr snapshot_list(Container& ct) {
    Array::Ptr a = new Array;
    for (const auto& s : ct.snapshots) {
      Object::Ptr o = new Object;
      o->set("name", s.name);
      o->set("description", s.description);
      o->set("snaptime", static_cast<Poco::Int64>(s.snaptime));
      if (!s.parent.empty()) o->set("parent", s.parent);
      a->add(o);
    }
    Object::Ptr current = new Object;
    current->set("name", "current");
    current->set("description", "You are here!");
    current->set("running", ct.running ? 1 : 0);
    current->set("digest", digest_of(ct));
    if (!ct.snapshots.empty()) current->set("parent", ct.snapshots.back().name);
    a->add(current);
    return a;
  }

  std::string snapshot_create(Call& c) {
    const std::string node = node_of(c);
    int vmid = vmid_param(c);
    std::string name = param(c, "snapname");
    if (name == "current" || name == "vzdump")
      throw fail500("unable to use snapshot name '" + name + "' (reserved name)");
    std::string description = param(c, "description");
    return start_task("vzsnapshot", std::to_string(vmid), c.user, node,
                      [this, node, vmid, name, description] {
                        Container* n = find_on(node, vmid);
                        if (!n) return conf_missing(node, vmid);
                        for (const auto& s : n->snapshots)
                          if (s.name == name) return "snapshot name '" + name + "' already used";
                        if (config_int(*n, "template", 0))
                          return std::string("you can't take a snapshot if it's a template");
                        std::string lock = lock_of(*n);
                        if (!lock.empty()) return "CT is locked (" + lock + ")";
                        if (auto e = Volumes::refusal("snapshot", n->config); !e.empty()) return e;
                        Snapshot s;
                        s.name = name;
                        s.description = description;
                        s.snaptime = std::time(nullptr);
                        s.parent = n->snapshots.empty() ? "" : n->snapshots.back().name;
                        s.config = n->config;
                        // The volume's snapshot (lxc backend: a copy of its writable layer).
                        if (auto e = backend->snapshot(vmid, name); !e.empty()) return e;
                        n->snapshots.push_back(std::move(s));
                        return std::string();
                      });
  }

  std::string snapshot_delete(Call& c) {
    const std::string node = node_of(c);
    int vmid = vmid_param(c);
    std::string name = param(c, "snapname");
    return start_task("vzdelsnapshot", std::to_string(vmid), c.user, node,
                      [this, node, vmid, name] {
                        Container* n = find_on(node, vmid);
                        if (!n) return conf_missing(node, vmid);
                        std::string lock = lock_of(*n);
                        if (!lock.empty()) return "CT is locked (" + lock + ")";
                        auto it = std::find_if(n->snapshots.begin(), n->snapshots.end(),
                                               [&](const Snapshot& s) { return s.name == name; });
                        if (it == n->snapshots.end())
                          return "snapshot '" + name + "' does not exist";
                        std::string parent = it->parent;
                        for (auto& s : n->snapshots)
                          if (s.parent == name) s.parent = parent;
                        n->snapshots.erase(it);
                        backend->delete_snapshot(vmid, name);
                        return std::string();
                      });
  }

  std::string snapshot_rollback(Call& c) {
    const std::string node = node_of(c);
    int vmid = vmid_param(c);
    std::string name = param(c, "snapname");
    bool start_after = flag(c, "start");
    return start_task("vzrollback", std::to_string(vmid), c.user, node,
                      [this, node, vmid, name, start_after] {
                        Container* n = find_on(node, vmid);
                        if (!n) return conf_missing(node, vmid);
                        std::string lock = lock_of(*n);
                        if (!lock.empty()) return "CT is locked (" + lock + ")";
                        auto it = std::find_if(n->snapshots.begin(), n->snapshots.end(),
                                               [&](const Snapshot& s) { return s.name == name; });
                        if (it == n->snapshots.end())
                          return "snapshot '" + name + "' does not exist";
                        if (n->running) {
                          backend->stop(vmid);
                          n->running = false;
                        }
                        if (auto e = backend->rollback(vmid, name); !e.empty()) return e;
                        n->config = it->config;
                        if (start_after) {
                          std::string error = backend->start(vmid, n->config, ipv4_of(*n));
                          if (!error.empty()) return error;
                          n->running = true;
                          n->started = Clock::now();
                        }
                        return std::string();
                      });
  }

  Task& need_task(const Call& c) {
    std::string upid = param(c, "upid");
    auto it = tasks.find(upid);
    if (it == tasks.end() || it->second.node != node_of(c)) {  // its log is on its node
      static const char* kRe = "UPID:";
      if (upid.rfind(kRe, 0) != 0 || upid.back() != ':')
        throw fail400("upid", "unable to parse worker upid '" + upid + "'");
      throw fail400("upid", "no such task");
    }
    return it->second;
  }

  Object::Ptr task_object(const Task& t) {
    Object::Ptr o = new Object;
    o->set("upid", t.upid);
    o->set("node", t.node);
    o->set("pid", t.pid);
    o->set("pstart", static_cast<Poco::Int64>(t.pstart));
    o->set("starttime", static_cast<Poco::Int64>(t.starttime));
    o->set("type", t.type);
    o->set("id", t.id);
    auto bang = t.user.find('!');
    o->set("user", t.user.substr(0, bang));
    if (bang != std::string::npos) o->set("tokenid", t.user.substr(bang + 1));
    return o;
  }

  Object::Ptr task_status(const Call& c) {
    Task& t = need_task(c);
    auto o = task_object(t);
    o->set("status", t.running ? "running" : "stopped");
    if (!t.running) o->set("exitstatus", t.exitstatus);
    return o;
  }

  Reply task_log(const Call& c) {
    Task& t = need_task(c);
    int start = std::stoi(param(c, "start", "0")), limit = std::stoi(param(c, "limit", "50"));
    Array::Ptr a = new Array;
    int total = static_cast<int>(t.log.size());
    for (int i = start; i < total && i < start + limit; ++i) {
      Object::Ptr o = new Object;
      o->set("n", i + 1);
      o->set("t", t.log[static_cast<std::size_t>(i)]);
      a->add(o);
    }
    return {a, total};
  }

  Reply task_list(const Call& c) {
    std::string source = param(c, "source", "archive");
    std::string vmid = param(c, "vmid"), typefilter = param(c, "typefilter");
    int start = std::stoi(param(c, "start", "0")), limit = std::stoi(param(c, "limit", "50"));
    Array::Ptr a = new Array;
    int index = 0, total = 0;
    for (auto it = task_order.rbegin(); it != task_order.rend(); ++it) {
      const Task& t = tasks[*it];
      if (t.node != node_of(c)) continue;
      if (source == "archive" && t.running) continue;
      if (source == "active" && !t.running) continue;
      if (!vmid.empty() && t.id != vmid) continue;
      if (!typefilter.empty() && t.type != typefilter) continue;
      ++total;
      if (index++ < start || static_cast<int>(a->size()) >= limit) continue;
      auto o = task_object(t);
      if (!t.running) {
        o->set("status", t.exitstatus);
        o->set("endtime", static_cast<Poco::Int64>(t.endtime));
      }
      a->add(o);
    }
    return {a, total};
  }

  Array::Ptr pool_list(const Call& c) {
    Array::Ptr a = new Array;
    std::string only = param(c, "poolid");
    if (!only.empty() && !pools.count(only)) throw fail500("pool '" + only + "' does not exist");
    for (const auto& [id, pool] : pools) {
      if (!only.empty() && id != only) continue;
      Object::Ptr o = new Object;
      o->set("poolid", id);
      if (!pool.comment.empty()) o->set("comment", pool.comment);
      if (!only.empty()) {
        Array::Ptr members = new Array;
        for (int vmid : pool.members) {
          Container* ct = find(vmid);
          if (!ct) continue;
          auto m = vmstatus(*ct);
          m->set("id", "lxc/" + std::to_string(vmid));
          m->set("node", ct->node);
          members->add(m);
        }
        o->set("members", members);
      }
      a->add(o);
    }
    return a;
  }

  void pool_update(const Call& c) {
    std::string id = param(c, "poolid");
    auto it = pools.find(id);
    if (it == pools.end()) throw fail500("pool '" + id + "' does not exist");
    if (c.params.count("comment")) it->second.comment = param(c, "comment");
    bool remove = flag(c, "delete"), allow_move = flag(c, "allow-move");
    for (const auto& text : split_list(param(c, "vms"))) {
      int vmid = std::stoi(text);
      if (!find(vmid)) throw fail500("no such VMID '" + text + "'");
      if (remove) {
        if (!it->second.members.count(vmid)) throw fail500("VM " + text + " is not a pool member");
        it->second.members.erase(vmid);
        continue;
      }
      if (it->second.members.count(vmid)) throw fail500("VM " + text + " is already a pool member");
      std::string other = pool_of(vmid);
      if (!other.empty()) {
        if (!allow_move)
          throw fail500("VM " + text + " belongs already to pool '" + other +
                        "' and 'allow-move' is not set");
        pools[other].members.erase(vmid);
      }
      it->second.members.insert(vmid);
    }
  }

  // ---- the HTTP pipeline ----------------------------------------------------------------
  void send(Poco::Net::HTTPServerResponse& resp, int status, const std::string& reason,
            const std::string& body) {
    resp.setStatusAndReason(static_cast<Poco::Net::HTTPResponse::HTTPStatus>(status), reason);
    if (status >= 400) resp.setKeepAlive(false);
    resp.setContentType("application/json;charset=UTF-8");
    resp.setContentLength(static_cast<std::streamsize>(body.size()));
    resp.send() << body;
  }

  void send_error(Poco::Net::HTTPServerResponse& resp, const ApiFail& f) {
    Object::Ptr o = new Object;
    o->set("data", Var());
    if (!f.errors.empty()) {
      Object::Ptr e = new Object;
      for (const auto& [k, v] : f.errors) e->set(k, v);
      o->set("errors", e);
    }
    o->set("message", f.message + "\n");
    // Only the first line of the message goes into the reason phrase.
    std::string reason = f.message.substr(0, f.message.find('\n'));
    send(resp, f.status, reason, json(o));
  }

  void handle(Poco::Net::HTTPServerRequest& req, Poco::Net::HTTPServerResponse& resp) {
    struct Active {
      std::atomic<int>& n;
      explicit Active(std::atomic<int>& count) : n(count) { ++n; }
      ~Active() { --n; }
    } active_guard(active);
    if (closing.load()) {
      resp.setKeepAlive(false);
      return send_error(resp, {503, "simulator shutting down", {}});
    }
    Poco::URI uri(req.getURI());
    std::string path = uri.getPath();
    std::string method = req.getMethod();
    std::string body;
    if (req.hasContentLength() || req.getChunkedTransferEncoding()) {
      std::ostringstream os;
      os << req.stream().rdbuf();
      body = os.str();
    }
    if (path.rfind("/_pvesim/", 0) == 0) return control(method, path, body, resp);
    const std::string prefix = "/api2/json";
    std::string api_path = path.rfind(prefix, 0) == 0 ? path.substr(prefix.size()) : "";
    ParamMap path_params;
    const Endpoint* endpoint =
        api_path.empty() ? nullptr : schema.match(method, api_path, &path_params);
    {
      std::lock_guard lock(mutex);
      ++request_total;
      ++counts[method + " " + (endpoint ? endpoint->path : api_path.empty() ? path : api_path)];
    }
    if (api_path.empty()) return send_error(resp, {501, "no such uri", {}});
    // Authentication (pveproxy): token header, split at the last '='.
    std::string auth = req.get("Authorization", "");
    std::string user;
    {
      auto pos = auth.find("PVEAPIToken");
      if (pos == std::string::npos ||
          (pos > 0 && !std::isspace(static_cast<unsigned char>(auth[pos - 1])))) {
        if (!auth.empty()) nap(options.auth_delay_ms);
        resp.setStatusAndReason(Poco::Net::HTTPResponse::HTTP_UNAUTHORIZED,
                                auth.empty() ? "No ticket" : "Authentication failed!");
        resp.setKeepAlive(false);
        resp.setContentLength(0);
        resp.send();
        return;
      }
      std::string value = auth.substr(pos + 11);
      if (!value.empty() && (value[0] == '=' || value[0] == ' ')) value.erase(0, 1);
      value = value.substr(0, value.find(';'));
      std::string decoded;
      Poco::URI::decode(value, decoded);
      auto eq = decoded.rfind('=');
      std::string id = eq == std::string::npos ? "" : decoded.substr(0, eq);
      std::string secret = eq == std::string::npos ? "" : decoded.substr(eq + 1);
      auto it = options.tokens.find(id);
      if (it == options.tokens.end() || it->second != secret) {
        nap(options.auth_delay_ms);
        resp.setStatusAndReason(Poco::Net::HTTPResponse::HTTP_UNAUTHORIZED,
                                "Authentication failed!");
        resp.setKeepAlive(false);
        resp.setContentLength(0);
        resp.send();
        return;
      }
      user = id;
    }
    if ((method == "GET" || method == "DELETE") && !body.empty())
      return send_error(resp, {501, "Unexpected content for method '" + method + "'", {}});
    if (!endpoint) {
      return send_error(resp, {501, "Method '" + method + " " + path + "' not implemented", {}});
    }
    int latency = 0;
    std::optional<ApiFail> fault;
    {
      std::lock_guard lock(mutex);
      latency = options.latency_ms;
      for (std::size_t i = 0; i < options.faults.size(); ++i) {
        auto& rule = options.faults[i];
        if (rule.method != "*" && rule.method != method) continue;
        if (rule.path != "*" && rule.path != endpoint->path) continue;
        if (rule.count == 0) continue;
        if (std::uniform_real_distribution<double>(0, 1)(rng) >= rule.rate) continue;
        if (rule.count > 0) --rule.count;
        fault = ApiFail{rule.status, rule.message, {}};
        break;
      }
    }
    if (latency > 0) nap(latency);
    if (fault) return send_error(resp, *fault);
    if (unreachable(path_params)) {  // pveproxy cannot proxy to the node: no body
      resp.setKeepAlive(false);
      return send(resp, kUnreachableStatus, kUnreachable, "");
    }
    // Parameters: body (form or JSON), then the query string overrides.
    ParamMap params;
    if (method == "POST" || method == "PUT") {
      if (req.getContentType().find("application/json") != std::string::npos && !body.empty()) {
        try {
          Poco::JSON::Parser parser;
          auto o = parser.parse(body).extract<Object::Ptr>();
          for (const auto& [k, v] : *o)
            params[k] = v.isBoolean() ? (v.convert<bool>() ? "1" : "0") : v.convert<std::string>();
        } catch (const std::exception&) {
          return send_error(resp, {400, "malformed JSON body", {}});
        }
      } else {
        params = parse_form(body);
      }
    }
    for (const auto& [k, v] : parse_form(uri.getRawQuery())) params[k] = v;
    for (const auto& [k, v] : path_params) {
      std::string decoded;
      Poco::URI::decode(v, decoded);
      auto it = params.find(k);
      if (it != params.end() && it->second != decoded)
        return send_error(resp, {400,
                                 "Parameter verification failed.",
                                 {{k, "duplicate parameter (path and body differ)"}}});
      params[k] = decoded;
    }
    auto errors = schema.validate(*endpoint, params);
    if (!errors.empty()) {
      {
        std::lock_guard lock(mutex);
        ++schema_rejections;
      }
      std::string detail;
      for (const auto& [k, v] : errors) detail += " " + k + ": " + v + ";";
      pvs::log::info("pvesim: " + method + " " + api_path + " rejected:" + detail);
      return send_error(resp, {400, "Parameter verification failed.", errors});
    }
    if (!endpoint->allowtoken)
      return send_error(resp, {403,
                               "Permission check failed (URI '" + path +
                                   "' not available with API token, need proper ticket.)",
                               {}});
    Call call{endpoint, std::move(params), user, method, api_path};
    try {
      Reply reply;
      {
        std::lock_guard lock(mutex);
        reply = dispatch(call);
      }
      Object::Ptr o = new Object;
      o->set("data", reply.data);
      if (reply.total >= 0) o->set("total", reply.total);
      send(resp, 200, "OK", json(o));
    } catch (const ApiFail& f) {
      send_error(resp, f);
    } catch (const std::exception& ex) {
      send_error(resp, {500, ex.what(), {}});
    }
  }

  // Whether the request is for a node that is cut from the API (set_node_offline).
  bool unreachable(const ParamMap& path_params) {
    auto it = path_params.find("node");
    if (it == path_params.end()) return false;
    std::string node;
    Poco::URI::decode(it->second, node);
    std::lock_guard lock(mutex);
    return cluster->offline(node);
  }

  void control(const std::string& method, const std::string& path, const std::string& body,
               Poco::Net::HTTPServerResponse& resp) {
    try {
      Object::Ptr in;
      if (!body.empty()) {
        Poco::JSON::Parser parser;
        in = parser.parse(body).extract<Object::Ptr>();
      }
      Object::Ptr out = new Object;
      if (path == "/_pvesim/stats" && method == "GET") {
        std::lock_guard lock(mutex);
        Object::Ptr c = new Object;
        for (const auto& [k, v] : counts) c->set(k, v);
        out->set("requests", c);
        out->set("total", request_total);
      } else if (path == "/_pvesim/stats" && method == "DELETE") {
        std::lock_guard lock(mutex);
        counts.clear();
        request_total = 0;
      } else if (path == "/_pvesim/faults" && method == "POST" && in) {
        std::lock_guard lock(mutex);
        if (in->has("latency_ms")) options.latency_ms = in->getValue<int>("latency_ms");
        if (in->has("interfaces_delay_ms"))
          options.interfaces_delay_ms = in->getValue<int>("interfaces_delay_ms");
        if (in->has("rules")) {
          options.faults.clear();
          for (const auto& r : *in->getArray("rules")) {
            auto ro = r.extract<Object::Ptr>();
            FaultRule rule;
            if (ro->has("method")) rule.method = ro->getValue<std::string>("method");
            if (ro->has("path")) rule.path = ro->getValue<std::string>("path");
            if (ro->has("status")) rule.status = ro->getValue<int>("status");
            if (ro->has("message")) rule.message = ro->getValue<std::string>("message");
            if (ro->has("rate")) rule.rate = ro->getValue<double>("rate");
            if (ro->has("count")) rule.count = ro->getValue<int>("count");
            options.faults.push_back(rule);
          }
        }
        if (in->has("fail_tasks")) {
          options.fail_tasks.clear();
          for (const auto& [k, v] : *in->getObject("fail_tasks"))
            options.fail_tasks[k] = v.convert<std::string>();
        }
        if (in->has("task_ms"))
          for (const auto& [k, v] : *in->getObject("task_ms"))
            options.task_ms[k] = v.convert<int>();
        if (in->has("offline"))
          for (const auto& [k, v] : *in->getObject("offline"))
            if (!cluster->set_offline(k, v.convert<bool>())) throw ApiFail{400, "no node " + k, {}};
        if (in->has("locks")) {
          for (const auto& [k, v] : *in->getObject("locks")) {
            Container* ct = find(std::stoi(k));
            if (!ct) throw ApiFail{400, "no CT " + k, {}};
            std::string value = v.convert<std::string>();
            if (value.empty())
              ct->config.erase("lock");
            else
              ct->config["lock"] = value;
          }
        }
      } else {
        throw ApiFail{501, "no such control endpoint", {}};
      }
      Object::Ptr o = new Object;
      o->set("data", out);
      send(resp, 200, "OK", json(o));
    } catch (const ApiFail& f) {
      send_error(resp, f);
    } catch (const std::exception& ex) {
      send_error(resp, {400, ex.what(), {}});
    }
  }

  void add_template(int vmid, const std::string& node, const std::string& storage) {
    Container ct;
    ct.vmid = vmid;
    ct.node = node;
    ct.created = Clock::now() - std::chrono::hours(1);
    ct.config = {
        {"arch", "amd64"},
        {"cores", "1"},
        {"description", "pve-sandbox template"},
        {"features", "nesting=1"},
        {"hostname", "sandbox-template"},
        {"memory", "512"},
        {"net0", "name=eth0,bridge=vmbr1,firewall=1,hwaddr=" + random_mac() + ",ip=dhcp,type=veth"},
        {"ostype", "debian"},
        {"rootfs",
         storage + ":base-" + std::to_string(vmid) + "-disk-0,size=" + options.template_disk},
        {"swap", "512"},
        {"tags", "pve-sandbox-template"},
        {"template", "1"},
        {"unprivileged", "1"},
    };
    cts[vmid] = std::move(ct);
    backend->place(vmid, node);
  }

  void add_templates() {
    for (const auto& node : cluster->nodes())
      for (int vmid : node.templates) add_template(vmid, node.name, kLocalStorage);
    for (const auto& shared : options.shared_templates)
      add_template(shared.vmid, shared.node.empty() ? cluster->first_node() : shared.node,
                   kSharedStorage);
  }
};

namespace {

class Handler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit Handler(Simulator::Impl* impl) : impl_(impl) {}
  void handleRequest(Poco::Net::HTTPServerRequest& req,
                     Poco::Net::HTTPServerResponse& resp) override {
    impl_->handle(req, resp);
  }

 private:
  Simulator::Impl* impl_;
};

class Factory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit Factory(Simulator::Impl* impl) : impl_(impl) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new Handler(impl_);
  }

 private:
  Simulator::Impl* impl_;
};

std::once_flag g_ssl_init;

}  // namespace

Simulator::Simulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Simulator::~Simulator() {
  impl_->shutdown();
}

pvs::Result<std::unique_ptr<Simulator>> Simulator::start(Options options) {
  std::call_once(g_ssl_init, [] { Poco::Net::initializeSSL(); });
  auto impl = std::make_unique<Impl>();
  if (options.schema_file.empty()) options.schema_file = PVESIM_SCHEMA_FILE;
  auto schema = Schema::load(options.schema_file);
  if (!schema) return pvs::fail(schema.error());
  impl->schema = std::move(*schema);
  impl->options = options;
  if (auto cidr = pvs::Cidr::parse(options.dhcp_cidr); !cidr)
    return pvs::fail(pvs::ErrorCode::kInvalidArgument, "bad --dhcp-cidr " + options.dhcp_cidr);
  if (auto valid = validate_cluster(options); !valid) return pvs::fail(valid.error());
  impl->cluster = std::make_unique<Cluster>(options);
  auto backend = make_backend(options);
  if (!backend) return pvs::fail(backend.error());
  impl->backend = std::move(*backend);
  std::vector<std::string> storages{kLocalStorage};
  if (impl->cluster->has_shared_storage()) storages.push_back(kSharedStorage);
  impl->volumes = std::make_unique<Volumes>(impl->backend.get(), storages,
                                            std::vector<std::string>{kSharedStorage});
  if (auto made = impl->make_certificate(); !made) return pvs::fail(made.error());
  impl->add_templates();
  for (const auto& pool : options.pools) impl->pools[pool] = {};
  for (const auto& [vmid, lock] : options.locks) {
    if (!impl->cts.count(vmid))
      return pvs::fail(pvs::ErrorCode::kInvalidArgument,
                       "--lock: no CT " + std::to_string(vmid) + " at start");
    impl->cts[vmid].config["lock"] = lock;
  }
  try {
    Poco::Net::Context::Ptr context =
        new Poco::Net::Context(Poco::Net::Context::TLS_SERVER_USE, impl->key_file, impl->cert_path,
                               "", Poco::Net::Context::VERIFY_NONE);
    Poco::Net::SecureServerSocket socket(Poco::Net::SocketAddress(options.listen, options.port), 64,
                                         context);
    impl->port = socket.address().port();
    auto params = new Poco::Net::HTTPServerParams;
    params->setMaxThreads(160);
    params->setMaxQueued(512);
    params->setKeepAlive(true);
    params->setMaxKeepAliveRequests(0);
    params->setKeepAliveTimeout(Poco::Timespan(30, 0));
    impl->server = std::make_unique<Poco::Net::HTTPServer>(new Factory(impl.get()), socket, params);
    impl->server->start();
  } catch (const Poco::Exception& ex) {
    return pvs::fail(pvs::ErrorCode::kUnavailable, "pvesim cannot listen: " + ex.displayText());
  }
  for (int i = 0; i < 4; ++i)
    impl->schedulers.emplace_back([p = impl.get()] { p->run_scheduler(); });
  return std::unique_ptr<Simulator>(new Simulator(std::move(impl)));
}

int Simulator::port() const {
  return impl_->port;
}
std::string Simulator::fingerprint() const {
  return impl_->fingerprint;
}
std::string Simulator::ssh_host_key_fingerprint() const {
  return impl_->backend ? impl_->backend->host_key_fingerprint() : "";
}

std::string Simulator::ssh_host_key_file() const {
  return impl_->backend ? impl_->backend->host_key_file() : "";
}
std::string Simulator::lxc_run_dir() const {
  return impl_->backend ? impl_->backend->run_dir() : "";
}
std::string Simulator::cert_file() const {
  return impl_->cert_path;
}

uint64_t Simulator::count(const std::string& method, const std::string& path_template) const {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->counts.find(method + " " + path_template);
  return it == impl_->counts.end() ? 0 : it->second;
}

uint64_t Simulator::schema_rejections() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->schema_rejections;
}

uint64_t Simulator::total_requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->request_total;
}

void Simulator::reset_counts() {
  std::lock_guard lock(impl_->mutex);
  impl_->counts.clear();
  impl_->request_total = 0;
}

void Simulator::set_faults(std::vector<FaultRule> rules) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.faults = std::move(rules);
}

void Simulator::set_fail_task(const std::string& type, const std::string& message) {
  std::lock_guard lock(impl_->mutex);
  if (message.empty())
    impl_->options.fail_tasks.erase(type);
  else
    impl_->options.fail_tasks[type] = message;
}

void Simulator::set_latency_ms(int ms) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.latency_ms = ms;
}

void Simulator::set_interfaces_delay_ms(int ms) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.interfaces_delay_ms = ms;
}

void Simulator::set_rrd_delay_ms(int ms) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.rrd_delay_ms = ms;
}

void Simulator::set_task_ms(const std::string& type, int ms) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.task_ms[type] = ms;
}

void Simulator::hold_tasks(const std::string& type, bool held) {
  std::lock_guard lock(impl_->mutex);
  if (held)
    impl_->held_types.insert(type);
  else
    impl_->held_types.erase(type);
}

std::vector<std::string> Simulator::running_tasks(const std::string& type) const {
  std::lock_guard lock(impl_->mutex);
  std::vector<std::string> out;
  for (const auto& [upid, t] : impl_->tasks)
    if (t.running && t.type == type) out.push_back(t.id);
  return out;
}

pvs::Status Simulator::set_node_offline(const std::string& node, bool offline) {
  std::lock_guard guard(impl_->mutex);
  if (!impl_->cluster->set_offline(node, offline))
    return pvs::fail(pvs::ErrorCode::kNotFound, "no node " + node + " in the cluster");
  return {};
}

pvs::Status Simulator::set_lock(int vmid, const std::string& lock) {
  std::lock_guard guard(impl_->mutex);
  auto* ct = impl_->find(vmid);
  if (!ct) return pvs::fail(pvs::ErrorCode::kNotFound, "no CT " + std::to_string(vmid));
  if (lock.empty())
    ct->config.erase("lock");
  else
    ct->config["lock"] = lock;
  return {};
}

}  // namespace pvesim
