// The archive the E2B SDK uploads for a COPY step (`Template().copy(src, dest)`): a tar of the
// step's files, gzipped unless the step says `gzip: false`, names relative to the SDK's file
// context ("hello.txt", "dir/", "dir/a.txt"). Read strictly, as input from outside: regular
// files and directories only (no links, devices or FIFOs), no absolute or ".." names, checksums
// verified, PAX `path` records honoured (other PAX records ignored), counts and sizes bounded.
// Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_error.h"

namespace pvs::service::e2b {

struct TarLimits {
  std::size_t max_entries = 256;         // files and directories together
  std::size_t max_file_bytes = 8 << 20;  // all regular files' contents together
};

struct TarEntry {
  std::string path;  // relative, normalised: no leading "./", no trailing '/', no "." or ".."
  bool directory = false;
  std::uint32_t mode = 0644;  // permission bits only
  std::string content;        // regular files
};

// Gunzips `data` when it starts with gzip's magic (at most max_file_bytes plus the tar's own
// headers), then reads the tar. 400 naming the entry and the rule it broke.
ApiResult<std::vector<TarEntry>> read_upload_tar(std::string_view data, const TarLimits& limits);

// A relative name as tar entries and COPY sources give it, normalised ("./a//b/" -> "a/b");
// empty for "." itself; nullopt for an absolute name, a ".." segment, NUL or newline.
std::optional<std::string> normal_relative(std::string_view name);

}  // namespace pvs::service::e2b
