// The public SFTP methods of SshSession (caller threads): each queues an op for the I/O thread
// (ssh_sftp_ops.cc) and waits for it. Uploads are atomic: a temporary name, then posix-rename
// (or mv -T where libssh2 has none).
#include <functional>
#include <future>
#include <istream>
#include <ostream>

#include "openssh_bulk.h"
#include "pvesandbox/common/log.h"
#include "session_impl.h"

namespace pvs {

using ssh_detail::run_sftp_op;
using ssh_detail::SftpCall;
using ssh_detail::SftpOpResult;

Result<SftpOpResult> ssh_detail::run_sftp_op(
    SshSession::Impl& impl,
    const std::function<std::shared_ptr<SshSession::Impl::Op>(ssh_detail::SftpPromise)>& make) {
  auto promise = std::make_shared<std::promise<Result<SftpOpResult>>>();
  auto future = promise->get_future();
  impl.submit(make(promise));
  return future.get();
}

namespace {

Result<SftpOpResult> call(SshSession::Impl& impl, SftpCall c, const std::string& path,
                          const std::string& path2 = {}, std::uint32_t mode = 0) {
  return run_sftp_op(impl, [&](ssh_detail::SftpPromise p) {
    return ssh_detail::make_sftp_call_op(c, path, path2, mode, std::move(p));
  });
}

std::pair<std::string, std::string> split_path(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  if (slash == 0) return {"/", path.substr(1)};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

Result<SftpAttributes> SshSession::stat(const std::string& remote_path) {
  auto r = call(*impl_, SftpCall::kStat, remote_path);
  if (!r) return tl::unexpected<Error>(r.error());
  return r->attrs;
}

Result<std::string> SshSession::realpath(const std::string& remote_path) {
  auto r = call(*impl_, SftpCall::kRealpath, remote_path);
  if (!r) return tl::unexpected<Error>(r.error());
  return std::move(r->path);
}

Result<DirListing> SshSession::list_dir(const std::string& remote_path,
                                        const ListOptions& options) {
  if (options.max_entries == 0)
    return ssh_fail(SshErrc::kInvalidArgument, "list_dir: max_entries must be at least 1");
  auto r = run_sftp_op(*impl_, [&](ssh_detail::SftpPromise p) {
    return ssh_detail::make_list_op(remote_path, options, std::move(p));
  });
  if (!r) return tl::unexpected<Error>(r.error());
  return DirListing{std::move(r->entries), r->truncated};
}

Status SshSession::remove(const std::string& remote_path) {
  auto r = call(*impl_, SftpCall::kUnlink, remote_path);
  if (!r) return tl::unexpected<Error>(r.error());
  return {};
}

Status SshSession::mkdir(const std::string& remote_path, std::uint32_t mode, bool parents) {
  if (remote_path.empty()) return ssh_fail(SshErrc::kInvalidArgument, "mkdir: empty path");
  auto r = call(*impl_, SftpCall::kMkdir, remote_path, {}, mode);
  if (r) return {};
  if (!parents) return tl::unexpected<Error>(r.error());
  // mkdir -p: an existing directory is fine; a missing parent is created first.
  auto st = stat(remote_path);
  if (st && st->is_dir()) return {};
  if (st) return ssh_fail(SshErrc::kAlreadyExists, "mkdir " + remote_path + ": not a directory");
  if (!r.error().is(SshErrc::kNoSuchFile)) return tl::unexpected<Error>(r.error());
  auto [parent, base] = split_path(remote_path);
  if (parent == remote_path || parent == "/" || parent == ".") {
    return tl::unexpected<Error>(r.error());
  }
  if (auto p = mkdir(parent, mode, true); !p) return p;
  auto again = call(*impl_, SftpCall::kMkdir, remote_path, {}, mode);
  if (!again) {
    auto st2 = stat(remote_path);
    if (st2 && st2->is_dir()) return {};
    return tl::unexpected<Error>(again.error());
  }
  return {};
}

namespace {

Status do_upload(SshSession& self, SshSession::Impl& impl, const ssh_detail::Connections& conns,
                 const std::string& remote_path, ssh_detail::Source source,
                 const UploadOptions& options) {
  if (remote_path.empty() || remote_path.back() == '/') {
    return ssh_fail(SshErrc::kInvalidArgument, "upload: bad remote path " + remote_path);
  }
  auto [dir, base] = split_path(remote_path);
  ssh_detail::MakeParent make_parent;
  if (options.create_parents && dir != "/" && dir != ".") {
    make_parent = [&self, parent = dir] { return self.mkdir(parent, 0755, true); };
  }
  const std::string target = options.atomic ? (dir == "/" ? "" : dir) + "/." + base + ".pvs-tmp-" +
                                                  ssh_detail::random_hex(12)
                                            : remote_path;
  ssh_detail::UploadPart part;
  part.mode = options.mode;
  part.fsync = options.fsync;
  auto r = ssh_detail::chunked_upload(impl, conns, target, part, std::move(source), make_parent);
  if (!r) {
    Error e = r.error();
    if (e.is(SshErrc::kSftpFailure)) {
      // OpenSSH reports ENOSPC as a bare SSH_FX_FAILURE: ask the filesystem.
      auto vfs = call(impl, SftpCall::kStatvfsFree, dir);
      if (vfs && vfs->bytes < (1u << 20)) {
        ssh_detail::retag(e, SshErrc::kDiskFull);
        e.message += ": no space left on the remote filesystem (" + std::to_string(vfs->bytes) +
                     " bytes free)";
      }
    }
    if (options.atomic && !e.is(SshErrc::kDisconnected) && !e.is(SshErrc::kClosed)) {
      (void)call(impl, SftpCall::kUnlink, target);
    }
    return tl::unexpected<Error>(std::move(e));
  }
  if (options.before_rename) {
    if (auto ok = options.before_rename(); !ok) {
      (void)call(impl, SftpCall::kUnlink, target);
      return ok;
    }
  }
  if (options.atomic) {
    // posix-rename@openssh.com is rename(2): it replaces the target in one SFTP round trip
    // (libssh2 >= 1.11). Where it fails (libssh2 1.10 has no such call, a server without the
    // extension, or the rename itself failed), `mv` as before, with its errors: SFTPv3 rename
    // refuses to replace an existing file; mv -f is rename(2), and -T never moves the file into
    // a directory of the target's name.
    auto replaced = call(impl, SftpCall::kReplace, target, remote_path);
    if (replaced) return {};
    if (replaced.error().is(SshErrc::kDisconnected) || replaced.error().is(SshErrc::kClosed)) {
      return tl::unexpected<Error>(replaced.error());
    }
    ExecOptions o;
    o.timeout = std::chrono::seconds(60);
    auto mv = self.exec(
        "mv -fT -- " + ssh_detail::shell_quote(target) + " " + ssh_detail::shell_quote(remote_path),
        std::move(o));
    if (!mv || mv->exit_code != 0) {
      (void)call(impl, SftpCall::kUnlink, target);
      if (!mv) return tl::unexpected<Error>(mv.error());
      return ssh_fail(ssh_detail::rename_error_kind(mv->err),
                      "upload " + remote_path + ": rename into place failed: " + mv->err);
    }
  }
  return {};
}

}  // namespace

Status SshSession::upload(const std::string& remote_path, std::string_view data,
                          const UploadOptions& options) {
  return do_upload(
      *this, *impl_, [this](int n) { return connections_for_transfer(n); }, remote_path,
      ssh_detail::source_of(data), options);
}

Status SshSession::upload(const std::string& remote_path, std::istream& in,
                          const UploadOptions& options, std::optional<std::uint64_t>) {
  ssh_detail::Source src = [&in](char* buf, std::size_t n) -> Result<std::size_t> {
    try {
      in.read(buf, static_cast<std::streamsize>(n));
    } catch (const std::exception& e) {
      return ssh_fail(SshErrc::kLocalIo, std::string("upload: reading the source: ") + e.what());
    }
    auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0 && in.bad())
      return ssh_fail(SshErrc::kLocalIo, "upload: reading the source failed");
    return got;
  };
  return do_upload(
      *this, *impl_, [this](int n) { return connections_for_transfer(n); }, remote_path,
      std::move(src), options);
}

Result<std::string> SshSession::download(const std::string& remote_path,
                                         const DownloadOptions& options) {
  auto data = std::make_shared<std::string>();
  ssh_detail::Sink sink = [data](std::string_view chunk) -> Status {
    data->append(chunk);
    return {};
  };
  auto r = run_sftp_op(*impl_, [&](ssh_detail::SftpPromise p) {
    return ssh_detail::make_download_op(remote_path, options, std::move(sink), std::move(p));
  });
  if (!r) return tl::unexpected<Error>(r.error());
  return std::move(*data);
}

Result<std::uint64_t> SshSession::download(const std::string& remote_path, std::ostream& out,
                                           const DownloadOptions& options) {
  ssh_detail::Sink sink = [&out](std::string_view chunk) -> Status {
    try {
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    } catch (const std::exception& e) {
      return ssh_fail(SshErrc::kLocalIo, std::string("download: writing: ") + e.what());
    }
    if (!out) return ssh_fail(SshErrc::kLocalIo, "download: writing the destination failed");
    return {};
  };
  // A file of a chunk or more: its bytes through bulk_client (openssh_bulk.h). Anything the
  // stat does not settle (an error, a special file) is SFTP's to answer, as before.
  if (ssh_detail::bulk_enabled(impl_->config())) {
    auto st = stat(remote_path);
    if (st && st->is_regular() && st->size >= impl_->config().transfer_chunk &&
        st->size <= options.max_size) {
      auto r = ssh_detail::bulk_download(ssh_detail::bulk_peer(*impl_), remote_path, sink, options);
      if (!r) return tl::unexpected<Error>(r.error());
      if (*r) {
        impl_->count_bulk();
        return **r;
      }
    }
  }
  auto r = run_sftp_op(*impl_, [&](ssh_detail::SftpPromise p) {
    return ssh_detail::make_download_op(remote_path, options, std::move(sink), std::move(p));
  });
  if (!r) return tl::unexpected<Error>(r.error());
  return r->bytes;
}

}  // namespace pvs
