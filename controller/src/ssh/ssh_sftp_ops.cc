// SFTP operations, driven by the I/O thread: calls (stat, mkdir, ...), listings, uploads and
// downloads (the public SFTP methods of SshSession are in ssh_sftp.cc; the pool of SFTP
// instances they borrow in sftp_pool.cc).
//
// Each op borrows one LIBSSH2_SFTP instance from the session's pool for its whole duration:
// libssh2 keeps per-instance state for open/read/write/stat, so one instance runs one op at a
// time. Transfers pass sftp_buffer_size (1 MiB) to every read/write, which keeps ~35 requests
// in flight (libssh2 splits into 30000-byte packets and pipelines them).
#include <cstring>
#include <istream>
#include <memory>
#include <ostream>
#include <random>

#include "pvesandbox/common/log.h"
#include "session_impl.h"

namespace pvs::ssh_detail {
namespace {

using Op = SshSession::Impl::Op;
using Step = Op::Step;

SftpAttributes to_attrs(const LIBSSH2_SFTP_ATTRIBUTES& a) {
  SftpAttributes r;
  if (a.flags & LIBSSH2_SFTP_ATTR_SIZE) r.size = a.filesize;
  if (a.flags & LIBSSH2_SFTP_ATTR_PERMISSIONS) r.mode = static_cast<std::uint32_t>(a.permissions);
  if (a.flags & LIBSSH2_SFTP_ATTR_UIDGID) {
    r.uid = static_cast<std::uint32_t>(a.uid);
    r.gid = static_cast<std::uint32_t>(a.gid);
  }
  if (a.flags & LIBSSH2_SFTP_ATTR_ACMODTIME) r.mtime = static_cast<std::int64_t>(a.mtime);
  return r;
}

// A transfer buffer left uninitialised: a small file touches only the pages it uses (a zeroed
// vector cost every upload of a few bytes a 2 MiB memset and its page faults).
class RawBuffer {
 public:
  void allocate(std::size_t n) {
    bytes_ = std::make_unique_for_overwrite<char[]>(n);
    size_ = n;
  }
  char* data() { return bytes_.get(); }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<char[]> bytes_;
  std::size_t size_ = 0;
};

// Common part: borrow an SFTP instance, deliver exactly once, give the instance back.
class SftpOp : public Op {
 public:
  explicit SftpOp(SftpPromise promise) : promise_(std::move(promise)) {}

  bool on_session_lost(const Error& error, bool may_retry) override {
    if (done_) return false;
    slot_ = -1;
    handle_ = nullptr;
    in_flight_ = false;
    if (!sent_ && may_retry) {
      reset();
      return true;
    }
    deliver(tl::unexpected<Error>(error));
    return false;
  }

  void abandon(SshSession::Impl&) override {
    // The handle dies with its SFTP instance (libssh2_sftp_shutdown in teardown).
    handle_ = nullptr;
  }

 protected:
  // Returns false while waiting (or after delivering an error).
  bool acquire(SshSession::Impl& io) {
    if (slot_ >= 0) return true;
    auto r = io.acquire_sftp(this);
    if (!r) {
      deliver(tl::unexpected<Error>(r.error()));
      return false;
    }
    if (*r < 0) return false;
    slot_ = *r;
    return true;
  }

  LIBSSH2_SFTP* sftp(SshSession::Impl& io) const { return io.sftp(slot_); }

  // rc from a libssh2 SFTP call that failed (not EAGAIN).
  Step fail_call(SshSession::Impl& io, int rc, std::string_view what) {
    Error e = sftp_error(io.session(), sftp(io), rc, what);
    if (is_fatal_session_error(rc)) {
      io.fatal(e);
      return Step::kIdle;
    }
    return finish(io, tl::unexpected<Error>(std::move(e)));
  }

  Step finish(SshSession::Impl& io, Result<SftpOpResult> r) {
    if (slot_ >= 0) io.release_sftp(slot_);
    slot_ = -1;
    deliver(std::move(r));
    return Step::kDone;
  }

  void deliver(Result<SftpOpResult> r) {
    if (done_) return;
    done_ = true;
    promise_->set_value(std::move(r));
  }

  virtual void reset() {}

  // Ends the op before its deadline-cut request was answered: libssh2 keeps that request's
  // state in the instance, so the instance goes (the handle with it) instead of back.
  Step finish_discarding(SshSession::Impl& io, Result<SftpOpResult> r) {
    io.discard_sftp(slot_);
    slot_ = -1;
    handle_ = nullptr;
    deliver(std::move(r));
    return Step::kDone;
  }

