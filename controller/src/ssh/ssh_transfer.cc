// Large uploads in chunks over several connections (SshConfig::transfer_chunk and
// transfer_connections; docs/ssh.md, "Large uploads").
//
// One SFTP upload keeps at most its channel's window in flight (OpenSSH's sshd grants 2 MiB),
// so over a link with a round trip it is bound by window / round trip, whatever the cores (and
// OpenSSH's `sftp` is bound the same way). A source longer than a chunk is split instead: one
// worker per connection takes the next chunk (read from the source in order, under a lock, so a
// stream that cannot seek works), writes it at its offset with an op of its own (open, seek,
// write, close) and takes the next, so faster connections take more chunks. The first chunk
// decides: a source that ends within it is written by one op, as before; so is one that finds no
// room in the process's budget for chunks (transfer_memory). Downloads stay one
// stream: libssh2 reads four buffers ahead, more than `sftp` keeps in flight, and chunks only
// cost (measured in docs/ssh.md).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "openssh_bulk.h"
#include "session_impl.h"

namespace pvs::ssh_detail {
namespace {

using Impl = SshSession::Impl;

Result<std::uint64_t> upload_op(Impl& conn, const std::string& path, const UploadPart& part,
                                Source source) {
  auto r = run_sftp_op(conn, [&](SftpPromise p) {
    return make_upload_op(path, part, std::move(source), std::move(p));
  });
  if (!r) return tl::unexpected<Error>(r.error());
  return r->bytes;
}

Result<std::size_t> nothing(char*, std::size_t) {
  return 0;
}

// An upload's first op: where its open finds no parent directory (SFTP's "no such file"; OpenSSH
// says so for a parent that is a file too) and `make_parent` is given, makes it and runs the op
// once more, on the same source: an op reads nothing of it before its open succeeds, and the
// retry happens only if the source was indeed not read.
Result<std::uint64_t> first_op(Impl& conn, const std::string& path, const UploadPart& part,
                               Source source, const MakeParent& make_parent) {
  if (!make_parent) return upload_op(conn, path, part, std::move(source));
  auto shared = std::make_shared<Source>(std::move(source));
  auto read = std::make_shared<bool>(false);
  Source tracked = [shared, read](char* buf, std::size_t n) {
    *read = true;
    return (*shared)(buf, n);
  };
  auto r = upload_op(conn, path, part, tracked);
  if (r || *read || !r.error().is(SshErrc::kNoSuchFile)) return r;
  if (auto made = make_parent(); !made) return tl::unexpected<Error>(made.error());
  return upload_op(conn, path, part, std::move(tracked));
}

// Fills `into` with up to `chunk` bytes of `source` (fewer only at its end).
Status read_chunk(const Source& source, std::size_t chunk, std::string& into) {
  into.resize(chunk);
  std::size_t got = 0;
  while (got < chunk) {
    auto n = source(into.data() + got, chunk - got);
    if (!n) return tl::unexpected<Error>(n.error());
    if (*n == 0) break;
    got += *n;
  }
  into.resize(got);
  return {};
}

// The upload's source, handed out one chunk at a time; the first failure stops every worker.
class Chunks {
 public:
  // `source` has already given `offset` bytes (the first chunk).
  Chunks(Source source, std::size_t chunk, std::uint64_t offset)
      : source_(std::move(source)), chunk_(chunk), offset_(offset) {}

  // The next chunk into `into` and its offset; an empty chunk when the source is done or a
  // worker failed.
  Result<std::uint64_t> next(std::string& into) {
    std::lock_guard<std::mutex> lock(mu_);
    into.clear();
    if (failed_ || done_) return offset_;
    if (auto st = read_chunk(source_, chunk_, into); !st) {
      failed_ = true;
      return tl::unexpected<Error>(st.error());
    }
    done_ = into.size() < chunk_;
    std::uint64_t at = offset_;
    offset_ += into.size();
    return at;
  }
  void fail() {
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = true;
  }
  std::uint64_t total() const {
    std::lock_guard<std::mutex> lock(mu_);
    return offset_;
  }

