// The storage of pvesim's lxc backend: each CT's root file system on a disk of its own.
//
//   <dir>/disk.img   a sparse ext4 image of the rootfs size (a write past it fails with ENOSPC),
//                    loop-mounted on <dir>/disk (journal-less: a sandbox disk is disposable)
//   <dir>/disk/upper, work   a linked clone: the writable layer of an overlay over `lowers`
//   <dir>/disk/root          a full clone (no lowers): the whole tree
//   <dir>/disk/snap-<name>   a snapshot: a copy of upper (or root)
//   <dir>/snapview-<n>       the tree of a snapshot (or of the layers of a CT never started)
//                            while full clone <n> copies it (copy_layers)
//   <dir>/rootfs             what the container sees: the overlay (linked) or a bind of root
//
// Owners in the trees are shifted by kShift (the containers' idmap). Not thread-safe per Disk.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pvesim::lxc {

inline constexpr unsigned kShift = 100000;  // uid/gid 0 in a container is 100000 on the node

struct Disk {
  std::string dir;
  std::vector<std::string> lowers;  // read-only layers, top first; empty: a full clone
  bool mounted = false;

  std::string rootfs() const { return dir + "/rootfs"; }
  std::string top() const { return dir + (lowers.empty() ? "/disk/root" : "/disk/upper"); }
  // The layers a linked clone of this disk stacks on (its top, then its lowers).
  std::vector<std::string> layers() const;
};

// Creates the image (of `bytes`) at the first mount, grows it when `bytes` is larger than it
// is (as `pct resize` grows the volume and the file system), mounts it and the rootfs.
// Returns "" or an error.
std::string mount_disk(Disk& disk, std::uint64_t bytes);
// Unmounts everything under disk.dir (the loop device goes with the image's mount).
void unmount_disk(Disk& disk);
// cp -a of the tree `from` into the directory `to`.
std::string copy_tree(const std::string& from, const std::string& to);

// Copies what an overlay of `layers` (top first) shows into the directory `to`: one layer as it
// is; several through a read-only overlay mounted on `mount_point` (made, then unmounted and
// removed on every path), so that the whiteouts and opaque directories of the upper ones hide
// what they hide instead of being copied. Returns "" or an error.
std::string copy_layers(const std::vector<std::string>& layers, const std::string& mount_point,
                        const std::string& to);

std::string snapshot(Disk& disk, const std::string& name);
// The layers of `disk` as it was at snapshot `name` (top first): the snapshot's copy of its top,
// then its lowers; only the lowers when the disk had never been mounted then (nothing written
// yet, snapshot() copied nothing). Empty for a full clone without that copy.
std::vector<std::string> snapshot_layers(const Disk& disk, const std::string& name);
std::string rollback(Disk& disk, const std::string& name);  // the CT is stopped
void delete_snapshot(Disk& disk, const std::string& name);

// Writes `content` to `path` (relative, e.g. "etc/ssh/key") under the directory `root`,
// following no symbolic link in any component (the tree belongs to a container's root),
// creating missing directories (mode 0755), owned by kShift. Returns "" or an error.
std::string write_inside(const std::string& root, const std::string& path,
                         const std::string& content, unsigned mode);

// Makes the directory `path` (absolute, as the container sees it) under `root` as write_inside
// makes its parents: no symbolic link followed, missing components owned by kShift.
std::string make_dir_inside(const std::string& root, const std::string& path);

// A mount point volume: a sparse ext4 image of `bytes`, formatted as pve-container's mkfs does
// (-E root_owner=kShift:kShift, with a journal; not -O mmp, whose mount waits about 11 s: the
// backend refuses a second mount itself). Returns "" or an error.
std::string make_volume(const std::string& image, std::uint64_t bytes);
// Waits (up to `wait`) until no loop device is attached to `image`, detaching what is left: the
// kernel drops the loop device of a `mount -o loop` only once the last reference to its file
// system is gone, and a new mount of the image meanwhile reuses that device at its old size.
// Returns "" or an error naming the device.
std::string release_loops(const std::string& image, std::chrono::milliseconds wait);
// Grows an unmounted volume image and its ext4 (e2fsck -f -y, resize2fs), as pct resize does
// for a stopped CT's raw volume.
std::string grow_volume(const std::string& image, std::uint64_t bytes);

// "8G", "512M", "1T", "100K" or bytes -> bytes (0 if unparsable).
std::uint64_t parse_size(const std::string& text);

// Mount points under `dir` (deepest first), from /proc/self/mountinfo.
std::vector<std::string> mounts_under(const std::string& dir);

}  // namespace pvesim::lxc