  SftpPromise promise_;
  int slot_ = -1;
  bool sent_ = false;       // a request that changes remote state went out
  bool in_flight_ = false;  // a request went out and libssh2 waits for its answer (EAGAIN)
  bool done_ = false;
  LIBSSH2_SFTP_HANDLE* handle_ = nullptr;
};

class CallOp : public SftpOp {
 public:
  CallOp(SftpCall call, std::string path, std::string path2, std::uint32_t mode, SftpPromise p)
      : SftpOp(std::move(p)),
        call_(call),
        path_(std::move(path)),
        path2_(std::move(path2)),
        mode_(mode) {}

  Step step(SshSession::Impl& io) override {
    if (done_) return Step::kDone;
    if (!acquire(io)) return done_ ? Step::kDone : Step::kIdle;
    LIBSSH2_SFTP* s = sftp(io);
    const auto len = static_cast<unsigned>(path_.size());
    LIBSSH2_SFTP_ATTRIBUTES attrs{};
    LIBSSH2_SFTP_STATVFS vfs{};
    int rc = 0;
    std::string_view what;
    switch (call_) {
      case SftpCall::kStat:
        rc = libssh2_sftp_stat_ex(s, path_.c_str(), len, LIBSSH2_SFTP_STAT, &attrs);
        what = "stat";
        break;
      case SftpCall::kLstat:
        rc = libssh2_sftp_stat_ex(s, path_.c_str(), len, LIBSSH2_SFTP_LSTAT, &attrs);
        what = "lstat";
        break;
      case SftpCall::kMkdir:
        rc = libssh2_sftp_mkdir_ex(s, path_.c_str(), len, static_cast<long>(mode_));
        what = "mkdir";
        break;
      case SftpCall::kUnlink:
        rc = libssh2_sftp_unlink_ex(s, path_.c_str(), len);
        what = "unlink";
        break;
      case SftpCall::kRmdir:
        rc = libssh2_sftp_rmdir_ex(s, path_.c_str(), len);
        what = "rmdir";
        break;
      case SftpCall::kRename:
        rc = libssh2_sftp_rename_ex(s, path_.c_str(), len, path2_.c_str(),
                                    static_cast<unsigned>(path2_.size()),
                                    LIBSSH2_SFTP_RENAME_OVERWRITE | LIBSSH2_SFTP_RENAME_ATOMIC |
                                        LIBSSH2_SFTP_RENAME_NATIVE);
        what = "rename";
        break;
      case SftpCall::kReplace:
#ifdef libssh2_sftp_posix_rename
        rc = libssh2_sftp_posix_rename_ex(s, path_.c_str(), path_.size(), path2_.c_str(),
                                          path2_.size());
        what = "posix-rename";
        break;
#else
        return finish(io, ssh_fail(SshErrc::kProtocol, "posix-rename needs libssh2 1.11"));
#endif
      case SftpCall::kStatvfsFree:
        rc = libssh2_sftp_statvfs(s, path_.c_str(), path_.size(), &vfs);
        what = "statvfs";
        break;
      case SftpCall::kChmod:
        attrs.flags = LIBSSH2_SFTP_ATTR_PERMISSIONS;
        attrs.permissions = mode_;
        rc = libssh2_sftp_stat_ex(s, path_.c_str(), len, LIBSSH2_SFTP_SETSTAT, &attrs);
        what = "chmod";
        break;
      case SftpCall::kRealpath:
        real_.resize(4096);
        rc = libssh2_sftp_symlink_ex(s, path_.c_str(), len, real_.data(), 4096,
                                     LIBSSH2_SFTP_REALPATH);
        what = "realpath";
        break;
    }
    if (rc == LIBSSH2_ERROR_EAGAIN) {
      if (call_ != SftpCall::kStat && call_ != SftpCall::kLstat &&
          call_ != SftpCall::kStatvfsFree) {
        sent_ = true;
      }
      return Step::kIdle;
    }
    if (rc < 0 || (rc > 0 && call_ != SftpCall::kRealpath))
      return fail_call(io, rc, std::string(what) + " " + path_);
    SftpOpResult r;
    if (call_ == SftpCall::kRealpath) r.path = real_.substr(0, static_cast<std::size_t>(rc));
    r.attrs = to_attrs(attrs);
    if (call_ == SftpCall::kStatvfsFree) r.bytes = vfs.f_bavail * vfs.f_frsize;
    return finish(io, std::move(r));
  }

