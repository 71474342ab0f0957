#include "lxc_disk.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "backend.h"

namespace pvesim::lxc {

namespace {

std::string run(const std::vector<std::string>& argv) {
  std::string out;
  if (run_command(argv, &out) == 0) return "";
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  return line + ": " + out;
}

bool lexists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

// A directory owned by the container's root (its upper layer, root, ...).
std::string make_owned_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return "mkdir " + path + ": " + std::strerror(errno);
  if (::chown(path.c_str(), kShift, kShift) != 0)
    return "chown " + path + ": " + std::strerror(errno);
  return "";
}

std::string image(const Disk& d) {
  return d.dir + "/disk.img";
}

// Grows a mounted image to `bytes`: the file, the loop device, then ext4 online.
std::string grow(const Disk& d, std::uint64_t bytes) {
  std::string dev;
  if (run_command({"findmnt", "-n", "-o", "SOURCE", d.dir + "/disk"}, &dev) != 0)
    return "findmnt " + d.dir + "/disk";
  dev.erase(dev.find_last_not_of(" \n") + 1);
  if (auto e = run({"truncate", "-s", std::to_string(bytes), image(d)}); !e.empty()) return e;
  if (auto e = run({"losetup", "-c", dev}); !e.empty()) return e;
  return run({"resize2fs", "-f", dev});
}

}  // namespace

std::vector<std::string> Disk::layers() const {
  std::vector<std::string> out{top()};
  out.insert(out.end(), lowers.begin(), lowers.end());
  return out;
}

std::uint64_t parse_size(const std::string& text) {
  if (text.empty()) return 0;
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  std::string unit = text.substr(used);
  double scale = unit.empty()  ? 1
                 : unit == "K" ? 1024.0
                 : unit == "M" ? 1048576.0
                 : unit == "G" ? 1073741824.0
                 : unit == "T" ? 1099511627776.0
                               : 0;
  return static_cast<std::uint64_t>(value * scale);
}

std::string mount_disk(Disk& d, std::uint64_t bytes) {
  bytes = std::max<std::uint64_t>(bytes, 64ull << 20);
  const std::string disk = d.dir + "/disk";
  if (!d.mounted) {
    ::mkdir(d.dir.c_str(), 0711);
    ::mkdir(disk.c_str(), 0711);
    ::mkdir(d.rootfs().c_str(), 0755);
    if (!lexists(image(d))) {
      // Few inodes (one per 64 KiB) and lazy inode tables: mkfs takes tens of milliseconds.
      if (auto e = run({"truncate", "-s", std::to_string(bytes), image(d)}); !e.empty()) return e;
      if (auto e =
              run({"mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-i", "65536", "-E",
                   "lazy_itable_init=1,nodiscard,root_owner=" + std::to_string(kShift) + ":" +
                       std::to_string(kShift),
                   image(d)});
          !e.empty())
        return e;
    }
    // noinit_itable: no background zeroing (it would fill the sparse image).
    if (auto e = run({"mount", "-o", "loop,noinit_itable", image(d), disk}); !e.empty()) return e;
    d.mounted = true;  // from here on unmount_disk undoes it
    std::string err;
    if (d.lowers.empty()) {
      err = make_owned_dir(d.top());
      if (err.empty()) err = run({"mount", "--bind", d.top(), d.rootfs()});
    } else {
      err = make_owned_dir(d.top());
      ::mkdir((disk + "/work").c_str(), 0700);
      std::string lower;
      for (const auto& l : d.lowers) lower += (lower.empty() ? "" : ":") + l;
      if (err.empty())
        err = run({"mount", "-t", "overlay", "overlay", "-o",
                   "lowerdir=" + lower + ",upperdir=" + d.top() + ",workdir=" + disk + "/work",
                   d.rootfs()});
    }
    // Shared: what is mounted under the root file system (the volumes) and unmounted again
    // reaches the copies every mount namespace made meanwhile holds (`ip netns exec`'s, an LXC
    // monitor's among them, as slaves). On a node whose root is private such a copy kept a
    // volume's file system, and its loop device, for as long as that process lived. LXC makes
    // the container's own copy a slave, so nothing mounted inside comes back.
    if (err.empty()) err = run({"mount", "--make-shared", d.rootfs()});
    if (!err.empty()) {
      unmount_disk(d);
      return err;
    }
  }
  if (bytes > file_size(image(d))) return grow(d, bytes);
  return "";
}

