// The typed Proxmox API calls: paths, parameters and answer decoding.
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "proxmox/internal.h"
#include "pvesandbox/proxmox_client.h"

namespace pvs::pve {

namespace {

using Poco::Dynamic::Var;
using Poco::JSON::Array;
using Poco::JSON::Object;

ApiError protocol_error(std::string message) {
  return make_error(ErrorKind::kProtocol, 0, std::move(message));
}

std::string ct_path(std::string_view node, int vmid, std::string_view rest = "") {
  return "/nodes/" + url_encode(node) + "/lxc/" + std::to_string(vmid) + std::string(rest);
}

Object::Ptr as_object(const Var& v) {
  if (v.type() == typeid(Object::Ptr)) return v.extract<Object::Ptr>();
  return nullptr;
}

Array::Ptr as_array(const Var& v) {
  if (v.type() == typeid(Array::Ptr)) return v.extract<Array::Ptr>();
  return nullptr;
}

// Text of a scalar: strings as is, numbers in decimal (integral doubles without ".0").
std::string text_of(const Var& v) {
  if (v.isEmpty()) return "";
  if (v.isString()) return v.extract<std::string>();
  if (v.isBoolean()) return v.convert<bool>() ? "1" : "0";
  if (v.isNumeric() && !v.isInteger()) {
    double d = v.convert<double>();
    if (std::floor(d) == d && std::fabs(d) < 9e15) return std::to_string(static_cast<int64_t>(d));
  }
  try {
    return v.convert<std::string>();
  } catch (const std::exception&) {
    return "";
  }
}

std::string str(const Object::Ptr& o, const std::string& key) {
  return o && o->has(key) ? text_of(o->get(key)) : std::string();
}

int64_t i64(const Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key)) return 0;
  Var v = o->get(key);
  if (v.isEmpty()) return 0;
  try {
    if (v.isString()) return std::stoll(v.extract<std::string>());
    if (v.isNumeric() && !v.isInteger()) return static_cast<int64_t>(v.convert<double>());
    if (v.isBoolean()) return v.convert<bool>() ? 1 : 0;
    return v.convert<int64_t>();
  } catch (const std::exception&) {
    return 0;
  }
}

double dbl(const Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key)) return 0;
  Var v = o->get(key);
  try {
    if (v.isString()) return std::stod(v.extract<std::string>());
    return v.convert<double>();
  } catch (const std::exception&) {
    return 0;
  }
}

ContainerStatus decode_status(const Object::Ptr& o) {
  ContainerStatus s;
  s.vmid = static_cast<int>(i64(o, "vmid"));
  s.name = str(o, "name");
  s.status = str(o, "status");
  s.lock = str(o, "lock");
  s.tags = str(o, "tags");
  s.is_template = i64(o, "template") != 0;
  s.pid = i64(o, "pid");
  s.uptime = i64(o, "uptime");
  s.mem = i64(o, "mem");
  s.maxmem = i64(o, "maxmem");
  s.disk = i64(o, "disk");
  s.maxdisk = i64(o, "maxdisk");
  s.swap = i64(o, "swap");
  s.maxswap = i64(o, "maxswap");
  s.netin = i64(o, "netin");
  s.netout = i64(o, "netout");
  s.cpu = dbl(o, "cpu");
  s.cpus = dbl(o, "cpus");
  if (o && o->has("ha")) s.ha_managed = i64(as_object(o->get("ha")), "managed") != 0;
  return s;
}

Config decode_config(const Var& data) {
  Config config;
  if (auto o = as_object(data))
    for (const auto& [key, value] : *o) config[key] = text_of(value);
  return config;
}

Result<std::string> upid_of(Result<Var> data) {
  if (!data) return tl::unexpected(data.error());
  if (!data->isString()) return tl::unexpected(protocol_error("expected a UPID string"));
  std::string upid = data->extract<std::string>();
  if (!Upid::parse(upid)) return tl::unexpected(protocol_error("malformed UPID " + upid));
  return upid;
}

