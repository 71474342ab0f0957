// Proxmox's mount point volumes (mpN, unusedN) as pve-container (src/PVE/LXC.pm, LXC/Config.pm,
// API2/LXC.pm) and pve-storage handle them: the mount point strings, the storages' volumes and
// their owners, allocation at a config write, `unusedN`, the owner rule at destroy, resize.
//
// A volume lives on a storage: node-local ones (local-lvm) per node, shared ones (shared-rbd)
// once for the cluster. Its owner is the VMID in its name (vm-<owner>-disk-<k>). The backend
// makes, grows and frees what a volume is (the lxc backend: an ext4 image).
//
// Not thread-safe: the simulator's state lock guards it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace pvesim {

class Backend;

using Config = std::map<std::string, std::string>;

struct MountPoint {
  std::string volume;                          // a volume ID, "STORAGE:SIZE_GiB" or a host path
  std::map<std::string, std::string> options;  // mp, backup, ro, size, ...
  // "volume", "bind" (a host path) or "device" (/dev/...): pve-container's classify_mountpoint.
  std::string type() const;
  bool read_only() const;
};

bool is_mp_key(const std::string& key);      // mp0..mp255
bool is_unused_key(const std::string& key);  // unused0..unused255
// Parses an mpN (or unusedN) value; false if it has no volume.
bool parse_mount_point(const std::string& text, MountPoint* out);
// pve-container's print_ct_mountpoint (JSONSchema print_property_string): the volume, the
// required `mp`, then the other options sorted, `size` as format_size prints it.
std::string print_mount_point(const MountPoint& mp);
// PVE::JSONSchema::format_size: "2G", "512M", "1T", or bytes.
std::string format_disk_size(std::uint64_t bytes);
// The owner VMID in a volume's name ("local-lvm:vm-105-disk-1" -> 105); -1 if none.
int volume_owner(const std::string& volid);
// The volume mount points of a config, mpN in order of their path (as pve-container mounts
// them); bind and device ones too when `all`.
std::vector<std::pair<std::string, MountPoint>> mount_points(const Config& config,
                                                             bool all = false);

// An error of a handler: 500 (die), 403 (raise_perm_exc) or 400 (param errors).
struct VolumeError {
  int status = 0;  // 0: none
  std::string message;
  std::map<std::string, std::string> errors;
  explicit operator bool() const { return status != 0; }
};

class Volumes {
 public:
  // `storages`: the storages that exist ("local-lvm", and "shared-rbd" if the cluster has it);
  // `shared`: those of them shared by every node.
  Volumes(Backend* backend, std::vector<std::string> storages, std::vector<std::string> shared);

  // PUT config, before anything is written (check_ct_modify_config_perm, update_pct_config):
  // a bind or device mount point by anyone but root@pam (403), an unparsable volume name for
  // others, a storage that does not exist, `protection`.
  VolumeError check_update(const std::string& user, int vmid, const Config& config,
                           const Config& changes, const std::vector<std::string>& deletes) const;
  // Applies mpN/unusedN deletions and changes to `config` as vmconfig_apply_pending does:
  // a deleted volume mp becomes unusedN (unless still in use), a deleted unusedN is freed if
  // the CT owns it; a new "STORAGE:SIZE" is allocated (vm-<vmid>-disk-<lowest free k>, made by
  // the backend at once), an existing volume gets its size=, a replaced volume becomes unusedN.
  // Keys of other kinds are left alone. Warnings go to *log.
  VolumeError apply(const std::string& node, int vmid, Config& config,
                    const std::vector<std::string>& deletes, const Config& changes,
                    std::vector<std::string>* log);
  // vm_start's vmconfig_apply_pending for the volume keys: takes the mpN/unusedN entries out
  // of `pending` and `pending_delete` and applies them to `config` as apply() does; its errors
  // become warnings in *log, as there.
  void apply_pending(const std::string& node, int vmid, Config& config, Config& pending,
                     std::set<std::string>& pending_delete, std::vector<std::string>* log);
  // destroy_lxc_container: every volume of `config` (mpN, unusedN; pending too) is freed if
  // the CT owns it, else *log gets "ignore deletion of '<volid>', CT <vmid> isn't the owner!";
  // with `unreferenced`, every other volume of the CT on the node's storages too. "" or an
  // error (a volume the backend could not free).
  std::string destroy(const std::string& node, int vmid, const std::vector<Config>& configs,
                      bool unreferenced, std::vector<std::string>* log);

  // PUT resize's early checks for an mpN `disk` (the owner rule, shrink, same size): fills
  // *volid, *from and *to (bytes).
  VolumeError check_resize(const std::string& node, int vmid, const Config& config,
                           const std::string& disk, const std::string& size, std::string* volid,
                           std::uint64_t* from, std::uint64_t* to) const;
  void set_size(const std::string& node, const std::string& volid, std::uint64_t bytes);

  // Why `op` ("clone", "snapshot", "template") of a CT with `config` fails for its mount
  // points: a bind or device mp gets pve-container's message; a volume mp the note that pvesim
  // does not model them (Proxmox clones, snapshots or templates those volumes too); "" if none.
  static std::string refusal(const std::string& op, const Config& config);
  // A start's storage activation: the error of the first volume mp that does not exist, or "".
  std::string check_start(const std::string& node, const Config& config) const;

  bool exists(const std::string& node, const std::string& volid) const;

 private:
  std::string key(const std::string& node, const std::string& volid) const;
  bool storage_exists(const std::string& storage) const;
  std::string allocate(const std::string& node, int vmid, const std::string& storage,
                       std::uint64_t bytes, const Config& config, std::string* volid);
  // delete_mountpoint_volume: frees an owned volume, logs the others.
  std::string free_owned(const std::string& node, int vmid, const std::string& volid,
                         std::vector<std::string>* log);

  Backend* backend_;
  std::vector<std::string> storages_, shared_;
  struct Entry {
    std::string volid;
    std::uint64_t bytes = 0;
  };
  std::map<std::string, Entry> volumes_;  // by key(): "<node>/<volid>" or (shared) "<volid>"
  // The volumes `node` sees (its local storages' and the shared ones).
  std::vector<std::string> visible(const std::string& node) const;
};

}  // namespace pvesim
