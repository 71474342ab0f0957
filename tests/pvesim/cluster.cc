// pvesim's cluster model: nodes, their online state and figures, storages, clone targets.
#include "cluster.h"

#include <algorithm>

namespace pvesim {

namespace {

using Poco::JSON::Array;
using Poco::JSON::Object;

struct StorageDef {
  const char* id;
  const char* plugintype;
  bool shared;
  std::uint64_t total, used;  // fixed figures, bytes
};

constexpr std::uint64_t kGiB = 1ull << 30;
constexpr StorageDef kLocal{kLocalStorage, "lvmthin", false, 400 * kGiB, 20 * kGiB};
constexpr StorageDef kShared{kSharedStorage, "rbd", true, 2048 * kGiB, 100 * kGiB};
constexpr const char* kContent = "images,rootdir";
constexpr std::uint64_t kNodeDisk = 100 * kGiB, kNodeDiskUsed = 8 * kGiB;  // the root fs

bool valid_node_name(const std::string& name) {
  Object::Ptr schema = new Object;
  schema->set("type", "string");
  schema->set("format", "pve-node");
  return !name.empty() && check_value(schema, name).empty();
}

// The content types of the `content` filter a storage with kContent supports (any of them).
bool content_matches(const std::string& wanted) {
  if (wanted.empty()) return true;
  for (const auto& type : split_list(wanted))
    if (type == "images" || type == "rootdir") return true;
  return false;
}

Poco::Int64 i64(std::uint64_t value) {
  return static_cast<Poco::Int64>(value);
}

}  // namespace

std::vector<NodeOptions> cluster_nodes(const Options& options) {
  if (!options.nodes.empty()) return options.nodes;
  NodeOptions one;
  one.name = options.node;
  one.templates = options.templates;
  one.netns = options.netns;
  return {one};
}

pvs::Status validate_cluster(const Options& options) {
  auto bad = [](const std::string& what) {
    return pvs::fail(pvs::ErrorCode::kInvalidArgument, what);
  };
  std::set<std::string> names;
  std::set<int> vmids;
  auto add_vmid = [&](int vmid) {
    return vmid >= 100 && vmid <= 999999999 && vmids.insert(vmid).second;
  };
  for (const auto& node : cluster_nodes(options)) {
    if (!valid_node_name(node.name)) return bad("bad node name '" + node.name + "'");
    if (!names.insert(node.name).second) return bad("node '" + node.name + "' given twice");
    if (node.maxcpu < 1 || node.maxmem == 0) return bad("node '" + node.name + "': no CPU/mem");
    for (int vmid : node.templates)
      if (!add_vmid(vmid)) return bad("template " + std::to_string(vmid) + ": bad or taken");
  }
  for (const auto& shared : options.shared_templates) {
    if (!shared.node.empty() && !names.count(shared.node))
      return bad("shared template " + std::to_string(shared.vmid) + ": no node '" + shared.node +
                 "'");
    if (!add_vmid(shared.vmid))
      return bad("shared template " + std::to_string(shared.vmid) + ": bad or taken");
  }
  return {};
}

std::vector<std::string> volume_storages(const std::map<std::string, std::string>& config) {
  std::vector<std::string> out;
  for (const auto& [key, value] : config) {
    bool mp = key.size() > 2 && key.compare(0, 2, "mp") == 0 &&
              key.find_first_not_of("0123456789", 2) == std::string::npos;
    if (key != "rootfs" && !mp) continue;
    std::map<std::string, std::string> parts;
    std::string error;
    if (!parse_property_string(value, "volume", &parts, &error)) continue;
    const std::string& volume = parts["volume"];
    auto colon = volume.find(':');
    if (volume.empty() || volume[0] == '/' || colon == std::string::npos) continue;  // bind
    out.push_back(volume.substr(0, colon));
  }
  return out;
}

std::string unknown_node_message(const std::string& node) {
  return "hostname lookup '" + node + "' failed - failed to get address info for: " + node +
         ": Name or service not known";
}

Cluster::Cluster(const Options& options)
    : nodes_(cluster_nodes(options)),
      shared_storage_(!options.shared_templates.empty()),
      booted_(std::chrono::steady_clock::now()) {}

const NodeOptions* Cluster::find(const std::string& node) const {
  for (const auto& n : nodes_)
    if (n.name == node) return &n;
  return nullptr;
}

bool Cluster::has(const std::string& node) const {
  return find(node) != nullptr;
}

bool Cluster::set_offline(const std::string& node, bool offline) {
  if (!has(node)) return false;
  if (offline)
    offline_.insert(node);
  else
    offline_.erase(node);
  return true;
}

bool Cluster::storage_shared(const std::string& storage) const {
  return shared_storage_ && storage == kSharedStorage;
}

Object::Ptr Cluster::node_entry(const std::string& node, const NodeLoad& load) const {
  const NodeOptions* n = find(node);
  Object::Ptr o = new Object;
  o->set("id", "node/" + node);
  o->set("node", node);
  o->set("type", "node");
  bool down = offline(node);
  o->set("status", down ? "offline" : "online");
  o->set("level", "");
  // An offline node keeps the maxima of its last RRD data, but no usage figures.
  o->set("maxcpu", n ? n->maxcpu : 1);
  o->set("maxmem", i64(n ? n->maxmem : 0));
  o->set("maxdisk", i64(kNodeDisk));
  if (!down && n) {
    // Assumption: an idle node uses 1% of its CPUs, each running CT 1% more.
    o->set("cpu", std::min(1.0, 0.01 * (1 + load.running)));
    o->set("mem", i64(n->base_mem + load.mem));
    o->set("disk", i64(kNodeDiskUsed));
    auto up = std::chrono::steady_clock::now() - booted_;
    o->set("uptime",
           static_cast<Poco::Int64>(std::chrono::duration_cast<std::chrono::seconds>(up).count()));
  }
  return o;
}

void Cluster::add_storage_resources(Array& out) const {
  for (const auto& n : nodes_) {
    for (const StorageDef* s : {&kLocal, &kShared}) {
      if (s->shared && !shared_storage_) continue;
      Object::Ptr o = new Object;
      o->set("id", "storage/" + n.name + "/" + s->id);
      o->set("type", "storage");
      o->set("storage", std::string(s->id));
      o->set("node", n.name);
      o->set("plugintype", std::string(s->plugintype));
      o->set("shared", s->shared ? 1 : 0);
      o->set("content", std::string(kContent));
      bool down = offline(n.name);
      o->set("status", down ? "unknown" : "available");
      if (!down) {
        o->set("maxdisk", i64(s->total));
        o->set("disk", i64(s->used));
      }
      out.add(o);
    }
  }
}

Array::Ptr Cluster::node_storage(const std::string& node, const ParamMap& params) const {
  auto param = [&](const char* key) {
    auto it = params.find(key);
    return it == params.end() ? std::string() : it->second;
  };
  std::string only = param("storage"), target = param("target");
  Array::Ptr a = new Array;
  for (const StorageDef* s : {&kLocal, &kShared}) {
    if (s->shared && !shared_storage_) continue;
    if (!only.empty() && only != s->id) continue;
    if (!content_matches(param("content"))) continue;
    if (!target.empty() && target != node && !s->shared) continue;
    Object::Ptr o = new Object;
    o->set("storage", std::string(s->id));
    o->set("type", std::string(s->plugintype));
    o->set("content", std::string(kContent));
    o->set("shared", s->shared ? 1 : 0);
    o->set("active", 1);
    o->set("enabled", 1);
    o->set("total", i64(s->total));
    o->set("used", i64(s->used));
    o->set("avail", i64(s->total - s->used));
    o->set("used_fraction", static_cast<double>(s->used) / static_cast<double>(s->total));
    a->add(o);
  }
  return a;
}

// pve-container's clone_vm (src/PVE/API2/LXC.pm): a target equal to the node or "localhost" is
// dropped; PVE::Cluster::check_node_exists; with `storage`, it must be shared; then every
// volume's storage (or `storage`) must be shared.
CloneTarget Cluster::clone_target(const std::string& node, const std::string& target,
                                  const std::vector<std::string>& storages,
                                  const std::string& storage) const {
  if (target.empty() || target == node || target == "localhost") return {node, ""};
  if (!has(target)) return {"", "no such cluster node '" + target + "'"};
  if (!storage.empty() && !storage_shared(storage))
    return {"", "can't clone to non-shared storage '" + storage + "'"};
  for (const auto& sid : storages)
    if (!storage_shared(storage.empty() ? sid : storage))
      return {"", "can't clone CT to node '" + target + "' (CT uses local storage)"};
  return {target, ""};
}

}  // namespace pvesim
