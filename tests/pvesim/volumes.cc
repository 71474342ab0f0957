#include "volumes.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

#include "backend.h"
#include "schema.h"

namespace pvesim {

namespace {

bool numbered_key(const std::string& key, const std::string& prefix) {
  return key.size() > prefix.size() && key.size() <= prefix.size() + 3 &&
         key.compare(0, prefix.size(), prefix) == 0 &&
         key.find_first_not_of("0123456789", prefix.size()) == std::string::npos;
}

int key_number(const std::string& key) {
  auto at = key.find_first_of("0123456789");
  return at == std::string::npos ? -1 : std::stoi(key.substr(at));
}

// PVE::LXC::NEW_DISK_RE: "STORAGE:SIZE_IN_GiB".
bool new_disk(const std::string& volume, std::string* storage, double* gib) {
  static const std::regex re(R"(^([^:\s]+):(\d+(\.\d+)?)$)");
  std::smatch m;
  if (!std::regex_match(volume, m, re)) return false;
  *storage = m[1];
  *gib = std::stod(m[2]);
  return true;
}

std::string storage_of(const std::string& volid) {
  return volid.substr(0, volid.find(':'));
}
std::string name_of(const std::string& volid) {
  auto colon = volid.find(':');
  return colon == std::string::npos ? volid : volid.substr(colon + 1);
}

// The storage plugin's parse_volname (LvmThinPlugin, RBDPlugin): "" or its error.
std::string volname_error(const std::string& volid) {
  std::string storage = storage_of(volid), name = name_of(volid);
  bool rbd = storage != "local-lvm";
  static const std::regex lvm_name(R"(^[a-z0-9][a-z0-9\-_.]*[a-z0-9]$)", std::regex::icase);
  if (!rbd && !std::regex_match(name, lvm_name))
    return "lvm name '" + name + "' contains illegal characters";
  if (volume_owner(volid) < 0)
    return std::string("unable to parse ") + (rbd ? "rbd" : "lvm") + " volume name '" + name + "'";
  return "";
}

// Bytes of a size string as PVE::JSONSchema::parse_size reads it ("2G", "+512M", "1024").
bool size_bytes(const std::string& text, std::uint64_t* out) {
  static const std::regex re(R"(^(\d+(\.\d+)?)([KMGT])?$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return false;
  double value = std::stod(m[1]);
  std::string unit = m[3];
  int shift = unit.empty() ? 0 : unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : 40;
  *out = static_cast<std::uint64_t>(value * std::pow(2.0, shift));
  return true;
}

// add_unused_volume: the lowest free unusedN; none for a volume already unused.
std::string add_unused(Config& config, const std::string& volid) {
  std::string free;
  for (int i = 255; i >= 0; --i) {
    std::string key = "unused" + std::to_string(i);
    auto it = config.find(key);
    if (it == config.end())
      free = key;
    else if (it->second == volid)
      return "";
  }
  if (free.empty()) return "Too many unused volumes - please delete them first.";
  config[free] = volid;
  return "";
}

// is_volume_in_use: a volume mount point (or rootfs) of `config` uses it.
bool in_use(const Config& config, const std::string& volid) {
  for (const auto& [key, value] : config) {
    if (key != "rootfs" && !is_mp_key(key)) continue;
    MountPoint mp;
    if (parse_mount_point(value, &mp) && mp.type() == "volume" && mp.volume == volid) return true;
  }
  return false;
}

}  // namespace

std::string MountPoint::type() const {
  if (volume.empty() || volume[0] != '/') return "volume";
  return volume.rfind("/dev/", 0) == 0 ? "device" : "bind";
}

bool MountPoint::read_only() const {
  auto it = options.find("ro");
  return it != options.end() && it->second == "1";
}

bool is_mp_key(const std::string& key) {
  return numbered_key(key, "mp") && key_number(key) <= 255;
}
bool is_unused_key(const std::string& key) {
  return numbered_key(key, "unused") && key_number(key) <= 255;
}

bool parse_mount_point(const std::string& text, MountPoint* out) {
  std::map<std::string, std::string> parts;
  std::string error;
  if (!parse_property_string(text, "volume", &parts, &error) || parts["volume"].empty())
    return false;
  out->volume = parts["volume"];
  parts.erase("volume");
  out->options = std::move(parts);
  return true;
}

std::string print_mount_point(const MountPoint& mp) {
  std::string out = mp.volume;
  auto add = [&](const std::string& key, std::string value) {
    if (key == "size") {
      std::uint64_t bytes = 0;
      if (size_bytes(value, &bytes)) value = format_disk_size(bytes);
    }
    out += "," + key + "=" + value;
  };
  if (auto it = mp.options.find("mp"); it != mp.options.end()) add("mp", it->second);
  for (const auto& [key, value] : mp.options)  // sorted
    if (key != "mp") add(key, value);
  return out;
}

std::string format_disk_size(std::uint64_t bytes) {
  const char* units[] = {"K", "M", "G", "T"};
  std::string unit;
  for (const char* u : units) {
    if (bytes == 0 || bytes % 1024 != 0) break;
    bytes /= 1024;
    unit = u;
  }
  return std::to_string(bytes) + unit;
}

int volume_owner(const std::string& volid) {
  static const std::regex re(R"(^(?:base-\d+-[^/\s]+/)?(?:vm|base|subvol|basevol)-(\d+)-\S+$)");
  std::smatch m;
  std::string name = name_of(volid);
  if (!std::regex_match(name, m, re)) return -1;
  try {
    return std::stoi(m[1]);
  } catch (const std::exception&) {
    return -1;
  }
}

std::vector<std::pair<std::string, MountPoint>> mount_points(const Config& config, bool all) {
  std::vector<std::pair<std::string, MountPoint>> out;
  for (const auto& [key, value] : config) {
    MountPoint mp;
    if (!is_mp_key(key) || !parse_mount_point(value, &mp)) continue;
    if (all || mp.type() == "volume") out.emplace_back(key, std::move(mp));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second.options.at("mp") < b.second.options.at("mp");
  });
  return out;
}

Volumes::Volumes(Backend* backend, std::vector<std::string> storages,
                 std::vector<std::string> shared)
    : backend_(backend), storages_(std::move(storages)), shared_(std::move(shared)) {}

std::string Volumes::key(const std::string& node, const std::string& volid) const {
  bool shared = std::count(shared_.begin(), shared_.end(), storage_of(volid)) > 0;
  return shared ? volid : node + "/" + volid;
}

bool Volumes::storage_exists(const std::string& storage) const {
  return std::count(storages_.begin(), storages_.end(), storage) > 0;
}

bool Volumes::exists(const std::string& node, const std::string& volid) const {
  return volumes_.count(key(node, volid)) > 0;
}

std::vector<std::string> Volumes::visible(const std::string& node) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : volumes_)
    if (key(node, v.volid) == k) out.push_back(v.volid);
  return out;
}

