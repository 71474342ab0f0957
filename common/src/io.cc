#include "pvesandbox/common/io.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pvs {

Status write_all(int fd, std::string_view data, std::string_view what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno_error(what, errno));
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

Status write_file_atomic(const std::string& path, std::string_view data,
                         AtomicWriteOptions options) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) return fail(ErrorCode::kInvalidArgument, "no file name in " + path);
  std::string tmp =
      (slash == std::string::npos ? "" : path.substr(0, slash + 1)) + "." + name + ".tmp";
  // A leftover temp file (or anything planted by that name) goes first: O_EXCL then guarantees
  // the file written is a new regular file of ours, never a link to somewhere else.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    return fail(errno_error("removing " + tmp, errno));
  }
  UniqueFd fd(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, options.mode));
  if (!fd) return fail(errno_error("creating " + tmp, errno));
  if (::fchmod(fd.get(), options.mode) != 0) return fail(errno_error("chmod " + tmp, errno));
  auto cleanup_fail = [&](Error e) -> Status {
    ::unlink(tmp.c_str());
    return fail(std::move(e));
  };
  if (auto w = write_all(fd.get(), data, "writing " + tmp); !w) return cleanup_fail(w.error());
  if (options.fsync && ::fsync(fd.get()) != 0) {
    return cleanup_fail(errno_error("fsync " + tmp, errno));
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return cleanup_fail(errno_error("renaming " + tmp + " to " + path, errno));
  }
  if (options.fsync) {
    UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dfd || ::fsync(dfd.get()) != 0) return fail(errno_error("fsync " + dir, errno));
  }
  return {};
}

Result<UniqueFd> connect_unix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return fail(ErrorCode::kInvalidArgument, "unix socket path empty or too long: " + path);
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return fail(errno_error("socket", errno));
  while (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    std::string message = "connecting to " + path + ": " + std::strerror(err);
    bool absent = err == ENOENT || err == ECONNREFUSED || err == EAGAIN;
    return fail(absent ? ErrorCode::kUnavailable : ErrorCode::kIo, std::move(message));
  }
  return fd;
}

}  // namespace pvs
