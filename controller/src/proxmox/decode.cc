// Decoding of Proxmox VE answers (see decode.h).
#include "proxmox/decode.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <Poco/JSON/Stringifier.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "proxmox/internal.h"
#include "pvesandbox/common/text.h"

namespace pvs::pve::decode {
namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

Error protocol_error(std::string message) {
  return make_error(ErrorKind::kProtocol, 0, std::move(message));
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

// 2^63: a double at or past it (or NaN) has no int64_t, and converting it is undefined.
constexpr double kInt64Limit = 9223372036854775808.0;

int64_t i64(const Object::Ptr& o, const std::string& key) {
  if (!o || !o->has(key)) return 0;
  Var v = o->get(key);
  if (v.isEmpty()) return 0;
  try {
    if (v.isString()) return std::stoll(v.extract<std::string>());
    if (v.isNumeric() && !v.isInteger()) {
      double d = v.convert<double>();
      return d >= -kInt64Limit && d < kInt64Limit ? static_cast<int64_t>(d) : 0;
    }
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

ContainerStatus decode_status_object(const Object::Ptr& o) {
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

Config decode_config_object(const Var& data) {
  Config config;
  if (auto o = as_object(data))
    for (const auto& [key, value] : *o) config[key] = text_of(value);
  return config;
}

Pool decode_pool_object(const Object::Ptr& o) {
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

// Any JSON text -> value; nullopt when it is not JSON.
std::optional<Var> parse_json(std::string_view body) {
  if (body.empty()) return std::nullopt;
  try {
    Poco::JSON::Parser parser;
    return parser.parse(std::string(body));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string trim_newlines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

std::string json_text(const Var& value) {
  if (value.isEmpty()) return "null";
  try {
    std::ostringstream out;
    Poco::JSON::Stringifier::stringify(value, out, 0, -1);
    return out.str();
  } catch (const std::exception&) {
    return "null";
  }
}

Result<Var> envelope(int http_status, std::string_view reason, std::string_view body, int* total) {
  auto root = parse_json(body);
  Object::Ptr object = root ? as_object(*root) : nullptr;
  if (http_status >= 200 && http_status < 300) {
    if (!object || !object->has("data")) {
      return tl::unexpected(
          make_error(ErrorKind::kProtocol, http_status,
                     "answer without a data envelope: " + pvs::quoted(body, 200)));
    }
    if (total != nullptr) *total = static_cast<int>(i64(object, "total"));
    return object->get("data");
  }
  Error error = make_error(ErrorKind::kServer, http_status, std::string(reason));
  if (object) {
    // Newer servers repeat the full message in the body; prefer the reason phrase's first
    // line, but fall back to it when the phrase is empty.
    if (error.message.empty()) error.message = trim_newlines(str(object, "message"));
    if (object->has("errors")) {
      if (auto errors = as_object(object->get("errors"))) {
        for (const auto& [key, value] : *errors) {
          error.proxmox->param_errors[key] =
              trim_newlines(value.isString() ? value.extract<std::string>() : json_text(value));
        }
      }
    }
  }
  if (error.message.empty()) error.message = "HTTP " + std::to_string(http_status);
  set_kind(error, classify(http_status, error.message));
  // Handlers also raise state errors as parameter errors (nextid "VM 105 already exists").
  for (const auto& [param, text] : error.proxmox->param_errors) {
    if (http_status == 400 && classify(500, text) == ErrorKind::kAlreadyExists) {
      set_kind(error, ErrorKind::kAlreadyExists);
    }
  }
  return tl::unexpected(std::move(error));
}

Result<int> next_id(const Var& data) {
  // The schema says integer; real servers send a string ("100"). Accept both.
  std::string text = data.isString() ? data.extract<std::string>() : text_of(data);
  char* end = nullptr;
  long id = text.empty() ? -1 : std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || id < 100 || id > 999999999) {
    return tl::unexpected(
        protocol_error("nextid answered " + pvs::quoted(text, 40) + ", not a VMID"));
  }
  return static_cast<int>(id);
}

Result<std::vector<ClusterResource>> resources(const Var& data) {
  auto array = as_array(data);
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
    r.storage = str(o, "storage");
    r.mem = static_cast<std::uint64_t>(std::max<std::int64_t>(0, i64(o, "mem")));
    r.maxmem = static_cast<std::uint64_t>(std::max<std::int64_t>(0, i64(o, "maxmem")));
    r.maxcpu = static_cast<int>(i64(o, "maxcpu"));
    r.cpu = dbl(o, "cpu");
    r.uptime = i64(o, "uptime");
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<ContainerStatus>> containers(const Var& data) {
  auto array = as_array(data);
  if (!array) return tl::unexpected(protocol_error("lxc list: expected an array"));
  std::vector<ContainerStatus> out;
  for (const auto& item : *array) out.push_back(decode_status_object(as_object(item)));
  return out;
}

Result<ContainerStatus> status(const Var& data) {
  auto o = as_object(data);
  if (!o) return tl::unexpected(protocol_error("status: expected an object"));
  return decode_status_object(o);
}

// Each row must be an object with a numeric `time`; its values count only when every one is
// a finite number, none negative (a row with a gap in it reads as no data).
Result<std::vector<RrdPoint>> rrddata(const Var& data) {
  auto array = as_array(data);
  if (!array) return tl::unexpected(protocol_error("rrddata: expected an array"));
  std::vector<RrdPoint> out;
  for (const auto& item : *array) {
    auto o = as_object(item);
    if (!o || !o->has("time") || !o->get("time").isNumeric())
      return tl::unexpected(protocol_error("rrddata: a row without a numeric time"));
    RrdPoint p;
    p.time = i64(o, "time");
    double* fields[] = {&p.cpu, &p.maxcpu, &p.mem, &p.maxmem, &p.disk, &p.maxdisk};
    const char* names[] = {"cpu", "maxcpu", "mem", "maxmem", "disk", "maxdisk"};
    p.has_data = true;
    for (std::size_t i = 0; i < std::size(names); ++i) {
      if (!o->has(names[i]) || !o->get(names[i]).isNumeric()) {
        p.has_data = false;
        break;
      }
      *fields[i] = o->getValue<double>(names[i]);
      // Bytes and counts as Proxmox has them: finite, not negative, within int64_t (UsageSample).
      if (!(*fields[i] >= 0 && *fields[i] < kInt64Limit)) p.has_data = false;
    }
    if (!p.has_data) p = RrdPoint{p.time};
    out.push_back(p);
  }
  std::sort(out.begin(), out.end(),
            [](const RrdPoint& a, const RrdPoint& b) { return a.time < b.time; });
  return out;
}

Result<Config> config(const Var& data) {
  if (!as_object(data)) return tl::unexpected(protocol_error("config: expected an object"));
  return decode_config_object(data);
}

Result<std::optional<std::vector<Interface>>> interfaces(const Var& data) {
  if (data.isEmpty()) return std::optional<std::vector<Interface>>();  // stopped
  auto array = as_array(data);
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

Result<std::vector<Snapshot>> snapshots(const Var& data) {
  auto array = as_array(data);
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

Result<std::vector<Pool>> pools(const Var& data) {
  auto array = as_array(data);
  if (!array) return tl::unexpected(protocol_error("pools: expected an array"));
  std::vector<Pool> out;
  for (const auto& item : *array) out.push_back(decode_pool_object(as_object(item)));
  return out;
}

Result<Pool> one_pool(const Var& data) {
  auto array = as_array(data);
  if (!array || array->size() != 1) {
    return tl::unexpected(protocol_error("pool: expected a one-element array"));
  }
  return decode_pool_object(as_object(array->get(0)));
}

Result<TaskStatus> task_status(const Var& data) {
  auto o = as_object(data);
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
  if (s.status != "running" && s.status != "stopped") {
    return tl::unexpected(
        protocol_error("task status: unknown status " + pvs::quoted(s.status, 40)));
  }
  return s;
}

Result<std::vector<TaskLogLine>> task_log(const Var& data) {
  auto array = as_array(data);
  if (!array) return tl::unexpected(protocol_error("task log: expected an array"));
  std::vector<TaskLogLine> out;
  for (const auto& item : *array) {
    auto o = as_object(item);
    out.push_back(TaskLogLine{static_cast<int>(i64(o, "n")), str(o, "t")});
  }
  return out;
}

Result<std::string> upid(const Var& data) {
  if (!data.isString()) return tl::unexpected(protocol_error("expected a UPID string"));
  std::string text = data.extract<std::string>();
  if (!Upid::parse(text))
    return tl::unexpected(protocol_error("malformed UPID " + pvs::quoted(text, 80)));
  return text;
}

}  // namespace pvs::pve::decode