VolumeError Volumes::check_update(const std::string& user, int vmid, const Config& config,
                                  const Config& changes,
                                  const std::vector<std::string>& deletes) const {
  auto fail = [](int status, std::string message) {
    return VolumeError{status, std::move(message), {}};
  };
  bool is_mp_change = false;
  for (const auto& [key, value] : changes) {
    if (!is_mp_key(key)) continue;
    is_mp_change = true;
    MountPoint mp;
    if (!parse_mount_point(value, &mp)) continue;  // the schema refused it already
    std::string storage;
    double gib = 0;
    bool allocation = mp.type() == "volume" && new_disk(mp.volume, &storage, &gib);
    // check_ct_modify_config_perm: root@pam may do anything; API tokens are users of their own.
    if (user != "root@pam") {
      if (mp.type() != "volume")
        return fail(403, "Permission check failed (mount point type " + mp.type() +
                             " is only allowed for root@pam)");
      if (!allocation) {  // check_volume_access parses the name
        if (!storage_exists(storage_of(mp.volume)))
          return fail(500, "storage '" + storage_of(mp.volume) + "' does not exist");
        if (auto e = volname_error(mp.volume); !e.empty()) return fail(500, e);
      }
    }
  }
  // update_pct_config.
  auto it = config.find("protection");
  bool protect = it != config.end() && it->second == "1";
  for (const auto& d : deletes)
    if (protect && (is_mp_key(d) || is_unused_key(d)))
      return fail(500, "can't remove CT " + std::to_string(vmid) + " drive '" + d +
                           "' - protection mode enabled");
  if (!is_mp_change) return {};
  for (const auto& [key, value] : changes) {
    if (!is_mp_key(key)) continue;
    if (protect)
      return fail(500, "can't update CT " + std::to_string(vmid) + " drive '" + key +
                           "' - protection mode enabled");
    MountPoint mp;
    if (!parse_mount_point(value, &mp) || mp.type() != "volume") continue;
    std::string storage = storage_of(mp.volume);
    if (!storage_exists(storage)) return fail(500, "storage '" + storage + "' does not exist");
  }
  return {};
}