std::vector<std::string> mounts_under(const std::string& dir) {
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, devno, root, point;
    fields >> id >> parent >> devno >> root >> point;
    if (point.rfind(dir + "/", 0) == 0) out.push_back(point);
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return a.size() > b.size();  // deeper first
  });
  return out;
}

void unmount_disk(Disk& d) {
  for (int round = 0; round < 3; ++round) {
    auto points = mounts_under(d.dir);
    if (points.empty()) break;
    for (const auto& p : points)
      if (run_command({"umount", p}) != 0 && round == 2) run_command({"umount", "-l", p});
  }
  d.mounted = false;
}

std::string copy_tree(const std::string& from, const std::string& to) {
  return run({"cp", "-a", "--", from + "/.", to + "/"});
}

std::string copy_layers(const std::vector<std::string>& layers, const std::string& mount_point,
                        const std::string& to) {
  if (layers.empty()) return "no layers to copy";
  if (layers.size() == 1) return copy_tree(layers.front(), to);  // a plain tree
  // An overlay without an upper layer is read-only (and needs two lower layers at least).
  std::string lower;
  for (const auto& l : layers) lower += (lower.empty() ? "" : ":") + l;
  if (::mkdir(mount_point.c_str(), 0700) != 0 && errno != EEXIST)
    return "mkdir " + mount_point + ": " + std::strerror(errno);
  std::string err =
      run({"mount", "-t", "overlay", "overlay", "-o", "ro,lowerdir=" + lower, mount_point});
  if (err.empty()) {
    err = copy_tree(mount_point, to);
    if (run_command({"umount", mount_point}) != 0) run_command({"umount", "-l", mount_point});
  }
  ::rmdir(mount_point.c_str());
  return err;
}

std::string snapshot(Disk& d, const std::string& name) {
  if (!d.mounted) return "";  // never started: nothing written yet
  std::string snap = d.dir + "/disk/snap-" + name;
  if (auto e = make_owned_dir(snap); !e.empty()) return e;
  return copy_tree(d.top(), snap);
}

std::vector<std::string> snapshot_layers(const Disk& d, const std::string& name) {
  std::vector<std::string> out;
  std::string snap = d.dir + "/disk/snap-" + name;
  if (d.mounted && lexists(snap)) out.push_back(snap);
  out.insert(out.end(), d.lowers.begin(), d.lowers.end());
  return out;
}

std::string rollback(Disk& d, const std::string& name) {
  std::string snap = d.dir + "/disk/snap-" + name;
  if (!d.mounted || !lexists(snap)) return "";
  // The overlay must not see its upper layer change under it: unmount, swap, mount again.
  std::uint64_t bytes = file_size(image(d));
  unmount_disk(d);
  if (auto e = run({"mount", "-o", "loop,noinit_itable", image(d), d.dir + "/disk"}); !e.empty())
    return e;
  std::string err = run({"rm", "-rf", "--one-file-system", d.top()});
  if (err.empty()) err = make_owned_dir(d.top());
  if (err.empty()) err = copy_tree(snap, d.top());
  run_command({"umount", d.dir + "/disk"});
  if (!err.empty()) return err;
  return mount_disk(d, bytes);
}

void delete_snapshot(Disk& d, const std::string& name) {
  if (d.mounted) run_command({"rm", "-rf", "--one-file-system", d.dir + "/disk/snap-" + name});
}

