// pvesim's container model: lookup, locks, the config and its pending changes, status as
// PVE::LXC::vmstatus reports it, DHCP leases.
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>

#include "pvesandbox/common/ipv4.h"
#include "sim_impl.h"

namespace pvesim {

namespace {

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

}  // namespace

std::string Simulator::Impl::conf_missing(const std::string& node, int vmid) {
  return "Configuration file 'nodes/" + node + "/lxc/" + std::to_string(vmid) +
         ".conf' does not exist";
}

Container* Simulator::Impl::find(int vmid) {
  auto it = cts.find(vmid);
  return it == cts.end() ? nullptr : &it->second;
}

// The CT if it is on `node` (a node has only its own CTs' configs).
Container* Simulator::Impl::find_on(const std::string& node, int vmid) {
  Container* ct = find(vmid);
  return ct && ct->node == node ? ct : nullptr;
}

std::string Simulator::Impl::lock_of(const Container& ct) {
  auto it = ct.config.find("lock");
  return it == ct.config.end() ? "" : it->second;
}

std::string Simulator::Impl::random_mac() {
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

std::string Simulator::Impl::pool_of(int vmid) {
  for (const auto& [id, pool] : pools)
    if (pool.members.count(vmid)) return id;
  return "";
}

std::string Simulator::Impl::digest_of(
    const Container& ct) {  // of the whole file, [pve:pending] included
  std::string text;
  for (const auto& [k, v] : ct.config) text += k + ": " + v + "\n";
  if (!ct.pending.empty() || !ct.pending_delete.empty()) text += "[pve:pending]\n";
  for (const auto& [k, v] : ct.pending) text += k + ": " + v + "\n";
  for (const auto& k : ct.pending_delete) text += "delete: " + k + "\n";
  return sha1_hex(text);
}

// What GET config shows by default: the pending values merged in.
std::map<std::string, std::string> Simulator::Impl::with_pending(const Container& ct) {
  auto out = ct.config;
  for (const auto& [k, v] : ct.pending) out[k] = v;
  for (const auto& k : ct.pending_delete) out.erase(k);
  return out;
}

void Simulator::Impl::apply_pending(Container& ct) {
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
bool Simulator::Impl::hot_applied(const Container& ct, const std::string& key) {
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

uint64_t Simulator::Impl::rootfs_size(const Container& ct) {
  auto it = ct.config.find("rootfs");
  if (it == ct.config.end()) return 4ull << 30;
  std::map<std::string, std::string> parts;
  std::string error;
  parse_property_string(it->second, "volume", &parts, &error);
  uint64_t size = 0;
  if (parts.count("size") && parse_size(parts["size"], &size)) return size;
  return 4ull << 30;
}

int64_t Simulator::Impl::config_int(const Container& ct, const std::string& key, int64_t fallback) {
  auto it = ct.config.find(key);
  if (it == ct.config.end()) return fallback;
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    return fallback;
  }
}

// PVE::LXC::vmstatus for one container.
Object::Ptr Simulator::Impl::vmstatus(const Container& ct) {
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

// GET .../rrddata: the 70 rows of the timeframe's step (pve2-vm's RRAs: 1 min, 30 min, 3 h,
// 12 h, 1 week, scaled by rrd_step_seconds), the newest ending at the last whole step. As
// pvestatd fills them, a row holds values only for a time the CT ran (here: since its start,
// while it runs), else its time alone; the values are the status's own figures.
Array::Ptr Simulator::Impl::rrddata(const Container& ct, const std::string& timeframe) {
  static const std::map<std::string, int64_t> kFactor = {
      {"hour", 1}, {"day", 30}, {"week", 180}, {"month", 720}, {"year", 10080}};
  int64_t step = std::max(1, options.rrd_step_seconds) * kFactor.at(timeframe);
  int64_t now = unix_now();
  Object::Ptr status = vmstatus(ct);
  Array::Ptr rows = new Array;
  for (int64_t i = 69; i >= 0; --i) {
    int64_t t = now / step * step - i * step;
    Object::Ptr row = new Object;
    row->set("time", t);
    if (ct.running && t >= ct.started_unix) {
      row->set("cpu", status->get("cpu"));
      row->set("maxcpu", status->get("cpus"));
      for (const char* k : {"mem", "maxmem", "disk", "maxdisk", "netin", "netout"})
        row->set(k, status->get(k));
      row->set("diskread", 0);
      row->set("diskwrite", 0);
    }
    rows->add(row);
  }
  return rows;
}

const Endpoint* Simulator::Impl::config_endpoint() {
  if (!config_schema) config_schema = schema.match("PUT", "/nodes/x/lxc/100/config", nullptr);
  return config_schema;
}

// Config values rendered the way the real API does: integers and booleans as numbers.
Object::Ptr Simulator::Impl::render_config(const std::map<std::string, std::string>& config) {
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

std::string Simulator::Impl::normalize_tags(const std::string& text) {
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
std::string Simulator::Impl::ipv4_of(Container& ct) {
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

void Simulator::Impl::release_lease(Container& ct) {
  if (ct.lease.empty()) return;
  auto addr = pvs::Ipv4Address::parse(ct.lease.substr(0, ct.lease.find('/')));
  if (addr) leases.erase(addr->to_uint());
  ct.lease.clear();
}

}  // namespace pvesim
