// Internal: the I/O thread that owns one libssh2 session and the operations it drives.
//
// Every libssh2 call happens on the I/O thread (Impl::run). Public SshSession methods build an
// Op, queue it (mutex + eventfd wake-up) and wait on its future. The loop steps every active Op
// with non-blocking libssh2 calls; only when a full pass made no progress does it poll() the
// socket (directions from libssh2_session_block_directions) and the wake-up fd.
#pragma once

#include <libssh2.h>
#include <libssh2_sftp.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "pvesandbox/common/unique_fd.h"
#include "pvesandbox/ssh_session.h"

namespace pvs::ssh_detail {

class WatchdogOp;
using Clock = std::chrono::steady_clock;

// A session's bulk clients (openssh_bulk.h, bulk_clients.cc): the private directory their files
// and the control sockets of the session's OpenSSH masters (one per connection) live in, and
// the clients running. A pid stays listed until just before it is reaped, so stop() never
// reaches a process that is not ours.
class BulkClients {
 public:
  BulkClients() = default;
  ~BulkClients();  // ends the masters, removes the directory
  BulkClients(const BulkClients&) = delete;
  BulkClients& operator=(const BulkClients&) = delete;

  // The control socket, in dir(), of the master for the session's connection `connection`
  // (each its own: a reconnect's transfers do not go through a master the old one made).
  std::string control(std::uint64_t connection);
  // The name in dir() of `connection`'s own file `kind` ("ctl", "known_hosts"): kind-N. Those
  // of every connection control() was asked for are removed with the directory.
  static std::string of_connection(std::string_view kind, std::uint64_t connection);

  // The directory (0700, made on first use, kept until the destructor); "" if it cannot be.
  // `client` is the one that will make the master there (stop() and the destructor end it).
  std::string dir(const std::string& client);
  // Counts the stop() calls; a client started under an older count is killed by add(pid,
  // epoch), so that none started while close() ran outlives it.
  std::uint64_t epoch();
  void add(pid_t pid, std::uint64_t epoch);
  // Before the pid is reaped: true if stop() killed it.
  bool remove(pid_t pid);
  // Kills the running clients and ends the masters (the session's close()).
  void stop();
  // A client did not start: the session's transfers go over SFTP until `until` (each attempt
  // would cost a connection and a login first).
  void pause(std::chrono::steady_clock::time_point until);
  bool paused();

 private:
  void end_masters();  // GUARDED_BY(mu_)

  std::mutex mu_;
  std::map<pid_t, bool> killed_;                    // GUARDED_BY(mu_)
  std::set<std::uint64_t> masters_;                 // GUARDED_BY(mu_): control() handed out
  std::string dir_, client_;                        // GUARDED_BY(mu_)
  std::uint64_t epoch_ = 0;                         // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point paused_{};  // GUARDED_BY(mu_)
};

// Keeps the first and last half of `cap` bytes of a stream and counts all of it.
class CappedBuffer {
 public:
  explicit CappedBuffer(std::size_t cap) : cap_(cap) {}
  void append(std::string_view data);
  std::uint64_t total() const { return total_; }
  bool truncated() const { return total_ > cap_; }
  // head + tail, in stream order.
  std::string take();

 private:
  std::size_t cap_;
  std::uint64_t total_ = 0;
  std::string head_;
  std::string ring_;          // the tail, as a ring buffer once full
  std::size_t ring_pos_ = 0;  // next write position when the ring is full
};

// Error helpers.
bool is_fatal_session_error(int rc);  // the connection is unusable after this return code
Error session_error(LIBSSH2_SESSION* s, int rc, std::string_view what);
Error sftp_error(LIBSSH2_SESSION* s, LIBSSH2_SFTP* sftp, int rc, std::string_view what);
// `digits` random lowercase hex digits (names of temporary files, tokens).
std::string random_hex(int digits);
// Base64 with padding (RFC 4648), as known_hosts lines carry keys.
std::string base64(std::string_view in);
// Gives an error another SSH kind (and the generic code that goes with it).
void retag(Error& e, SshErrc kind);
// Accepts "SHA256:abc", "sha256:abc", "abc", with or without base64 padding.
std::string normalize_fingerprint(std::string_view fp);
// The kind of a failed `mv` from its stderr (coreutils' messages: strerror texts).
SshErrc rename_error_kind(std::string_view err);

}  // namespace pvs::ssh_detail