 private:
  mutable std::mutex mu_;
  Source source_;
  const std::size_t chunk_;
  std::uint64_t offset_;  // GUARDED_BY(mu_)
  bool done_ = false;     // GUARDED_BY(mu_)
  bool failed_ = false;   // GUARDED_BY(mu_)
};

Status upload_worker(Impl& conn, Chunks& chunks, const std::string& path, UploadPart part,
                     std::string first) {
  part.truncate = false;
  part.fsync = false;
  std::string bytes = std::move(first);
  std::uint64_t offset = 0;
  for (;;) {
    if (bytes.empty()) {
      auto at = chunks.next(bytes);
      if (!at) return tl::unexpected<Error>(at.error());
      if (bytes.empty()) return {};
      offset = *at;
    }
    part.offset = offset;
    if (auto r = upload_op(conn, path, part, source_of(bytes)); !r) {
      chunks.fail();
      return tl::unexpected<Error>(r.error());
    }
    bytes.clear();
  }
}

// `head`, then the rest of `rest`.
Source then(std::string head, Source rest) {
  auto bytes = std::make_shared<std::string>(std::move(head));
  return [bytes, first = source_of(*bytes), rest = std::move(rest)](
             char* buf, std::size_t n) -> Result<std::size_t> {
    auto k = first(buf, n);
    if (!k || *k > 0) return k;
    return rest(buf, n);
  };
}

// The bytes every chunked upload of the process holds in chunks (SshConfig::transfer_memory):
// a burst of large uploads must not hold transfer_connections chunks each without bound.
std::atomic<std::uint64_t> g_chunk_bytes{0};

// Chunks taken from that budget, given back when it goes.
class ChunkBudget {
 public:
  ChunkBudget(std::size_t chunk, std::uint64_t limit) : chunk_(chunk), limit_(limit) {}
  ~ChunkBudget() { g_chunk_bytes.fetch_sub(held_ * chunk_); }
  ChunkBudget(const ChunkBudget&) = delete;
  ChunkBudget& operator=(const ChunkBudget&) = delete;

  std::uint64_t held() const { return held_; }
  // Takes up to `n` chunks; how many it got.
  int take(int n) {
    int got = 0;
    std::uint64_t used = g_chunk_bytes.load();
    while (got < n) {
      if (used + chunk_ > limit_) break;
      if (!g_chunk_bytes.compare_exchange_weak(used, used + chunk_)) continue;
      used += chunk_;
      ++got;
    }
    held_ += static_cast<std::uint64_t>(got);
    return got;
  }

 private:
  const std::size_t chunk_;
  const std::uint64_t limit_;
  std::uint64_t held_ = 0;
};

// Reads up to `chunk` bytes of `source` into `head`, growing it as they come (a small upload
// allocates what it is). Beyond 2 MiB (what one stream's op holds anyway) the head needs a chunk
// of the budget: without one it stops there and says false (the upload is then one stream).
Result<bool> read_head(const Source& source, std::size_t chunk, ChunkBudget& budget,
                       std::string& head) {
  constexpr std::size_t kSmall = 2 << 20;
  std::size_t cap = std::min(chunk, std::size_t{64} << 10);
  while (head.size() < chunk) {
    if (head.size() == cap) {
      const std::size_t next = std::min(chunk, 2 * cap);
      if (next > kSmall && budget.held() == 0 && budget.take(1) == 0) return false;
      cap = next;
    }
    const std::size_t at = head.size();
    head.resize(cap);
    auto n = source(head.data() + at, cap - at);
    if (!n) return tl::unexpected<Error>(n.error());
    head.resize(at + *n);
    if (*n == 0) break;
  }
  return true;
}

// Creates (or empties) the file before bytes land in it apart from the op that creates it.
Status create_empty(Impl& first, const std::string& path, const UploadPart& part,
                    const MakeParent& make_parent) {
  UploadPart create = part;
  create.fsync = false;
  auto r = first_op(first, path, create, nothing, make_parent);
  if (!r) return tl::unexpected<Error>(r.error());
  return {};
}

// fsync@openssh.com of the written file, when `part` asks for it.
Status sync_if_asked(Impl& first, const std::string& path, const UploadPart& part) {
  if (!part.fsync) return {};
  UploadPart sync = part;
  sync.truncate = false;
  auto r = upload_op(first, path, sync, nothing);
  if (!r) return tl::unexpected<Error>(r.error());
  return {};
}

// Through bulk_client (openssh_bulk.h): the file is created (or emptied) over SFTP, its bytes
// go through the client, and the fsync is SFTP's again. nullopt when the client did not start
// (then nothing of `source` was read).
Result<std::optional<std::uint64_t>> bulk(Impl& first, const std::string& path,
                                          const UploadPart& part, std::string_view head,
                                          const Source& source, const MakeParent& make_parent) {
  if (auto st = create_empty(first, path, part, make_parent); !st)
    return tl::unexpected<Error>(st.error());
  auto r = bulk_upload(bulk_peer(first), path, head, source);
  if (!r || !*r) return r;
  first.count_bulk();
  if (auto st = sync_if_asked(first, path, part); !st) return tl::unexpected<Error>(st.error());
  return r;
}

// Writes that open the file again after its creation (the bulk client's shell, the chunks' ops)
// need the owner's write bit: the file is made with it, and given `mode` once written.
Result<std::uint64_t> given_mode(Impl& first, const std::string& path, std::uint32_t mode,
                                 Result<std::uint64_t> written) {
  if (!written || (mode & 0200) != 0) return written;
  auto r = run_sftp_op(first, [&](SftpPromise p) {
    return make_sftp_call_op(SftpCall::kChmod, path, "", mode, std::move(p));
  });
  if (!r) return tl::unexpected<Error>(r.error());
  return written;
}

// Runs `work(conn, index)` for every connection at once, the first on the calling thread; the
// first error, if any.
template <typename Work>
Status on_each(const std::vector<std::shared_ptr<Impl>>& conns, Work work) {
  std::vector<Status> results(conns.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < conns.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = work(*conns[i], i); });
  }
  results[0] = work(*conns[0], 0);
  for (auto& t : threads) t.join();
  for (auto& r : results) {
    if (!r) return r;
  }
  return {};
}

}  // namespace

