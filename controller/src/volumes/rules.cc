// The rules of volume names, ids and mount paths (pvesandbox/volumes.h): pure functions.
#include <algorithm>
#include <array>
#include <set>

#include "pvesandbox/common/text.h"
#include "pvesandbox/volumes.h"

namespace pvs {

namespace {

bool lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool path_char(char c) {
  return lower_alnum(c) || (c >= 'A' && c <= 'Z') || c == '.' || c == '_' || c == '+' || c == '@' ||
         c == '-' || c == '/';
}

// `path` is `dir` or inside it.
bool within(std::string_view path, std::string_view dir) {
  return path == dir || (path.starts_with(dir) && path[dir.size()] == '/');
}

}  // namespace

bool valid_volume_name(std::string_view name) {
  if (name.empty() || name.size() > 63 || !lower_alnum(name[0])) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return lower_alnum(c) || c == '_' || c == '-'; });
}

bool valid_volume_id(std::string_view id) {
  if (id.size() != 16 || !id.starts_with("vol-")) return false;
  return std::all_of(id.begin() + 4, id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Status check_mount_path(std::string_view path) {
  auto bad = [&](const std::string& why) {
    return fail(ErrorCode::kInvalidArgument, "mount path " + pvs::quoted(path, 64) + ": " + why);
  };
  if (path.empty() || path[0] != '/') return bad("must be absolute");
  if (path.size() > 200) return bad("longer than 200 bytes");
  if (!std::all_of(path.begin(), path.end(), path_char))
    return bad("only letters, digits and . _ + @ - /");
  if (path == "/") return bad("not the root");
  if (path.back() == '/' || path.find("//") != std::string_view::npos)
    return bad("must be normalized (no trailing or double /)");
  for (std::size_t at = 1; at <= path.size();) {
    auto end = std::min(path.find('/', at), path.size());
    auto part = path.substr(at, end - at);
    if (part == "." || part == "..") return bad("must be normalized (no . or ..)");
    at = end + 1;
  }
  static constexpr std::array<std::string_view, 4> kWhole{"/root", "/home", "/var", "/tmp"};
  for (auto dir : kWhole)
    if (path == dir) return bad("would hide the whole of " + std::string(dir));
  static constexpr std::array<std::string_view, 13> kSystem{
      "/proc", "/sys", "/dev",   "/run",   "/etc",    "/usr", "/bin",
      "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot"};
  for (auto dir : kSystem)
    if (within(path, dir)) return bad("inside " + std::string(dir) + ", the system's");
  return {};
}

Status check_mounts(const std::vector<VolumeMount>& mounts, int max) {
  if (static_cast<int>(mounts.size()) > max)
    return fail(ErrorCode::kInvalidArgument,
                "at most " + std::to_string(max) + " volumes per sandbox (volumes.max_mounts)");
  std::set<std::string> volumes;
  for (std::size_t i = 0; i < mounts.size(); ++i) {
    if (auto ok = check_mount_path(mounts[i].path); !ok) return ok;
    if (!volumes.insert(mounts[i].volume).second)
      return fail(ErrorCode::kInvalidArgument,
                  "volume " + pvs::quoted(mounts[i].volume, 64) + " is mounted twice");
    for (std::size_t j = 0; j < i; ++j)
      if (within(mounts[i].path, mounts[j].path) || within(mounts[j].path, mounts[i].path))
        return fail(ErrorCode::kInvalidArgument, "mount paths " + pvs::quoted(mounts[j].path, 64) +
                                                     " and " + pvs::quoted(mounts[i].path, 64) +
                                                     " overlap");
  }
  return {};
}

}  // namespace pvs