namespace pvs {

class SshSession::Impl : public std::enable_shared_from_this<SshSession::Impl> {
 public:
  using Clock = ssh_detail::Clock;

  // One unit of work driven by the I/O thread.
  class Op {
   public:
    enum class Step { kIdle, kProgress, kDone };
    virtual ~Op() = default;
    // Non-blocking work. kDone: the op delivered its result and is dropped. A fatal session
    // error is reported through Impl::fatal().
    virtual Step step(Impl& io) = 0;
    // The connection is about to be torn down (its socket is already shut down, so libssh2
    // calls fail fast): free channels/handles this op holds.
    virtual void abandon(Impl& io) = 0;
    // The session is gone (dropped, or closed). Return true to be retried on a new connection
    // (only if may_retry and nothing was sent yet); otherwise deliver `error`. No libssh2 calls.
    virtual bool on_session_lost(const Error& error, bool may_retry) = 0;
    // For the poll timeout.
    virtual Clock::time_point deadline() const { return Clock::time_point::max(); }
    // False while the op would not read from the connection even if data came (a tunnel whose
    // reader's queue is full): when no op wants input, the loop does not wait for the socket
    // to be readable (it would be, with data left for that op, and the loop would spin).
    virtual bool wants_input() const { return true; }
    int retries = 0;
  };

  struct SftpSlot {
    LIBSSH2_SFTP* sftp = nullptr;
    bool busy = false;
  };

  explicit Impl(SshConfig config);
  ~Impl();

  // Caller side (any thread).
  void submit(std::shared_ptr<Op> op);
  Status connect_sync();
  void close();
  bool connected() const { return connected_.load(); }
  // The key the server presented last ("SHA256:..."), whether the policy accepted it or not.
  std::string fingerprint() const;
  // The last key the policy accepted on this connection ("" after a refusal).
  std::string accepted_fingerprint() const {
    std::lock_guard<std::mutex> lock(mu_);
    return accepted_fingerprint_;
  }
  // The host key the policy accepted on the last connection, as the server sent it (SSH wire
  // format; "" after a refusal), and that connection's count (BulkPeer::key_from).
  std::pair<std::string, std::uint64_t> host_key() const;
  // A transfer went through bulk_client (SshStats::bulk_transfers).
  void count_bulk() { bulk_transfers_.fetch_add(1); }
  ssh_detail::BulkClients& bulk_clients() { return bulk_clients_; }
  SshStats stats() const;
  const SshConfig& config() const { return config_; }
  // Wakes the I/O thread (an op's caller-side state changed, e.g. pty input queued).
  void notify() { wake(); }