Status void_of(Result<Var> data) {
  if (!data) return tl::unexpected(data.error());
  return {};
}

std::string join_vmids(const std::vector<int>& vmids) {
  std::string out;
  for (int id : vmids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

Pool decode_pool(const Object::Ptr& o) {
  Pool pool;
  pool.poolid = str(o, "poolid");
  pool.comment = str(o, "comment");
  if (o && o->has("members")) {
    if (auto members = as_array(o->get("members"))) {
      for (const auto& m : *members) {
        auto mo = as_object(m);
        PoolMember member;
        member.id = str(mo, "id");
        member.type = str(mo, "type");
        member.node = str(mo, "node");
        member.status = str(mo, "status");
        member.vmid = static_cast<int>(i64(mo, "vmid"));
        pool.members.push_back(std::move(member));
      }
    }
  }
  return pool;
}

}  // namespace

#define PVS_REQ(method, path, ...) ClientAccess::request(*this, method, path, __VA_ARGS__)

Result<int> Client::next_id(std::optional<int> vmid) {
  Params params;
  if (vmid) params.emplace_back("vmid", std::to_string(*vmid));
  auto data = PVS_REQ("GET", "/cluster/nextid", params, nullptr);
  if (!data) return tl::unexpected(data.error());
  // The schema says integer; real servers send a string ("100"). Accept both.
  try {
    if (data->isString()) {
      const std::string& text = data->extract<std::string>();
      std::size_t used = 0;
      int id = std::stoi(text, &used);
      if (used != text.size()) throw std::invalid_argument(text);
      return id;
    }
    if (data->isNumeric()) return data->convert<int>();
  } catch (const std::exception&) {
  }
  return tl::unexpected(protocol_error("nextid answered a non-number"));
}

Result<std::vector<ClusterResource>> Client::resources(std::string_view type) {
  Params params;
  if (!type.empty()) params.emplace_back("type", std::string(type));
  auto data = PVS_REQ("GET", "/cluster/resources", params, nullptr);
  if (!data) return tl::unexpected(data.error());
  auto array = as_array(*data);
  if (!array) return tl::unexpected(protocol_error("resources: expected an array"));
  std::vector<ClusterResource> out;
  for (const auto& item : *array) {
    auto o = as_object(item);
    ClusterResource r;
    r.id = str(o, "id");
    r.type = str(o, "type");
    r.node = str(o, "node");
    r.status = str(o, "status");
    r.name = str(o, "name");
    r.pool = str(o, "pool");
    r.tags = str(o, "tags");
    r.lock = str(o, "lock");
    r.vmid = static_cast<int>(i64(o, "vmid"));
    r.is_template = i64(o, "template") != 0;
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<ContainerStatus>> Client::list_containers(std::string_view node) {
  auto data = PVS_REQ("GET", "/nodes/" + url_encode(node) + "/lxc", {}, nullptr);
  if (!data) return tl::unexpected(data.error());
  auto array = as_array(*data);
  if (!array) return tl::unexpected(protocol_error("lxc list: expected an array"));
  std::vector<ContainerStatus> out;
  for (const auto& item : *array) out.push_back(decode_status(as_object(item)));
  return out;
}

Result<std::string> Client::clone(std::string_view node, const CloneRequest& request) {
  Params params{{"newid", std::to_string(request.new_vmid)}};
  if (!request.hostname.empty()) params.emplace_back("hostname", request.hostname);
  if (!request.description.empty()) params.emplace_back("description", request.description);
  if (!request.pool.empty()) params.emplace_back("pool", request.pool);
  if (!request.storage.empty()) params.emplace_back("storage", request.storage);
  if (!request.snapname.empty()) params.emplace_back("snapname", request.snapname);
  if (request.full) params.emplace_back("full", *request.full ? "1" : "0");
  return upid_of(PVS_REQ("POST", ct_path(node, request.source_vmid, "/clone"), params, nullptr));
}

Result<Config> Client::config(std::string_view node, int vmid, bool current) {
  Params params;
  if (current) params.emplace_back("current", "1");
  auto data = PVS_REQ("GET", ct_path(node, vmid, "/config"), params, nullptr);
  if (!data) return tl::unexpected(data.error());
  if (!as_object(*data)) return tl::unexpected(protocol_error("config: expected an object"));
  return decode_config(*data);
}

Status Client::update_config(std::string_view node, int vmid, const Params& changes) {
  return void_of(PVS_REQ("PUT", ct_path(node, vmid, "/config"), changes, nullptr));
}

Result<std::string> Client::resize(std::string_view node, int vmid, std::string_view disk,
                                   std::string_view size) {
  Params params{{"disk", std::string(disk)}, {"size", std::string(size)}};
  return upid_of(PVS_REQ("PUT", ct_path(node, vmid, "/resize"), params, nullptr));
}

Result<std::string> Client::start(std::string_view node, int vmid) {
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/status/start"), {}, nullptr));
}

Result<std::string> Client::stop(std::string_view node, int vmid) {
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/status/stop"), {}, nullptr));
}

Result<std::string> Client::shutdown(std::string_view node, int vmid, int timeout_seconds,
                                     bool force_stop) {
  Params params{{"timeout", std::to_string(timeout_seconds)}};
  if (force_stop) params.emplace_back("forceStop", "1");
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/status/shutdown"), params, nullptr));
}

Result<ContainerStatus> Client::status(std::string_view node, int vmid) {
  auto data = PVS_REQ("GET", ct_path(node, vmid, "/status/current"), {}, nullptr);
  if (!data) return tl::unexpected(data.error());
  auto o = as_object(*data);
  if (!o) return tl::unexpected(protocol_error("status: expected an object"));
  return decode_status(o);
}

Result<std::optional<std::vector<Interface>>> Client::interfaces(std::string_view node, int vmid) {
  auto data = PVS_REQ("GET", ct_path(node, vmid, "/interfaces"), {}, nullptr);
  if (!data) return tl::unexpected(data.error());
  if (data->isEmpty()) return std::optional<std::vector<Interface>>();  // stopped
  auto array = as_array(*data);
  if (!array) return tl::unexpected(protocol_error("interfaces: expected an array or null"));
  std::vector<Interface> out;
  for (const auto& item : *array) {
    auto o = as_object(item);
    Interface iface;
    iface.name = str(o, "name");
    iface.hwaddr = str(o, "hwaddr");
    if (iface.hwaddr.empty()) iface.hwaddr = str(o, "hardware-address");
    iface.inet = str(o, "inet");
    iface.inet6 = str(o, "inet6");
    if (o && o->has("ip-addresses")) {
      if (auto addresses = as_array(o->get("ip-addresses"))) {
        for (const auto& a : *addresses) {
          auto ao = as_object(a);
          iface.addresses.push_back(InterfaceAddress{str(ao, "ip-address"),
                                                     str(ao, "ip-address-type"),
                                                     static_cast<int>(i64(ao, "prefix"))});
        }
      }
    } else {
      // Servers before pve-container 5.2.6 only send inet/inet6.
      for (const auto& [text, family] : {std::pair{iface.inet, "inet"}, {iface.inet6, "inet6"}}) {
        if (text.empty()) continue;
        auto slash = text.find('/');
        int prefix = 0;
        if (slash != std::string::npos) prefix = std::atoi(text.c_str() + slash + 1);
        iface.addresses.push_back(InterfaceAddress{text.substr(0, slash), family, prefix});
      }
    }
    out.push_back(std::move(iface));
  }
  return std::optional<std::vector<Interface>>(std::move(out));
}

Result<std::string> Client::destroy(std::string_view node, int vmid,
                                    const DestroyOptions& options) {
  Params params;
  if (options.purge) params.emplace_back("purge", "1");
  if (options.force) params.emplace_back("force", "1");
  if (options.destroy_unreferenced_disks)
    params.emplace_back("destroy-unreferenced-disks",
                        *options.destroy_unreferenced_disks ? "1" : "0");
  return upid_of(PVS_REQ("DELETE", ct_path(node, vmid), params, nullptr));
}

Result<std::vector<Snapshot>> Client::snapshots(std::string_view node, int vmid) {
  auto data = PVS_REQ("GET", ct_path(node, vmid, "/snapshot"), {}, nullptr);
  if (!data) return tl::unexpected(data.error());
  auto array = as_array(*data);
  if (!array) return tl::unexpected(protocol_error("snapshot list: expected an array"));
  std::vector<Snapshot> out;
  for (const auto& item : *array) {
    auto o = as_object(item);
    Snapshot s;
    s.name = str(o, "name");
    s.description = str(o, "description");
    s.parent = str(o, "parent");
    s.snaptime = i64(o, "snaptime");
    s.is_current = s.name == "current";
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::string> Client::create_snapshot(std::string_view node, int vmid, std::string_view name,
                                            std::string_view description) {
  Params params{{"snapname", std::string(name)}};
  if (!description.empty()) params.emplace_back("description", std::string(description));
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/snapshot"), params, nullptr));
}

Result<std::string> Client::rollback_snapshot(std::string_view node, int vmid,
                                              std::string_view name, bool start_after) {
  Params params;
  if (start_after) params.emplace_back("start", "1");
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/snapshot/" + url_encode(name) + "/rollback"),
                         params, nullptr));
}

Result<std::string> Client::delete_snapshot(std::string_view node, int vmid, std::string_view name,
                                            bool force) {
  Params params;
  if (force) params.emplace_back("force", "1");
  return upid_of(
      PVS_REQ("DELETE", ct_path(node, vmid, "/snapshot/" + url_encode(name)), params, nullptr));
}

Result<Config> Client::firewall_options(std::string_view node, int vmid) {
  auto data = PVS_REQ("GET", ct_path(node, vmid, "/firewall/options"), {}, nullptr);
  if (!data) return tl::unexpected(data.error());
  return decode_config(*data);
}

Status Client::set_firewall_options(std::string_view node, int vmid, const Params& changes) {
  return void_of(PVS_REQ("PUT", ct_path(node, vmid, "/firewall/options"), changes, nullptr));
}

Result<std::vector<Pool>> Client::pools() {
  auto data = PVS_REQ("GET", "/pools", {}, nullptr);
  if (!data) return tl::unexpected(data.error());
  auto array = as_array(*data);
  if (!array) return tl::unexpected(protocol_error("pools: expected an array"));
  std::vector<Pool> out;
  for (const auto& item : *array) out.push_back(decode_pool(as_object(item)));
  return out;
}

Result<Pool> Client::pool(std::string_view poolid) {
  auto data = PVS_REQ("GET", "/pools", Params{{"poolid", std::string(poolid)}}, nullptr);
  if (!data) return tl::unexpected(data.error());
  auto array = as_array(*data);
  if (!array || array->size() != 1)
    return tl::unexpected(protocol_error("pool: expected a one-element array"));
  return decode_pool(array->getObject(0));
}

Status Client::create_pool(std::string_view poolid, std::string_view comment) {
  Params params{{"poolid", std::string(poolid)}};
  if (!comment.empty()) params.emplace_back("comment", std::string(comment));
  return void_of(PVS_REQ("POST", "/pools", params, nullptr));
}

Status Client::add_to_pool(std::string_view poolid, const std::vector<int>& vmids,
                           bool allow_move) {
  Params params{{"poolid", std::string(poolid)}, {"vms", join_vmids(vmids)}};
  if (allow_move) params.emplace_back("allow-move", "1");
  return void_of(PVS_REQ("PUT", "/pools", params, nullptr));
}

Status Client::remove_from_pool(std::string_view poolid, const std::vector<int>& vmids) {
  Params params{{"poolid", std::string(poolid)}, {"vms", join_vmids(vmids)}, {"delete", "1"}};
  return void_of(PVS_REQ("PUT", "/pools", params, nullptr));
}

Status Client::delete_pool(std::string_view poolid) {
  return void_of(PVS_REQ("DELETE", "/pools", Params{{"poolid", std::string(poolid)}}, nullptr));
}

namespace {
Result<std::string> task_base(std::string_view upid) {
  auto parsed = Upid::parse(upid);
  if (!parsed) {
    ApiError error = make_error(ErrorKind::kInvalidParameters, 0, "unable to parse worker upid");
    error.param_errors["upid"] = "unable to parse worker upid";
    return tl::unexpected(std::move(error));
  }
  return "/nodes/" + url_encode(parsed->node) + "/tasks/" + url_encode(upid);
}
}  // namespace

Result<TaskStatus> Client::task_status(std::string_view upid) {
  auto base = task_base(upid);
  if (!base) return tl::unexpected(base.error());
  auto data = PVS_REQ("GET", *base + "/status", {}, nullptr);
  if (!data) return tl::unexpected(data.error());
  auto o = as_object(*data);
  if (!o) return tl::unexpected(protocol_error("task status: expected an object"));
  TaskStatus s;
  s.upid = str(o, "upid");
  s.node = str(o, "node");
  s.type = str(o, "type");
  s.id = str(o, "id");
  s.user = str(o, "user");
  s.status = str(o, "status");
  s.exitstatus = str(o, "exitstatus");
  s.starttime = i64(o, "starttime");
  if (s.status != "running" && s.status != "stopped")
    return tl::unexpected(protocol_error("task status: unknown status '" + s.status + "'"));
  return s;
}

Result<std::vector<TaskLogLine>> Client::task_log(std::string_view upid, int start, int limit,
                                                  int* total) {
  auto base = task_base(upid);
  if (!base) return tl::unexpected(base.error());
  Params params{{"start", std::to_string(start)}, {"limit", std::to_string(limit)}};
  auto data = PVS_REQ("GET", *base + "/log", params, total);
  if (!data) return tl::unexpected(data.error());
  auto array = as_array(*data);
  if (!array) return tl::unexpected(protocol_error("task log: expected an array"));
  std::vector<TaskLogLine> out;
  for (const auto& item : *array) {
    auto o = as_object(item);
    out.push_back(TaskLogLine{static_cast<int>(i64(o, "n")), str(o, "t")});
  }
  return out;
}

Status Client::stop_task(std::string_view upid) {
  auto base = task_base(upid);
  if (!base) return tl::unexpected(base.error());
  return void_of(PVS_REQ("DELETE", *base, {}, nullptr));
}

Result<TaskStatus> Client::wait_task(std::string_view upid, const WaitOptions& options) {
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  auto interval = options.poll_initial;
  while (true) {
    auto status = task_status(upid);
    if (!status) return status;
    if (!status->running()) {
      if (status->succeeded()) return status;
      ApiError error;
      error.kind = ErrorKind::kTaskFailed;
      error.message = status->exitstatus;
      error.upid = std::string(upid);
      int total = 0;
      int want = std::max(options.log_lines, 1);
      auto head = task_log(upid, 0, want, &total);
      if (head && total > static_cast<int>(head->size()))
        head = task_log(upid, total - want, want, nullptr);
      if (head)
        for (auto& line : *head) error.task_log.push_back(std::move(line.t));
      return tl::unexpected(std::move(error));
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      ApiError error = make_error(ErrorKind::kTimeout, 0, "task still running at the deadline");
      error.upid = std::string(upid);
      return tl::unexpected(std::move(error));
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(interval, deadline - now));
    interval = std::min(options.poll_max, interval * 2);
  }
}

#undef PVS_REQ

}  // namespace pvs::pve