 private:
  SftpCall call_;
  std::string path_;
  std::string path2_;
  std::uint32_t mode_;
  std::string real_;
};

// opendir -> readdir until the end, max_entries or the deadline (then truncated) -> close. At
// most kBatch names per step, so that other ops on the session keep moving.
class ListOp : public SftpOp {
 public:
  ListOp(std::string path, const ListOptions& options, SftpPromise p)
      : SftpOp(std::move(p)),
        path_(std::move(path)),
        max_entries_(options.max_entries),
        max_bytes_(options.max_bytes),
        deadline_(Clock::now() + options.timeout) {}

  Clock::time_point deadline() const override {
    return done_ || closing_ ? Clock::time_point::max() : deadline_;
  }

  Step step(SshSession::Impl& io) override {
    if (done_) return Step::kDone;
    if (!acquire(io)) return done_ ? Step::kDone : Step::kIdle;
    if (!closing_ && Clock::now() >= deadline_) {
      if (handle_ == nullptr) {
        auto e = ssh_fail(SshErrc::kTimeout, "list " + path_ + ": the directory did not open");
        return in_flight_ ? finish_discarding(io, e) : finish(io, e);
      }
      result_.truncated = true;
      if (in_flight_) return finish_discarding(io, std::move(result_));
      closing_ = true;
    }
    if (handle_ == nullptr && !closing_) {
      handle_ = libssh2_sftp_open_ex(sftp(io), path_.c_str(), static_cast<unsigned>(path_.size()),
                                     0, 0, LIBSSH2_SFTP_OPENDIR);
      in_flight_ =
          handle_ == nullptr && libssh2_session_last_errno(io.session()) == LIBSSH2_ERROR_EAGAIN;
      if (in_flight_) return Step::kIdle;
      if (handle_ == nullptr)
        return fail_call(io, libssh2_session_last_errno(io.session()), "opendir " + path_);
    }
    char name[1024];
    for (int batch = 0; !closing_; ++batch) {
      if (result_.entries.size() >= max_entries_ || name_bytes_ >= max_bytes_) {
        result_.truncated = true;
        closing_ = true;
        break;
      }
      if (batch == kBatch) return Step::kProgress;
      LIBSSH2_SFTP_ATTRIBUTES attrs{};
      int rc = libssh2_sftp_readdir_ex(handle_, name, sizeof name, nullptr, 0, &attrs);
      in_flight_ = rc == LIBSSH2_ERROR_EAGAIN;
      if (in_flight_) return Step::kIdle;
      if (rc < 0) {
        error_ = sftp_error(io.session(), sftp(io), rc, "readdir " + path_);
        if (is_fatal_session_error(rc)) {
          io.fatal(*error_);
          return Step::kIdle;
        }
        closing_ = true;
        break;
      }
      if (rc == 0) {
        closing_ = true;
        break;
      }
      std::string n(name, static_cast<std::size_t>(rc));
      if (n == "." || n == "..") continue;
      name_bytes_ += n.size();
      result_.entries.push_back(SftpEntry{std::move(n), to_attrs(attrs)});
    }
    int rc = libssh2_sftp_close_handle(handle_);
    if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
    handle_ = nullptr;
    if (error_) return finish(io, tl::unexpected<Error>(std::move(*error_)));
    return finish(io, std::move(result_));
  }

 private:
  static constexpr int kBatch = 256;
  std::string path_;
  std::size_t max_entries_, max_bytes_;
  std::size_t name_bytes_ = 0;
  Clock::time_point deadline_;
  bool closing_ = false;
  std::optional<Error> error_;
  SftpOpResult result_;
};

// Upload: open (create, truncated unless it writes a later chunk) -> [seek to the chunk] ->
// write the source in sftp_buffer_size blocks -> [fsync] -> close. libssh2_sftp_write must be
// called again with the same unacknowledged bytes until the whole block is acknowledged, so the
// block is kept untouched until then.
class UploadOp : public SftpOp {
 public:
  UploadOp(std::string path, const UploadPart& part, Source source, SftpPromise p)
      : SftpOp(std::move(p)), path_(std::move(path)), part_(part), source_(std::move(source)) {}