  // I/O-thread side, used by the ops.
  LIBSSH2_SESSION* session() const { return session_; }
  // The session-wide "opening" state (channel open, sftp init) is single-flight in libssh2.
  bool try_take_opener(const Op* op);
  void release_opener(const Op* op);
  // Channel accounting: reserve before opening, release after freeing / on failure.
  bool try_reserve_channel();
  void release_channel();
  // The server refused a channel. True if the opener should wait for a slot and retry: channels
  // are open (their count is the server's limit, learned once), or none are and sshd is most
  // likely still counting one we closed (it frees a session after the client has seen its
  // channel close); `lag_retries` bounds the latter per opener.
  bool refusal_is_busy(int& lag_retries);
  int channels_open() const { return channels_open_; }
  // Bumped whenever a channel is released (a refused opener waits for this to change).
  std::uint64_t release_epoch() const { return release_epoch_; }
  // True if the server has closed the TCP connection (EOF is the next thing on the socket).
  bool peer_closed() const;
  // A channel opened ahead of time (its slot is already reserved), or nullptr.
  LIBSSH2_CHANNEL* take_spare();
  // SFTP instance pool. Returns a slot index, -1 while waiting, or an error.
  Result<int> acquire_sftp(const Op* op);
  LIBSSH2_SFTP* sftp(int slot) const { return sftp_slots_[static_cast<std::size_t>(slot)].sftp; }
  void release_sftp(int slot);
  // An SFTP instance an op left with a request in flight (its timeout): libssh2 keeps that
  // request's state per instance, so it is shut down in the background, never reused.
  void discard_sftp(int slot);
  // Shuts down one idle SFTP instance (true if there was one), so that a channel waiting for a
  // slot gets it once that instance's channel is closed: instances are kept open for reuse and
  // must not keep a command from running when the connection is at its channel limit.
  bool reclaim_idle_sftp();
  int idle_sftp() const;  // the slot of an open instance no op holds, or -1
  // Report that the connection is unusable; the loop tears it down after this pass.
  void fatal(Error error);
  // Channels whose command is abandoned (after a timeout): closed and freed in the background.
  void adopt_zombie(LIBSSH2_CHANNEL* channel, bool counted = true);
  // Queue an internal op from the I/O thread (e.g. the kill after a timeout).
  void spawn(std::shared_ptr<Op> op) { spawned_.push_back(std::move(op)); }
  // Any thread: an op has new work queued from outside (a PTY write): step the ops again.
  void poke() { wake(); }
  std::uint64_t session_generation() const { return generation_; }
  // The session's watchdog (ssh_watchdog.cc): one process per connection in the sandbox that
  // kills a timed command's process group at its guard time should this controller be gone.
  // watch registers a group (its leader's pid) with its guard, counted from the leader's start,
  // and starts the watchdog if the connection has none; unwatch lets it go (the leader ended);
  // yield_watchdog asks it to give its channel up to a waiting command; resume_watchdog (a
  // command's channel was freed) starts it again if it gave way with a registration queued.
  void watch(long pgid, int guard_seconds);
  void unwatch(long pgid);
  void yield_watchdog();
  void resume_watchdog();
  // The watchdog's side: the registrations queued for it, as lines, and a count of how many it
  // delivered.
  void take_watch_lines(std::string* out);
  void count_watched(std::uint64_t n) { watched_.fetch_add(n, std::memory_order_relaxed); }

 private:
  void ensure_watchdog();  // one running or starting
  void ensure_thread();    // REQUIRES: mu_ held
  void run();
  bool step_ops();
  bool send_keepalive();
  void wait_for_work(bool* idle_data_pending);
  Status do_connect();
  Status open_socket(const std::string& where, Clock::time_point deadline);  // sets sock_
  void start_session_timers();
  Status verify_host_key();
  Status authenticate();
  Status wait_socket(Clock::time_point deadline, const char* stage);  // stage: for the error
  void teardown(bool graceful);
  void fail_all(const Error& error, bool allow_retry);
  void reap_zombies();
  bool step_spare();  // opens spare channels while nothing else needs the opener
  void wake();

  SshConfig config_;