namespace {

// Opens the directory root/names[0]/.../names[count-1], following no symbolic link, making
// missing ones (mode 0755, owned by kShift). -1 with *error on failure.
int open_dirs(const std::string& root, const std::vector<std::string>& names, std::size_t count,
              std::string* error) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    *error = "open " + root + ": " + std::strerror(errno);
    return -1;
  }
  for (std::size_t i = 0; i < count && fd >= 0; ++i) {
    if (names[i] == "." || names[i] == "..") {
      *error = "illegal path component " + names[i];
      ::close(fd);
      return -1;
    }
    int next = ::openat(fd, names[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && ::mkdirat(fd, names[i].c_str(), 0755) == 0) {
      next = ::openat(fd, names[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next >= 0 && ::fchown(next, kShift, kShift) != 0) *error = "fchown";
    }
    if (next < 0) *error = names[i] + ": " + std::strerror(errno);
    ::close(fd);
    fd = error->empty() ? next : -1;
    if (!error->empty() && next >= 0) ::close(next);
  }
  return fd;
}

std::vector<std::string> path_names(const std::string& path) {
  std::istringstream parts(path);
  std::vector<std::string> names;
  for (std::string part; std::getline(parts, part, '/');)
    if (!part.empty()) names.push_back(part);
  return names;
}

}  // namespace

std::string write_inside(const std::string& root, const std::string& path,
                         const std::string& content, unsigned mode) {
  auto names = path_names(path);
  if (names.empty()) return "empty path";
  std::string error;
  int fd = open_dirs(root, names, names.size() - 1, &error);
  if (fd < 0) return path + ": " + error;
  int file = ::openat(fd, names.back().c_str(),
                      O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
  ::close(fd);
  if (file < 0) return path + ": " + std::strerror(errno);
  bool ok = ::write(file, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
            ::fchown(file, kShift, kShift) == 0 && ::fchmod(file, mode) == 0;
  ::close(file);
  return ok ? "" : path + ": write: " + std::strerror(errno);
}

std::string make_dir_inside(const std::string& root, const std::string& path) {
  auto names = path_names(path);
  std::string error;
  int fd = open_dirs(root, names, names.size(), &error);
  if (fd < 0) return "mount point " + path + ": " + error;
  ::close(fd);
  return "";
}

std::string make_volume(const std::string& image, std::uint64_t bytes) {
  if (lexists(image)) return "volume image " + image + " exists";
  std::string err = run({"truncate", "-s", std::to_string(bytes), image});
  // pve-container's mkfs (root_owner), lazily initialised: tens of milliseconds on a sparse file.
  if (err.empty())
    err = run({"mkfs.ext4", "-q", "-F", "-E",
               "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=" +
                   std::to_string(kShift) + ":" + std::to_string(kShift),
               image});
  if (!err.empty()) ::unlink(image.c_str());
  return err;
}

std::string release_loops(const std::string& image, std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::string out;
    if (run_command(
            {"losetup", "--list", "--noheadings", "--output", "NAME", "--associated", image},
            &out) != 0)
      return "losetup --associated " + image + ": " + out;
    std::istringstream lines(out);
    std::vector<std::string> devices;
    for (std::string dev; std::getline(lines, dev);)
      if (!dev.empty()) devices.push_back(dev);
    if (devices.empty()) return "";
    if (std::chrono::steady_clock::now() >= deadline)
      return "volume image " + image + " is still attached to " + devices.front() +
             " (a mount of it lingers)";
    for (const auto& dev : devices) run_command({"losetup", "--detach", dev});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string grow_volume(const std::string& image, std::uint64_t bytes) {
  if (auto e = release_loops(image, std::chrono::seconds(1)); !e.empty()) return e;
  if (auto e = run({"truncate", "-s", std::to_string(bytes), image}); !e.empty()) return e;
  std::string out;
  // e2fsck: 0 clean, 1 errors corrected.
  int rc = run_command({"e2fsck", "-f", "-y", image}, &out);
  if (rc != 0 && rc != 1) return "e2fsck " + image + ": " + out;
  return run({"resize2fs", image});
}

}  // namespace pvesim::lxc