Source source_of(std::string_view data) {
  auto pos = std::make_shared<std::size_t>(0);
  return [data, pos](char* buf, std::size_t n) -> Result<std::size_t> {
    std::size_t k = std::min(n, data.size() - *pos);
    std::memcpy(buf, data.data() + *pos, k);
    *pos += k;
    return k;
  };
}

Result<std::uint64_t> chunked_upload(Impl& first, const Connections& connections,
                                     const std::string& path, const UploadPart& part, Source source,
                                     const MakeParent& make_parent) {
  const SshConfig& cfg = first.config();
  const std::size_t chunk = cfg.transfer_chunk;
  if (chunk == 0 || (cfg.transfer_connections <= 1 && !bulk_enabled(cfg))) {
    return first_op(first, path, part, std::move(source), make_parent);
  }
  // The first chunk, and one more per further connection, as far as the process's budget for
  // chunks allows; without room for two, the upload is one stream.
  ChunkBudget budget(chunk, cfg.transfer_memory);
  std::string head;
  auto room = read_head(source, chunk, budget, head);
  if (!room) return tl::unexpected<Error>(room.error());
  if (head.size() < chunk && *room)
    return first_op(first, path, part, source_of(head), make_parent);
  UploadPart writable = part;
  writable.mode |= 0200;
  if (head.size() == chunk && bulk_enabled(cfg)) {
    auto r = bulk(first, path, writable, head, source, make_parent);
    if (!r) return tl::unexpected<Error>(r.error());
    if (*r) return given_mode(first, path, part.mode, **r);
  }
  const int more = *room && (budget.held() > 0 || budget.take(1) == 1)
                       ? budget.take(cfg.transfer_connections - 1)
                       : 0;
  if (more == 0)
    return first_op(first, path, part, then(std::move(head), std::move(source)), make_parent);
  // Longer than a chunk: create (or empty) the file before any chunk lands in it.
  if (auto st = create_empty(first, path, writable, make_parent); !st)
    return tl::unexpected<Error>(st.error());
  Chunks chunks(std::move(source), chunk, head.size());
  const auto conns = connections(1 + more);
  auto st = on_each(conns, [&](Impl& conn, std::size_t i) {
    return upload_worker(conn, chunks, path, writable, i == 0 ? std::move(head) : std::string());
  });
  if (!st) return tl::unexpected<Error>(st.error());
  if (auto s = sync_if_asked(first, path, part); !s) return tl::unexpected<Error>(s.error());
  return given_mode(first, path, part.mode, chunks.total());
}

}  // namespace pvs::ssh_detail