  // Shared with callers.
  mutable std::mutex mu_;
  std::deque<std::shared_ptr<Op>> queue_;  // GUARDED_BY(mu_)
  bool stop_ = false;                      // GUARDED_BY(mu_)
  std::thread thread_;                     // GUARDED_BY(mu_)
  std::string fingerprint_;                // GUARDED_BY(mu_)
  std::string host_key_;                   // GUARDED_BY(mu_)
  // The connection host_key_ is of: counted with it, under mu_ (generation_ is the I/O thread's).
  std::uint64_t key_from_ = 0;        // GUARDED_BY(mu_)
  std::string accepted_fingerprint_;  // GUARDED_BY(mu_)
  std::string tofu_fingerprint_;      // GUARDED_BY(mu_): the key trusted first
  std::string methods_;               // GUARDED_BY(mu_)
  UniqueFd wake_fd_;
  std::atomic<bool> connected_{false};
  std::atomic<std::uint64_t> connects_{0};
  std::atomic<std::uint64_t> keepalives_{0};
  std::atomic<std::uint64_t> bulk_transfers_{0};
  ssh_detail::BulkClients bulk_clients_;
  std::atomic<int> stat_channels_open_{0};
  std::atomic<int> stat_channel_limit_{0};
  std::atomic<std::uint64_t> watched_{0};

 public:
  // libssh2's allocations for the current connection: counted (stats) and linked in a list
  // so that teardown can free what libssh2 1.10 itself forgets to free (e.g. state of a channel
  // open or disconnect that was in flight). The allocator callbacks reach this through the
  // abstract pointer; they only run on the I/O thread.
  struct AllocHeader {
    AllocHeader* prev;
    AllocHeader* next;
    std::size_t size;
    std::size_t pad;  // keeps the payload 16-byte aligned
  };
  AllocHeader alloc_list_{&alloc_list_, &alloc_list_, 0, 0};
  std::atomic<std::int64_t> live_allocations_{0};
  void free_leftover_allocations();
  // Bytes libssh2 read from the socket (its recv callback counts them; I/O thread only). A
  // read for one channel can queue packets for another that was already stepped: the loop
  // steps again instead of polling when this moved.
  std::uint64_t bytes_in_ = 0;

