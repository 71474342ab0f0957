#include "dhcp_hosts.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <vector>

#include "pvesandbox/common/io.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::agent {
namespace {

constexpr mode_t kFileMode = 0644;  // dnsmasq reads it after dropping root
constexpr mode_t kDirMode = 0755;

std::string temp_name(const std::string& port) {
  return "." + port + ".tmp";
}

bool is_temp_name(const std::string& name) {
  return name.size() > 5 && name[0] == '.' && name.ends_with(".tmp");
}

// The content of a small regular file with mode 0644 in `dfd`, or nullopt (anything else).
std::optional<std::string> current_content(int dfd, const std::string& name) {
  UniqueFd fd(::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 07777) != kFileMode ||
      st.st_size > 256) {
    return std::nullopt;
  }
  char buf[257];
  ssize_t n = ::read(fd.get(), buf, sizeof(buf));
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

}  // namespace

std::string DhcpHosts::line(const proto::Binding& binding) {
  return binding.mac.to_string() + "," + binding.address.to_string() + "\n";
}

Status DhcpHosts::ensure_dir(bool* created) const {
  *created = false;
  if (::mkdir(dir_.c_str(), kDirMode) == 0) {
    *created = true;
    // mkdir's mode is cut by the umask (the unit sets 0077); dnsmasq must be able to read it.
    if (::chmod(dir_.c_str(), kDirMode) != 0) return fail(errno_error("chmod " + dir_, errno));
    return {};
  }
  if (errno != EEXIST) return fail(errno_error("creating directory " + dir_, errno));
  struct stat st {};
  if (::lstat(dir_.c_str(), &st) != 0) return fail(errno_error(dir_, errno));
  if (!S_ISDIR(st.st_mode)) {
    return fail(ErrorCode::kIo, dir_ + ": not a directory (symbolic links are not followed)");
  }
  return {};
}

Status DhcpHosts::write(const proto::Binding& binding) const {
  UniqueFd dfd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dfd) return fail(errno_error("dhcp_hosts_dir " + dir_, errno));
  const std::string tmp = temp_name(binding.port);
  // A leftover temp file (or anything else by that name) goes first: O_EXCL then guarantees the
  // file written is a new regular file of ours, never a link to somewhere else.
  if (::unlinkat(dfd.get(), tmp.c_str(), 0) != 0 && errno != ENOENT) {
    return fail(errno_error("removing " + path(tmp), errno));
  }
  UniqueFd fd(::openat(dfd.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       kFileMode));
  if (!fd) return fail(errno_error("creating " + path(tmp), errno));
  Status result;
  if (::fchmod(fd.get(), kFileMode) != 0) {
    result = fail(errno_error("chmod " + path(tmp), errno));
  } else {
    result = write_all(fd.get(), line(binding), "writing " + path(tmp));
  }
  if (result && ::close(fd.release()) != 0) {
    result = fail(errno_error("closing " + path(tmp), errno));
  }
  if (result && ::renameat(dfd.get(), tmp.c_str(), dfd.get(), binding.port.c_str()) != 0) {
    result = fail(errno_error("renaming " + path(tmp) + " to " + path(binding.port), errno));
  }
  if (!result) (void)::unlinkat(dfd.get(), tmp.c_str(), 0);
  return result;
}

Status DhcpHosts::remove(const std::string& port) const {
  if (::unlink(path(port).c_str()) != 0 && errno != ENOENT) {
    return fail(errno_error("removing " + path(port), errno));
  }
  return {};
}

Status DhcpHosts::mirror(const std::map<std::string, proto::Binding>& bindings) const {
  UniqueFd dfd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dfd) return fail(errno_error("dhcp_hosts_dir " + dir_, errno));
  // What is there now: regular files only (a directory or link someone put there is left alone).
  std::vector<std::string> regular;
  {
    int copy = ::dup(dfd.get());
    if (copy < 0) return fail(errno_error("dup", errno));
    DIR* d = ::fdopendir(copy);
    if (d == nullptr) {
      ::close(copy);
      return fail(errno_error("reading directory " + dir_, errno));
    }
    errno = 0;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      struct stat st {};
      if (::fstatat(dfd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISREG(st.st_mode)) regular.push_back(std::move(name));
    }
    int err = errno;
    ::closedir(d);
    if (err != 0) return fail(errno_error("reading directory " + dir_, err));
  }
  for (const auto& [port, binding] : bindings) {
    if (current_content(dfd.get(), port) == line(binding)) continue;
    if (auto ok = write(binding); !ok) return ok;
  }
  for (const auto& name : regular) {
    bool stale = name[0] == '.' ? is_temp_name(name) : !bindings.contains(name);
    if (stale && ::unlinkat(dfd.get(), name.c_str(), 0) != 0 && errno != ENOENT) {
      return fail(errno_error("removing " + path(name), errno));
    }
  }
  return {};
}

}  // namespace pvs::agent
