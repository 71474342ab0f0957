// Volumes: named disks that outlive the sandboxes that mount them (docs/api.md "Volumes";
// docs/design/volumes.md says why they are built this way).
//
//   auto vol = manager->create_volume({.name = "data", .size_gb = 2, .owner = "alice"});
//   pvs::CreateOptions options;
//   options.owner = "alice";
//   options.volumes = {{vol->id, "/mnt/data"}};
//   auto sandbox = manager->create(options);   // the volume is mounted at /mnt/data
//
// A volume is a Proxmox mount point volume (ext4 of its size on block storage, a subvolume with
// that quota on ZFS) owned by a holder: a container in the sandbox pool that never starts, a
// linked clone of VolumeConfig::holder_template_vmid whose mp0 is the volume and whose
// description names it (id, name, owner). Proxmox frees a mount point volume only with the
// container that owns it, so destroying a sandbox that mounted it leaves it; destroying the
// holder (Manager::delete_volume) frees it. A sandbox mounts it as mpN of its own container
// (ro=1 when read-only), written with the create's one config write while the container is
// stopped. One sandbox (running or paused) holds a volume at a time: an ext4 volume must not be
// mounted by two containers at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/sandbox_metadata.h"

namespace pvs {

// The label of a holder's description: the volume's name.
inline constexpr std::string_view kVolumeHolderLabel = "pve-sandbox/volume";

struct VolumeConfig {
  // The holder template (`pve-sandbox-setup volume-holder`); 0: volumes are off (kUnavailable).
  int holder_template_vmid = 0;
  std::string storage;      // where volumes are allocated; empty: the holder template's storage
  int default_size_gb = 1;  // for a create that names no size (E2B's)
  int max_size_gb = 64;
  int max_per_owner = 8;  // volumes one owner may keep
  int max_mounts = 8;     // volumes one sandbox may mount
};

struct VolumeRequest {
  std::string name;  // valid_volume_name, unique per owner
  int size_gb = 0;   // 0: VolumeConfig::default_size_gb
  std::string owner;
  std::string node;  // empty: the first node that is online and not drained
};

struct VolumeInfo {
  std::string id;  // "vol-" and 12 hex digits; never reused
  std::string name;
  std::string owner;
  int size_gb = 0;
  std::string node;     // where it lives (on non-shared storage, where its sandboxes run)
  std::string storage;  // the Proxmox storage
  int holder_vmid = 0;
  std::int64_t created_at = 0;  // unix seconds
  // The sandbox that holds it (running, paused or being created), or empty.
  std::string mounted_by;
};

// 1-63 of [a-z0-9_-], a letter or digit first.
bool valid_volume_name(std::string_view name);
// "vol-" and 12 lower-case hex digits.
bool valid_volume_id(std::string_view id);
// A mount point inside a sandbox: absolute, normalized (no ".", "..", "//" or trailing "/"),
// at most 200 bytes of [A-Za-z0-9._+@/-]; not "/", "/root", "/home", "/var", "/tmp", nor in
// /proc, /sys, /dev, /run, /etc, /usr, /bin, /sbin, /lib*, /boot. kInvalidArgument naming why.
Status check_mount_path(std::string_view path);
// Checks a create's mounts: at most `max` (kInvalidArgument), each path valid, no path twice or
// inside another, no volume twice.
Status check_mounts(const std::vector<VolumeMount>& mounts, int max);

}  // namespace pvs