 private:
  // I/O thread only.
  UniqueFd sock_;
  LIBSSH2_SESSION* session_ = nullptr;
  std::uint64_t generation_ = 0;
  std::vector<std::shared_ptr<Op>> active_;
  std::vector<std::shared_ptr<Op>> spawned_;
  const Op* opener_ = nullptr;
  int channels_open_ = 0;
  int channel_limit_ = 0;
  std::uint64_t release_epoch_ = 0;
  bool limit_learned_ = false;
  bool sftp_refused_ = false;
  std::uint64_t sftp_refused_epoch_ = 0;
  Clock::time_point sftp_retry_at_{};
  int sftp_lag_retries_ = 0;
  std::vector<SftpSlot> sftp_slots_;         // a discarded one has sftp == nullptr until reused
  std::vector<LIBSSH2_SFTP*> sftp_zombies_;  // discarded, being shut down (channel counted)
  std::vector<std::pair<LIBSSH2_CHANNEL*, bool>> zombies_;  // channel, counted in channels_open_
  std::vector<LIBSSH2_CHANNEL*> spares_;
  bool spare_opening_ = false;
  bool spares_disabled_ = false;
  char spare_token_ = 0;  // its address marks the opener as taken by step_spare()
  bool fatal_pending_ = false;
  Error fatal_error_;
  Clock::time_point next_keepalive_ = Clock::time_point::max();
  std::shared_ptr<ssh_detail::WatchdogOp> watchdog_;
  std::vector<std::pair<long, int>> watch_queue_;  // (pgid, guard seconds; 0: let go)
};

// Op factories (ssh_exec.cc, ssh_sftp.cc).
namespace ssh_detail {

// `done` gets the result or the error, once; `inflight` (optional) is decremented just before.
std::shared_ptr<SshSession::Impl::Op> make_exec_op(
    std::string remote_command, ExecOptions options, ExecDone done,
    std::shared_ptr<std::atomic<int>> inflight = nullptr);

// An interactive pty channel (ssh_pty.cc); `started` gets the start's outcome.
std::shared_ptr<SshSession::Impl::Op> make_pty_op(std::string remote_command, PtyOptions options,
                                                  std::shared_ptr<PtyChannel::Shared> shared,
                                                  std::shared_ptr<std::promise<Status>> started);

// A direct-tcpip channel (ssh_tunnel.cc); `opened` gets the open's outcome.
std::shared_ptr<SshSession::Impl::Op> make_tunnel_op(TunnelOptions options,
                                                     std::shared_ptr<TcpTunnel::Shared> shared,
                                                     std::shared_ptr<std::promise<Status>> opened);

// A source yields up to n bytes into buf and returns how many (0 at the end).
using Source = std::function<Result<std::size_t>(char* buf, std::size_t n)>;
using Sink = std::function<Status(std::string_view data)>;
// The bytes of `data`, which must outlive the source.
Source source_of(std::string_view data);

struct SftpOpResult {
  std::uint64_t bytes = 0;
  SftpAttributes attrs;
  std::vector<SftpEntry> entries;
  bool truncated = false;
  std::string path;  // kRealpath
};
using SftpPromise = std::shared_ptr<std::promise<Result<SftpOpResult>>>;

enum class SftpCall {
  kStat,
  kLstat,
  kMkdir,
  kUnlink,
  kRmdir,
  kRename,
  kStatvfsFree,
  kRealpath,  // the canonical absolute path, symbolic links resolved (SSH_FXP_REALPATH)
  kChmod,     // the permission bits of path to mode (SSH_FXP_SETSTAT)
  // path -> path2 by posix-rename@openssh.com: rename(2), replacing path2 (libssh2 >= 1.11;
  // older ones fail it with kProtocol)
  kReplace
};
std::shared_ptr<SshSession::Impl::Op> make_sftp_call_op(SftpCall call, std::string path,
                                                        std::string path2, std::uint32_t mode,
                                                        SftpPromise promise);
std::shared_ptr<SshSession::Impl::Op> make_list_op(std::string path, const ListOptions& options,
                                                   SftpPromise promise);
// What an upload op writes: the file is created with `mode` if missing; `truncate` empties it
// first (a whole file, or the creation before a chunked upload); the source's bytes go to the
// file from `offset` on.
struct UploadPart {
  std::uint32_t mode = 0644;
  std::uint64_t offset = 0;
  bool truncate = true;
  bool fsync = false;  // fsync@openssh.com before the close
};
std::shared_ptr<SshSession::Impl::Op> make_upload_op(std::string path, const UploadPart& part,
                                                     Source source, SftpPromise promise);
std::shared_ptr<SshSession::Impl::Op> make_download_op(std::string path,
                                                       const DownloadOptions& options, Sink sink,
                                                       SftpPromise promise);

// Submits the op `make` builds around a fresh promise to `impl` and waits for its result.
Result<SftpOpResult> run_sftp_op(
    SshSession::Impl& impl,
    const std::function<std::shared_ptr<SshSession::Impl::Op>(SftpPromise)>& make);

// Large uploads (ssh_transfer.cc): a source longer than SshConfig::transfer_chunk goes in
// chunks of that size, each on the next free one of the connections `connections(n)` returns
// (at most n, the session's own first; called once an upload turns out to need more than one
// chunk and the budget allows n workers).
using Connections = std::function<std::vector<std::shared_ptr<SshSession::Impl>>(int at_most)>;
// Makes the directory an upload goes into (UploadOptions::create_parents).
using MakeParent = std::function<Status()>;
// Writes `source` to `path` (created with `part.mode`, truncated; fsync'd when `part.fsync`);
// the number of bytes written. With `make_parent`, an open that finds no parent directory makes
// it and opens once more (the parent is there more often than not: no round trip asks first).
Result<std::uint64_t> chunked_upload(SshSession::Impl& first, const Connections& connections,
                                     const std::string& path, const UploadPart& part, Source source,
                                     const MakeParent& make_parent);

}  // namespace ssh_detail
}  // namespace pvs