  Step step(SshSession::Impl& io) override {
    if (done_) return Step::kDone;
    if (!acquire(io)) return done_ ? Step::kDone : Step::kIdle;
    switch (state_) {
      case State::kOpen: {
        const unsigned long flags =
            LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | (part_.truncate ? LIBSSH2_FXF_TRUNC : 0);
        handle_ = libssh2_sftp_open_ex(sftp(io), path_.c_str(), static_cast<unsigned>(path_.size()),
                                       flags, static_cast<long>(part_.mode), LIBSSH2_SFTP_OPENFILE);
        if (handle_ == nullptr) {
          int rc = libssh2_session_last_errno(io.session());
          if (rc == LIBSSH2_ERROR_EAGAIN) {
            sent_ = true;
            return Step::kIdle;
          }
          return fail_call(io, rc, "open " + path_ + " for writing");
        }
        sent_ = true;
        if (part_.offset > 0) libssh2_sftp_seek64(handle_, part_.offset);
        block_ = std::max<std::size_t>(io.config().sftp_buffer_size, 32768);
        buffer_.allocate(2 * block_);
        state_ = State::kWrite;
        [[fallthrough]];
      }
      case State::kWrite: {
        // Keep the pipeline full: whenever less than one block is unacknowledged, append the
        // next block behind it. libssh2 has already copied the sent part into its packets, so
        // the unacknowledged bytes may move to the front of the buffer (same bytes, same
        // order); it only packetizes what lies beyond them.
        if (!source_eof_ && len_ - off_ < block_) {
          if (off_ > 0) {
            std::memmove(buffer_.data(), buffer_.data() + off_, len_ - off_);
            len_ -= off_;
            off_ = 0;
          }
          while (len_ < buffer_.size()) {
            auto n = source_(buffer_.data() + len_, buffer_.size() - len_);
            if (!n) {
              error_ = n.error();
              state_ = State::kClose;
              return Step::kProgress;
            }
            if (*n == 0) {
              source_eof_ = true;
              break;
            }
            len_ += *n;
          }
        }
        if (off_ == len_) {
          if (source_eof_) {
            state_ = part_.fsync ? State::kFsync : State::kClose;
            return Step::kProgress;
          }
          return Step::kProgress;
        }
        ssize_t rc = libssh2_sftp_write(handle_, buffer_.data() + off_, len_ - off_);
        if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
        if (rc < 0) {
          int code = static_cast<int>(rc);
          error_ = sftp_error(io.session(), sftp(io), code, "write " + path_);
          if (is_fatal_session_error(code)) {
            io.fatal(*error_);
            return Step::kIdle;
          }
          state_ = State::kClose;
          return Step::kProgress;
        }
        off_ += static_cast<std::size_t>(rc);
        total_ += static_cast<std::uint64_t>(rc);
        return Step::kProgress;
      }
      case State::kFsync: {
        int rc = libssh2_sftp_fsync(handle_);
        if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
        if (rc != 0 && !error_) error_ = sftp_error(io.session(), sftp(io), rc, "fsync " + path_);
        state_ = State::kClose;
        [[fallthrough]];
      }
      case State::kClose: {
        int rc = libssh2_sftp_close_handle(handle_);
        if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
        handle_ = nullptr;
        if (rc != 0 && !error_) error_ = sftp_error(io.session(), sftp(io), rc, "close " + path_);
        if (error_) return finish(io, tl::unexpected<Error>(std::move(*error_)));
        SftpOpResult r;
        r.bytes = total_;
        return finish(io, std::move(r));
      }
    }
    return Step::kIdle;
  }

 private:
  enum class State { kOpen, kWrite, kFsync, kClose };
  std::string path_;
  UploadPart part_;
  Source source_;
  State state_ = State::kOpen;
  RawBuffer buffer_;
  std::size_t block_ = 0;
  std::size_t len_ = 0;
  std::size_t off_ = 0;
  bool source_eof_ = false;
  std::uint64_t total_ = 0;
  std::optional<Error> error_;
};

// open -> read sftp_buffer_size blocks into the sink -> close, within max_size and timeout.
class DownloadOp : public SftpOp {
 public:
  DownloadOp(std::string path, const DownloadOptions& options, Sink sink, SftpPromise p)
      : SftpOp(std::move(p)),
        path_(std::move(path)),
        max_size_(options.max_size),
        timeout_(options.timeout),
        deadline_(Clock::now() + options.timeout),
        sink_(std::move(sink)) {}

  Clock::time_point deadline() const override {
    return done_ || state_ == State::kClose ? Clock::time_point::max() : deadline_;
  }

