#include "e2b/filesystem/fs_ops.h"

#include "e2b/envd_wire.h"
#include "pvesandbox/ssh_session.h"

namespace pvs::service::e2b {

using ssh_detail::shell_quote;  // pvesandbox/ssh_session.h
namespace {

constexpr auto kExecTimeout = std::chrono::seconds(60);

std::string base_name(const std::string& path) {
  if (path == "/") return "/";
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

FsResult<Entry> failed(ConnectCode code, std::string message) {
  return {std::nullopt, ConnectError{code, std::move(message)}};
}

// One shell command; its exit code (or the error).
FsResult<int> run(pvs::Sandbox& sandbox, std::string command, std::string* err = nullptr) {
  ExecOptions o;
  o.timeout = kExecTimeout;
  o.max_output = 4096;
  auto r = sandbox.exec(std::move(command), std::move(o));
  if (!r) return {std::nullopt, connect_error_of(r.error())};
  if (err) *err = r->err;
  return {r->exit_code, std::nullopt};
}

}  // namespace

ConnectError connect_error_of(const pvs::Error& error) {
  if (error.is(SshErrc::kNoSuchFile)) return {ConnectCode::kNotFound, error.message};
  if (error.is(SshErrc::kPermissionDenied)) return {ConnectCode::kPermissionDenied, error.message};
  if (error.is(SshErrc::kAlreadyExists)) return {ConnectCode::kAlreadyExists, error.message};
  switch (error.code) {
    case ErrorCode::kInvalidArgument: return {ConnectCode::kInvalidArgument, error.message};
    case ErrorCode::kNotFound: return {ConnectCode::kNotFound, error.message};
    case ErrorCode::kAlreadyExists: return {ConnectCode::kAlreadyExists, error.message};
    case ErrorCode::kPermissionDenied: return {ConnectCode::kPermissionDenied, error.message};
    case ErrorCode::kTooLarge:
    case ErrorCode::kLimitExceeded: return {ConnectCode::kResourceExhausted, error.message};
    case ErrorCode::kTimeout: return {ConnectCode::kDeadlineExceeded, error.message};
    case ErrorCode::kUnavailable:
    case ErrorCode::kIo: return {ConnectCode::kUnavailable, error.message};
    default: return {ConnectCode::kInternal, error.message};
  }
}

Entry entry_of(const std::string& path, const SftpAttributes& a) {
  Entry e;
  e.name = base_name(path);
  e.path = path;
  e.kind = a.is_dir()       ? FileKind::kDirectory
           : a.is_regular() ? FileKind::kFile
           : a.is_symlink() ? FileKind::kSymlink
                            : FileKind::kUnspecified;
  e.size = static_cast<std::int64_t>(a.size);
  e.mode = a.mode & 0777;
  e.owner = a.uid == 0 ? "root" : std::to_string(a.uid);
  e.group = a.gid == 0 ? "root" : std::to_string(a.gid);
  e.mtime = a.mtime;
  return e;
}

FsResult<Entry> stat_entry(pvs::Sandbox& sandbox, const std::string& path) {
  auto a = sandbox.stat(path);
  if (!a) {
    auto e = connect_error_of(a.error());
    if (e.code == ConnectCode::kNotFound) e.message = "file not found: " + path;
    return {std::nullopt, e};
  }
  return {entry_of(path, *a), std::nullopt};
}

FsResult<std::vector<Entry>> list_entries(pvs::Sandbox& sandbox, const std::string& path,
                                          std::uint32_t depth) {
  auto top = stat_entry(sandbox, path);
  if (top.error) return {std::nullopt, top.error};
  if (top.value->kind != FileKind::kDirectory)
    return {std::nullopt,
            ConnectError{ConnectCode::kInvalidArgument, "path is not a directory: " + path}};
  std::vector<Entry> out;
  std::vector<std::pair<std::string, std::uint32_t>> todo{{path, 1}};
  while (!todo.empty() && out.size() < kMaxListEntries) {
    auto [dir, level] = todo.back();
    todo.pop_back();
    ListOptions lo;
    lo.max_entries = kMaxListEntries - out.size();
    auto listing = sandbox.list_dir(dir, lo);
    if (!listing) return {std::nullopt, connect_error_of(listing.error())};
    for (const auto& entry : listing->entries) {
      out.push_back(entry_of(join(dir, entry.name), entry.attrs));
      if (entry.attrs.is_dir() && level < std::max<std::uint32_t>(depth, 1))
        todo.emplace_back(out.back().path, level + 1);
    }
  }
  return {std::move(out), std::nullopt};
}

FsResult<Entry> make_dir(pvs::Sandbox& sandbox, const std::string& path) {
  const std::string q = shell_quote(path);
  // 3: a directory already; 4: something else is there.
  auto r = run(sandbox, "if [ -d " + q + " ]; then exit 3; elif [ -e " + q +
                            " ]; then exit 4; fi; mkdir -p -- " + q);
  if (r.error) return {std::nullopt, r.error};
  if (*r.value == 3)
    return failed(ConnectCode::kAlreadyExists, "directory already exists: " + path);
  if (*r.value == 4)
    return failed(ConnectCode::kInvalidArgument,
                  "path already exists but it is not a directory: " + path);
  if (*r.value != 0) return failed(ConnectCode::kInternal, "mkdir failed: " + path);
  return stat_entry(sandbox, path);
}

FsResult<Entry> move(pvs::Sandbox& sandbox, const std::string& source,
                     const std::string& destination) {
  std::string err;
  auto r = run(sandbox,
               "[ -e " + shell_quote(source) + " ] || [ -L " + shell_quote(source) +
                   " ] || exit 3; mkdir -p -- \"$(dirname -- " + shell_quote(destination) +
                   ")\" && mv -fT -- " + shell_quote(source) + " " + shell_quote(destination),
               &err);
  if (r.error) return {std::nullopt, r.error};
  if (*r.value == 3) return failed(ConnectCode::kNotFound, "source file not found: " + source);
  if (*r.value != 0) return failed(ConnectCode::kInvalidArgument, "move failed: " + err);
  return stat_entry(sandbox, destination);
}

FsResult<bool> remove(pvs::Sandbox& sandbox, const std::string& path) {
  if (path == "/")
    return {std::nullopt, ConnectError{ConnectCode::kInvalidArgument, "cannot remove /"}};
  const std::string q = shell_quote(path);
  std::string err;
  auto r = run(sandbox, "[ -e " + q + " ] || [ -L " + q + " ] || exit 3; rm -rf -- " + q, &err);
  if (r.error) return {std::nullopt, r.error};
  if (*r.value == 3)
    return {std::nullopt, ConnectError{ConnectCode::kNotFound, "file not found: " + path}};
  if (*r.value != 0)
    return {std::nullopt, ConnectError{ConnectCode::kInternal, "remove failed: " + err}};
  return {true, std::nullopt};
}

}  // namespace pvs::service::e2b