std::string Volumes::allocate(const std::string& node, int vmid, const std::string& storage,
                              std::uint64_t bytes, const Config& config, std::string* volid) {
  // find_free_diskname: the lowest vm-<vmid>-disk-<k> the storage does not have (the CT's own
  // disks, e.g. a linked clone's rootfs, are on it too).
  std::set<int> used;
  const std::string prefix = storage + ":";
  const std::regex disk_re("^(?:vm|base)-" + std::to_string(vmid) + R"(-disk-(\d+)$)");
  auto note = [&](const std::string& id) {
    std::smatch m;
    std::string name = name_of(id);
    if (id.rfind(prefix, 0) == 0 && std::regex_match(name, m, disk_re))
      used.insert(std::stoi(m[1]));
  };
  for (const auto& id : visible(node)) note(id);
  for (const auto& [k, value] : config) {
    MountPoint mp;
    if ((k == "rootfs" || is_mp_key(k) || is_unused_key(k)) && parse_mount_point(value, &mp))
      note(mp.volume);
  }
  int free = 0;
  while (used.count(free)) ++free;
  *volid = storage + ":vm-" + std::to_string(vmid) + "-disk-" + std::to_string(free);
  if (auto e = backend_->allocate_volume(vmid, *volid, bytes); !e.empty()) return e;
  volumes_[key(node, *volid)] = {*volid, bytes};
  return "";
}

std::string Volumes::free_owned(const std::string& node, int vmid, const std::string& volid,
                                std::vector<std::string>* log) {
  if (volume_owner(volid) != vmid) {
    log->push_back("ignore deletion of '" + volid + "', CT " + std::to_string(vmid) +
                   " isn't the owner!");
    return "";
  }
  if (!volumes_.count(key(node, volid))) return "";  // not one of ours (e.g. the rootfs)
  if (auto e = backend_->free_volume(vmid, volid); !e.empty()) return e;
  volumes_.erase(key(node, volid));
  return "";
}

VolumeError Volumes::apply(const std::string& node, int vmid, Config& config,
                           const std::vector<std::string>& deletes, const Config& changes,
                           std::vector<std::string>* log) {
  VolumeError out;
  auto error = [&](const std::string& opt, const std::string& message) {
    out.status = 400;
    out.message = "Parameter verification failed.";
    out.errors[opt] = "unable to apply pending change " + opt + " : " + message;
  };
  std::vector<std::string> sorted = deletes;
  std::sort(sorted.begin(), sorted.end());
  for (const auto& opt : sorted) {
    auto it = config.find(opt);
    if (it == config.end()) continue;
    MountPoint mp;
    if (is_mp_key(opt)) {
      if (parse_mount_point(it->second, &mp) && mp.type() == "volume")
        if (auto e = add_unused(config, mp.volume); !e.empty()) {
          error(opt, e);
          continue;
        }
    } else if (is_unused_key(opt)) {
      Config rest = config;
      rest.erase(opt);
      if (!in_use(rest, it->second))
        if (auto e = free_owned(node, vmid, it->second, log); !e.empty()) {
          error(opt, e);
          continue;
        }
    } else {
      continue;
    }
    config.erase(opt);
  }
  for (const auto& [opt, value] : changes) {  // sorted
    if (!is_mp_key(opt)) continue;
    MountPoint mp;
    if (!parse_mount_point(value, &mp)) continue;
    std::string storage;
    double gib = 0;
    if (mp.type() == "volume" && new_disk(mp.volume, &storage, &gib)) {
      // create_disks: int(GiB * 1024) MiB, a new volume formatted for the CT's root.
      std::uint64_t bytes = static_cast<std::uint64_t>(gib * 1024) << 20;
      std::string volid;
      if (auto e = allocate(node, vmid, storage, bytes, config, &volid); !e.empty()) {
        error(opt, e);
        continue;
      }
      mp.volume = volid;
      mp.options["size"] = std::to_string(bytes);
    } else if (mp.type() == "volume") {
      auto found = volumes_.find(key(node, mp.volume));
      if (found != volumes_.end())
        mp.options["size"] = std::to_string(found->second.bytes);
      else  // rescan_volume only warns
        log->push_back("Could not rescan volume size - volume '" + mp.volume + "' does not exist");
    }
    auto old = config.find(opt);
    MountPoint was;
    bool replaced = old != config.end() && parse_mount_point(old->second, &was) &&
                    was.type() == "volume" && was.volume != mp.volume;
    config[opt] = print_mount_point(mp);
    if (replaced && !in_use(config, was.volume))
      if (auto e = add_unused(config, was.volume); !e.empty()) error(opt, e);
  }
  return out;
}

void Volumes::apply_pending(const std::string& node, int vmid, Config& config, Config& pending,
                            std::set<std::string>& pending_delete, std::vector<std::string>* log) {
  std::vector<std::string> deletes;
  Config changes;
  for (auto it = pending_delete.begin(); it != pending_delete.end();) {
    bool mine = is_mp_key(*it) || is_unused_key(*it);
    if (mine) deletes.push_back(*it);
    it = mine ? pending_delete.erase(it) : std::next(it);
  }
  for (auto it = pending.begin(); it != pending.end();) {
    bool mine = is_mp_key(it->first);
    if (mine) changes.insert(*it);
    it = mine ? pending.erase(it) : std::next(it);
  }
  auto error = apply(node, vmid, config, deletes, changes, log);
  for (const auto& [opt, message] : error.errors) log->push_back(message);
}

