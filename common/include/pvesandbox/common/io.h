// Small file and socket helpers every program of the project shares.
//
//   if (auto s = pvs::write_all(fd, text); !s) return s;
//   pvs::write_file_atomic("/run/pve-sandbox/state", text, {.mode = 0600});
//   auto sock = pvs::connect_unix(pvs::kDefaultAgentSocket);
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs {

// Where the node agent listens unless its configuration says otherwise.
inline constexpr std::string_view kDefaultAgentSocket = "/run/pve-sandbox/agent.sock";

// Writes every byte of `data` to `fd`, retrying short writes and EINTR. On a socket the caller
// ignores SIGPIPE (or gets it). Errors: kIo "<what>: <strerror>".
Status write_all(int fd, std::string_view data, std::string_view what = "write");

struct AtomicWriteOptions {
  mode_t mode = 0600;  // of the new file, whatever the umask
  bool fsync = false;  // fsync the file before the rename and its directory after it
};

// Replaces `path` with `data` all at once: writes "<dir>/.<name>.tmp" and renames it over
// `path`, so a reader sees the old content or the new, never a part. Errors: kIo.
Status write_file_atomic(const std::string& path, std::string_view data,
                         AtomicWriteOptions options = {});

// A connected, blocking AF_UNIX stream socket (close-on-exec). Errors: kInvalidArgument for a
// path too long for sockaddr_un, kUnavailable when nothing accepts there, kIo otherwise.
Result<UniqueFd> connect_unix(const std::string& path);

}  // namespace pvs
