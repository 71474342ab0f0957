// filesystem.Filesystem's calls on a sandbox: SFTP for Stat and ListDir, one exec for MakeDir,
// Move and Remove (the Sandbox has no SFTP mkdir/rename/rmdir of its own). Errors as envd gives
// them: NotFound, AlreadyExists, InvalidArgument; a failing sandbox Unavailable.
#pragma once

#include <string>
#include <vector>

#include "e2b/envd_wire.h"
#include "pvesandbox/manager.h"

namespace pvs::service::e2b {

template <typename T>
struct FsResult {
  std::optional<T> value;
  std::optional<ConnectError> error;
};

inline constexpr std::size_t kMaxListEntries = 10000;

FsResult<Entry> stat_entry(pvs::Sandbox& sandbox, const std::string& path);
// depth 0 or 1: the directory's entries; more: down that many levels (at most
// kMaxListEntries entries in all).
FsResult<std::vector<Entry>> list_entries(pvs::Sandbox& sandbox, const std::string& path,
                                          std::uint32_t depth);
// mkdir -p; AlreadyExists when the directory was there, InvalidArgument when a file is.
FsResult<Entry> make_dir(pvs::Sandbox& sandbox, const std::string& path);
// mv -fT (parents of the destination are created), then the moved entry. The destination is
// the path the entry lands at, never a directory it would go into (envd's rename; a move is
// judged on the path it lands at).
FsResult<Entry> move(pvs::Sandbox& sandbox, const std::string& source,
                     const std::string& destination);
// rm -rf of a path that exists (NotFound otherwise).
FsResult<bool> remove(pvs::Sandbox& sandbox, const std::string& path);

// The Entry of SFTP attributes (the owner and group as names for uid/gid 0, else numbers).
Entry entry_of(const std::string& path, const SftpAttributes& attrs);
// A library error as envd's Connect error.
ConnectError connect_error_of(const pvs::Error& error);

}  // namespace pvs::service::e2b