  Step step(SshSession::Impl& io) override {
    if (done_) return Step::kDone;
    if (!acquire(io)) return done_ ? Step::kDone : Step::kIdle;
    if (state_ != State::kClose && Clock::now() >= deadline_) {
      Error e = ssh_fail(SshErrc::kTimeout, "download " + path_ + ": not done within " +
                                                std::to_string(timeout_.count()) + " ms")
                    .value();
      if (in_flight_) return finish_discarding(io, tl::unexpected<Error>(std::move(e)));
      if (handle_ == nullptr) return finish(io, tl::unexpected<Error>(std::move(e)));
      error_ = std::move(e);
      state_ = State::kClose;
    }
    if (state_ == State::kOpen) {
      handle_ = libssh2_sftp_open_ex(sftp(io), path_.c_str(), static_cast<unsigned>(path_.size()),
                                     LIBSSH2_FXF_READ, 0, LIBSSH2_SFTP_OPENFILE);
      in_flight_ =
          handle_ == nullptr && libssh2_session_last_errno(io.session()) == LIBSSH2_ERROR_EAGAIN;
      if (in_flight_) return Step::kIdle;
      if (handle_ == nullptr) {
        return fail_call(io, libssh2_session_last_errno(io.session()),
                         "open " + path_ + " for reading");
      }
      buffer_.allocate(std::max<std::size_t>(io.config().sftp_buffer_size, 32768));
      read_size_ = std::min<std::size_t>(buffer_.size(), 64 << 10);
      state_ = State::kRead;
    }
    if (state_ == State::kRead) {
      ssize_t rc = libssh2_sftp_read(handle_, buffer_.data(), read_size_);
      in_flight_ = rc == LIBSSH2_ERROR_EAGAIN;
      if (in_flight_) return Step::kIdle;
      if (rc < 0) {
        int code = static_cast<int>(rc);
        error_ = sftp_error(io.session(), sftp(io), code, "read " + path_);
        if (is_fatal_session_error(code)) {
          io.fatal(*error_);
          return Step::kIdle;
        }
        state_ = State::kClose;
      } else if (rc == 0) {
        state_ = State::kClose;
      } else {
        total_ += static_cast<std::uint64_t>(rc);
        // The file goes on: ask for as much as it has given so far (up to the buffer).
        read_size_ = static_cast<std::size_t>(
            std::min<std::uint64_t>(buffer_.size(), std::max<std::uint64_t>(read_size_, total_)));
        if (total_ > max_size_) {
          error_ = ssh_fail(SshErrc::kTooLarge, "download " + path_ + ": larger than " +
                                                    std::to_string(max_size_) + " bytes")
                       .value();
          state_ = State::kClose;
        } else if (auto st = sink_(std::string_view(buffer_.data(), static_cast<std::size_t>(rc)));
                   !st) {
          error_ = st.error();
          state_ = State::kClose;
        }
        return Step::kProgress;
      }
    }
    int rc = libssh2_sftp_close_handle(handle_);
    if (rc == LIBSSH2_ERROR_EAGAIN) return Step::kIdle;
    handle_ = nullptr;
    if (error_) return finish(io, tl::unexpected<Error>(std::move(*error_)));
    SftpOpResult r;
    r.bytes = total_;
    return finish(io, std::move(r));
  }

 private:
  enum class State { kOpen, kRead, kClose };
  void reset() override {
    state_ = State::kOpen;
    total_ = 0;
  }
  std::string path_;
  std::uint64_t max_size_;
  // What a read asks for: libssh2 requests four times as much ahead, so a small file starts
  // with 64 KiB (a 1 KiB file cost 140 read requests and their replies at 1 MiB), growing with
  // what the file has given up to sftp_buffer_size.
  std::size_t read_size_ = 0;
  std::chrono::milliseconds timeout_;
  Clock::time_point deadline_;
  Sink sink_;
  State state_ = State::kOpen;
  RawBuffer buffer_;
  std::uint64_t total_ = 0;
  std::optional<Error> error_;
};

}  // namespace

std::shared_ptr<Op> make_sftp_call_op(SftpCall call, std::string path, std::string path2,
                                      std::uint32_t mode, SftpPromise promise) {
  return std::make_shared<CallOp>(call, std::move(path), std::move(path2), mode,
                                  std::move(promise));
}

std::shared_ptr<Op> make_list_op(std::string path, const ListOptions& options,
                                 SftpPromise promise) {
  return std::make_shared<ListOp>(std::move(path), options, std::move(promise));
}

std::shared_ptr<Op> make_upload_op(std::string path, const UploadPart& part, Source source,
                                   SftpPromise promise) {
  return std::make_shared<UploadOp>(std::move(path), part, std::move(source), std::move(promise));
}

std::shared_ptr<Op> make_download_op(std::string path, const DownloadOptions& options, Sink sink,
                                     SftpPromise promise) {
  return std::make_shared<DownloadOp>(std::move(path), options, std::move(sink),
                                      std::move(promise));
}

}  // namespace pvs::ssh_detail