std::string Volumes::destroy(const std::string& node, int vmid, const std::vector<Config>& configs,
                             bool unreferenced, std::vector<std::string>* log) {
  std::set<std::string> seen;
  for (const auto& config : configs) {
    // foreach_volume_full with include_unused: rootfs, mpN, unusedN.
    std::vector<std::pair<int, std::string>> order;
    for (const auto& [key, value] : config) {
      if (key == "rootfs") order.emplace_back(-1, value);
      if (is_mp_key(key)) order.emplace_back(key_number(key), value);
      if (is_unused_key(key)) order.emplace_back(1000 + key_number(key), value);
    }
    std::sort(order.begin(), order.end());
    for (const auto& [n, value] : order) {
      MountPoint mp;
      if (!parse_mount_point(value, &mp) || mp.type() != "volume") continue;
      if (!seen.insert(mp.volume).second) continue;
      if (auto e = free_owned(node, vmid, mp.volume, log); !e.empty()) return e;
    }
  }
  if (unreferenced) {
    std::vector<std::string> mine;
    for (const auto& volid : visible(node))
      if (volume_owner(volid) == vmid) mine.push_back(volid);
    for (const auto& volid : mine)
      if (auto e = free_owned(node, vmid, volid, log); !e.empty()) return e;
  }
  return "";
}

VolumeError Volumes::check_resize(const std::string& node, int vmid, const Config& config,
                                  const std::string& disk, const std::string& size,
                                  std::string* volid, std::uint64_t* from,
                                  std::uint64_t* to) const {
  auto fail = [](std::string message) { return VolumeError{500, std::move(message), {}}; };
  MountPoint mp;
  auto it = config.find(disk);
  if (it == config.end() || !parse_mount_point(it->second, &mp))
    return fail("no such mount point '" + disk + "'");
  *volid = mp.volume;
  // PVE::Storage::parse_volname: a path is no volume ID, then the storage, then the name.
  if (mp.type() != "volume") return fail("unable to parse volume ID '" + mp.volume + "'");
  if (!storage_exists(storage_of(mp.volume)))
    return fail("storage '" + storage_of(mp.volume) + "' does not exist");
  if (auto e = volname_error(mp.volume); !e.empty()) return fail(e);
  int owner = volume_owner(mp.volume);
  if (owner != vmid)  // die without "\n": Perl appends where
    return fail("can't resize mount point owned by another container (" + std::to_string(owner) +
                ") at /usr/share/perl5/PVE/API2/LXC.pm line 2386.");
  auto current = volumes_.find(key(node, mp.volume));
  if (current == volumes_.end())
    return fail("Could not determine current size of volume '" + mp.volume + "'");
  bool grow = !size.empty() && size[0] == '+';
  std::uint64_t amount = 0;
  if (!size_bytes(grow ? size.substr(1) : size, &amount)) return fail("invalid size string");
  *from = current->second.bytes;
  *to = grow ? *from + amount : amount;
  if (*to < *from) return fail("unable to shrink disk size");
  if (*to == *from) return fail("disk is already at specified size");
  return {};
}

void Volumes::set_size(const std::string& node, const std::string& volid, std::uint64_t bytes) {
  auto it = volumes_.find(key(node, volid));
  if (it != volumes_.end()) it->second.bytes = bytes;
}

std::string Volumes::refusal(const std::string& op, const Config& config) {
  for (const auto& [key, mp] : mount_points(config, true)) {
    if (mp.type() == "volume") continue;
    if (op == "clone")  // API2/LXC.pm clone_vm
      return "unable to clone mountpoint '" + key + "' (type " + mp.type() + ")";
    if (op == "template") return "Template feature is not available for '" + mp.volume + "'";
    return "snapshot feature is not available";  // __snapshot_prepare's has_feature
  }
  if (!mount_points(config).empty())
    return "pvesim: snapshots/clones of mount point volumes are not modelled";
  return "";
}

std::string Volumes::check_start(const std::string& node, const Config& config) const {
  for (const auto& [key, mp] : mount_points(config)) {
    if (exists(node, mp.volume)) continue;
    // LvmThinPlugin's activate_volume (vm_start activates every volume first).
    if (storage_of(mp.volume) == "local-lvm")
      return "no such logical volume pve/" + name_of(mp.volume);
    return "volume '" + mp.volume + "' does not exist";
  }
  return "";
}

}  // namespace pvesim
