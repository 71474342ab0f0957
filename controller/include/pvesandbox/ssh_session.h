// SshSession: command execution and SFTP on one sandbox over one SSH connection (libssh2).
//
//   pvs::SshConfig cfg;
//   cfg.host = "10.99.0.7";
//   cfg.user = "sandbox";
//   cfg.private_key_file = "/etc/pve-sandbox/id_ed25519";
//   cfg.host_key_policy = pvs::HostKeyPolicy::kPinned;
//   cfg.host_key_fingerprint = "SHA256:5vHQlfSs+AX/CB9+YuT0jICdx9Gam/Q7CGLQpeBuwrw";
//   pvs::SshSession ssh(cfg);
//   auto r = ssh.exec("uname -a", {.timeout = std::chrono::seconds(10)});
//   if (r) use(r->exit_code, r->out, r->err);
//
// Threading model (see docs/ssh.md): libssh2 sessions are not thread-safe, so each SshSession
// owns ONE I/O thread, and only that thread ever touches the libssh2 session, its channels and
// its SFTP handles. Public methods are thread-safe: they queue an operation for the I/O thread
// and wait for its result. The I/O thread runs every channel in non-blocking mode and polls the
// socket only when no channel can make progress, so a long command never blocks a short one and
// stdout/stderr are always drained together (no window deadlock). Up to `max_channels` channels
// run at once; more wait in a queue. The thread starts with the first connection and stops in
// close() or the destructor.
//
// Errors: a non-zero exit status is a result, not an error. Everything else (cannot connect,
// host key mismatch, auth refused, connection lost, SFTP failures, ...) is a pvs::Error with a
// generic code and the SSH-specific kind in Error::ssh (`r.error().is(SshErrc::kNoSuchFile)`).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/ssh_pty.h"
#include "pvesandbox/ssh_tunnel.h"

namespace pvs {

class PtyChannel;  // pvesandbox/ssh_pty.h
struct PtyOptions;
struct PtyCallbacks;

// Stable lower-case name, e.g. "host_key_mismatch".
std::string_view to_string(SshErrc kind);
// The generic code a kind maps to (kHostKeyMismatch -> kPermissionDenied, ...).
ErrorCode error_code_for(SshErrc kind);

// Builds the error side of a Result: the SSH kind in Error::ssh and the generic code that goes
// with it. `return ssh_fail(SshErrc::kAuthFailed, "...");` Callers test `error.is(kind)`.
tl::unexpected<Error> ssh_fail(SshErrc kind, std::string message);

enum class HostKeyPolicy {
  kPinned,           // host_key_fingerprint must equal the server key's "SHA256:..." fingerprint
  kKnownHosts,       // the server key must be listed for [host]:port in known_hosts_file
  kTrustOnFirstUse,  // accept the first key seen, refuse any other afterwards (see below)
  kInsecure,         // accept any key; logs a warning on every connection
};

struct SshConfig {
  std::string host;  // IPv4/IPv6 literal or name
  std::uint16_t port = 22;
  std::string user = "root";

  // The client key: an ed25519 (or ECDSA) private key in OpenSSH or PEM format, from a file or
  // from memory (exactly one of the two). RSA keys are refused up front with kKeyUnsupported.
  std::string private_key_file;
  std::string private_key;  // the key text itself
  std::string passphrase;   // empty: unencrypted key

  HostKeyPolicy host_key_policy = HostKeyPolicy::kPinned;
  std::string host_key_fingerprint;  // kPinned: "SHA256:<base64, no padding>" (ssh-keygen -lf)
  // kKnownHosts: the OpenSSH known_hosts file to check (plain or hashed entries).
  // kTrustOnFirstUse: optional; where the first key is remembered (appended in known_hosts
  // format, so it survives restarts). Empty: remembered in this SshSession only, across
  // reconnects; seed it with host_key_fingerprint to continue an earlier trust.
  std::string known_hosts_file;
  // Host key algorithm preference. libssh2 would pick ECDSA if offered; pinning ed25519 keeps
  // the fingerprint stable. Sandboxes must have an ed25519 host key.
  std::string host_key_algorithms = "ssh-ed25519";
  // Ciphers to offer before the rest of the linked libssh2's, comma-separated, most preferred
  // first; ones the library lacks are skipped. Empty: chacha20-poly1305@openssh.com, then
  // aes256-gcm@openssh.com and aes128-gcm@openssh.com (ssh_detail::cipher_preference).
  std::string prefer_ciphers;

  std::chrono::milliseconds connect_timeout{10000};  // TCP connect + handshake + auth
  // SSH keepalive (want_reply=0, sent by the I/O thread) to keep NAT/conntrack state alive;
  // dead peers are detected by TCP keepalive and TCP_USER_TIMEOUT (dead_peer_timeout). 0: off.
  std::chrono::seconds keepalive_interval{15};
  std::chrono::seconds dead_peer_timeout{60};

  // Channels open at once on this connection (execs + SFTP). The sandbox sshd's MaxSessions
  // must be at least this (the template sets 64); if the server refuses earlier, the session
  // learns the real limit and queues. SFTP instances count too.
  int max_channels = 32;
  // Channels opened ahead of time while idle, so that an exec skips the channel-open round
  // trip. They count against max_channels / MaxSessions (one slot is always left free).
  int spare_channels = 1;
  // SFTP subsystem channels kept open; each SFTP operation borrows one for its duration, so this
  // many transfers run in parallel.
  int max_sftp_channels = 4;
  // Connections execs may use. sshd handles the requests of one connection in one process and
  // forks every command there one after another, so a burst of execs on one connection is
  // bounded by that process. With more than 1, up to exec_connections - 1 further connections
  // are opened in the background once execs pile up (2 or more running on every open one) and
  // kept until close(); each exec then goes to the least busy connected one. The first
  // connection carries everything else (SFTP, stats). 1: a single connection.
  int exec_connections = 3;
  // Bytes handed to each libssh2_sftp_read/write call: the pipeline depth is about this /30000.
  std::size_t sftp_buffer_size = 1 << 20;
  // An upload longer than transfer_chunk bytes goes in chunks of that size over up to
  // transfer_connections connections at once (this one and the extras execs also use, opened
  // for it when missing): one SFTP channel keeps at most its window (2 MiB with OpenSSH) in
  // flight, so over a link with a round trip one upload is bound by window / round trip; chunks
  // on several connections multiply that (docs/ssh.md, "Large uploads"). The source is still
  // read once, in order; each connection holds one chunk in memory. Downloads are one stream.
  // 1 (or a chunk of 0): every upload is one stream on this connection.
  int transfer_connections = 4;
  std::size_t transfer_chunk = 16 << 20;
  // What all chunked uploads of the process may hold in chunks at once (each session checks
  // against its own value): an upload gets as many connections as chunks fit, and one that
  // finds no room for two goes as one stream (in bounded memory, as before). 0: never chunks.
  std::uint64_t transfer_memory = std::uint64_t{256} << 20;
  // OpenSSH's client, which carries the bytes of a transfer of at least transfer_chunk (an
  // upload longer than one, a download of a file as long) on a connection of its own: libcrypto's
  // ciphers cost both ends a fraction of libssh2's per byte (docs/ssh.md, "Bulk bytes through
  // OpenSSH"). SFTP still does the rest (the file's creation and mode, fsync, the rename, the
  // typed errors). It trusts only the host key this session verified, reads no configuration
  // and forwards nothing. When it cannot start (not installed, a key with a passphrase, a key
  // it refuses), the transfer goes over SFTP as before, and the log says why once. Empty: never.
  std::string bulk_client = "/usr/bin/ssh";

  // After an exec timeout the process group is killed; wait this long for the channel to close
  // before returning the partial result anyway.
  std::chrono::milliseconds kill_grace{3000};
};

enum class ExecStream { kStdout, kStderr };

struct ExecOptions {
  // Bytes written to the command's stdin, which is then closed (also when empty, so that `cat`
  // does not wait forever).
  std::string stdin_data;
  // Exported before the command runs. Names must match [A-Za-z_][A-Za-z0-9_]*.
  std::vector<std::pair<std::string, std::string>> env;
  // Working directory; empty: the login directory. A missing directory fails the command with
  // exit code 126 and a message on stderr.
  std::string cwd;
  // 0: no limit. Counted from the call (time spent waiting for a free channel included). When
  // it passes, the command's whole process group is killed with SIGKILL (a second channel runs
  // kill) and the output so far is returned with timed_out = true. If this controller is gone,
  // a remote watchdog started beside the command kills the group timeout + 10 s after the
  // start; it ends within a second after the command. Processes that leave the group (setsid)
  // survive.
  std::chrono::milliseconds timeout{0};
  // Per stream: at most this many bytes are kept; when more arrive, the first half and the last
  // half of the cap are kept, `truncated` is set and the totals count everything.
  std::size_t max_output = 16 << 20;
  // Called on the session's I/O thread with each chunk as it arrives (stdout and stderr
  // separately, in arrival order). Keep it short and never call back into this SshSession from
  // it (that would wait for the very thread that runs the callback). If it throws, it is not
  // called again (the output is still collected).
  std::function<void(ExecStream, std::string_view)> on_output;
};

struct ExecResult;
// Called once with an exec's result (SshSession::exec_then).
using ExecDone = std::function<void(Result<ExecResult>)>;

struct ExecResult {
  int exit_code = -1;           // the exit status; -1 when the command died of a signal
  std::string exit_signal;      // "KILL", "TERM", ... (no "SIG" prefix); empty if exited normally
  std::string out;              // stdout (head + tail when truncated)
  std::string err;              // stderr (idem)
  std::uint64_t out_total = 0;  // bytes the command wrote to stdout
  std::uint64_t err_total = 0;
  bool truncated = false;  // out or err lost bytes to max_output
  bool timed_out = false;
  std::chrono::microseconds duration{0};
};

// One file's attributes, as far as the server reported them.
struct SftpAttributes {
  std::uint64_t size = 0;
  std::uint32_t mode = 0;  // type and permission bits, as st_mode
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::int64_t mtime = 0;  // seconds since the epoch
  bool is_dir() const { return (mode & 0170000) == 0040000; }
  bool is_regular() const { return (mode & 0170000) == 0100000; }
  bool is_symlink() const { return (mode & 0170000) == 0120000; }
};

struct SftpEntry {
  std::string name;  // without the directory; "." and ".." are left out
  SftpAttributes attrs;
};

// A listing stops at max_entries or when its timeout is over, and says so: a directory that a
// sandbox filled with millions of names holds neither the caller's memory nor the session.
struct ListOptions {
  std::size_t max_entries = 10000;
  std::size_t max_bytes = 4 << 20;  // of names
  std::chrono::milliseconds timeout{30000};
};

struct DirListing {
  std::vector<SftpEntry> entries;  // in the server's order
  bool truncated = false;          // cut short by max_entries, max_bytes or the timeout
};

struct UploadOptions {
  std::uint32_t mode = 0644;
  bool create_parents = false;  // mkdir -p the parent directory first (mode 0755)
  // Write to a temporary name beside the target, then rename over it (posix-rename@openssh.com
  // where libssh2 has it, else mv -fT, since SFTPv3 rename cannot replace a file): readers see
  // the old or the new file, never a partial one.
  bool atomic = true;
  bool fsync = false;  // fsync@openssh.com before the rename
  // Called once the content is written, before the rename (or the return when not atomic):
  // an error leaves the target untouched (the temporary file is removed) and is returned.
  std::function<Status()> before_rename;
};

struct DownloadOptions {
  std::uint64_t max_size = UINT64_MAX;  // fail with kTooLarge beyond this
  // Fail with kTimeout when the file is not read by then (the sandbox controls its sftp-server
  // and could trickle a file forever).
  std::chrono::milliseconds timeout{std::chrono::hours(1)};
};

// Counters for tests and metrics.
struct SshStats {
  std::uint64_t connects = 0;  // successful connections (1 + reconnects)
  std::uint64_t keepalives_sent = 0;
  std::int64_t libssh2_live_allocations = 0;  // of the current connection (leak watch)
  int channels_open = 0;
  int channel_limit = 0;     // learnt from the server's refusals, else max_channels
  int exec_connections = 1;  // connections open (the first + the extras execs and uploads use)
  // Timed commands whose registration the session's watchdog (the remote guard for when the
  // controller is gone, docs/ssh.md) has answered; one that ended before its registration
  // arrived is not counted.
  std::uint64_t watched = 0;
  // Transfers whose bytes went through bulk_client.
  std::uint64_t bulk_transfers = 0;
  // Negotiated algorithms of the current connection: "kex=... hostkey=... cipher=... mac=...".
  std::string methods;
};

class SshSession {
 public:
  explicit SshSession(SshConfig config);
  ~SshSession();  // close()
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  // Connects now (operations connect on demand anyway, and reconnect once transparently when
  // the connection dropped between calls). Errors: every SshErrc of the connection phase.
  Status connect();
  // True while a connection is established (a drop is noticed when the socket reports it).
  bool is_connected() const;
  // Fails queued and running operations with kClosed, disconnects, stops the I/O thread.
  // The session may be used again afterwards (it reconnects).
  void close();

  // The server's host key fingerprint, "SHA256:...", once connected (for TOFU bookkeeping).
  std::string host_key_fingerprint() const;
  SshStats stats() const;

  // Runs `command` through the remote user's login shell ($SHELL -c). Thread-safe; many may
  // run at once. A non-zero exit is a result; errors are connection/channel failures.
  Result<ExecResult> exec(std::string command, ExecOptions options = {});
  std::future<Result<ExecResult>> exec_async(std::string command, ExecOptions options = {});
  // As exec, without holding the caller or a thread of its own: `done` gets the result on the
  // session's I/O thread (keep it short and never call back into this SshSession from it; what
  // it throws is dropped), or at once on the calling thread when the command cannot be sent.
  void exec_then(std::string command, ExecOptions options, ExecDone done);

  // SFTP. Paths are remote paths as the server sees them (relative ones from the login dir).
  Status upload(const std::string& remote_path, std::string_view data,
                const UploadOptions& options = {});
  // Reads `in` to its end while the caller waits (on the session's I/O thread, or on the
  // caller's when the bytes go through bulk_client). `size_hint`
  // is accepted for callers that know the size; the transfer does not need it.
  Status upload(const std::string& remote_path, std::istream& in, const UploadOptions& options = {},
                std::optional<std::uint64_t> size_hint = std::nullopt);
  Result<std::string> download(const std::string& remote_path, const DownloadOptions& options = {});
  // Writes the file to `out`; returns the number of bytes written.
  Result<std::uint64_t> download(const std::string& remote_path, std::ostream& out,
                                 const DownloadOptions& options = {});
  Result<SftpAttributes> stat(const std::string& remote_path);
  // The canonical absolute path of an existing file or directory, symbolic links resolved
  // (SFTP realpath, as the sandbox's sftp-server sees it).
  Result<std::string> realpath(const std::string& remote_path);
  Result<DirListing> list_dir(const std::string& remote_path, const ListOptions& options = {});
  Status mkdir(const std::string& remote_path, std::uint32_t mode = 0755, bool parents = false);
  Status remove(const std::string& remote_path);  // a file (unlink)

  // An interactive program on a pseudo-terminal (ssh_pty.h), on the first connection. Returns
  // once the program runs. Errors: the connection's, kInvalidArgument for bad options.
  Result<std::unique_ptr<PtyChannel>> open_pty(PtyOptions options);
  // A TCP connection from the sandbox's sshd to options.host:port (ssh_tunnel.h), on the first
  // connection. Returns once it is connected. Errors: kConnectRefused (nothing listens there),
  // kChannelRefused (the sshd forbids forwarding), kTimeout (no channel slot), the connection's.
  Result<std::unique_ptr<TcpTunnel>> open_tunnel(TunnelOptions options);

  class Impl;
  struct ExecPool;

 private:
  void grow_pool_locked();  // REQUIRES: pool_->mu held
  // The connections a large upload spreads over: this one, then up to
  // min(at_most, transfer_connections) - 1 extras (connected now when they are not).
  std::vector<std::shared_ptr<Impl>> connections_for_transfer(int at_most);

  std::shared_ptr<Impl> impl_;
  std::shared_ptr<ExecPool> pool_;
};

// Helpers exposed for tests and for tools.
namespace ssh_detail {
// "SHA256:" + unpadded base64 of a 32-byte digest, as ssh-keygen -l prints it.
std::string format_sha256_fingerprint(std::string_view raw_digest);
// The key type named inside an OpenSSH or PEM private key ("ssh-ed25519", "ssh-rsa",
// "ecdsa-sha2-nistp256", ...), or an error for text that is not a private key.
Result<std::string> private_key_type(std::string_view key_text);
// The Ciphers option the bulk client (SshConfig::bulk_client) is given: AES-GCM first on a CPU
// with AES instructions ("^aes128-gcm@openssh.com,..."), else "" (OpenSSH's own order).
std::string bulk_cipher_preference();
// POSIX single-quoting: 'it'\''s'.
std::string shell_quote(std::string_view text);
// The command line sent to the server for an exec (pid marker when timed, cd, env).
Result<std::string> build_remote_command(std::string_view command, const ExecOptions& options);
// The POSIX shell script of a connection's watchdog (docs/ssh.md): reads "+ PGID GUARD" and
// "- PGID" lines; at EOF it kills each group whose leader still runs at GUARD seconds after
// the leader's start, and exits once none is left.
std::string_view session_watchdog_script();
// The cipher preference offered in the key exchange, given the ciphers the linked libssh2 has
// (in its own order, its default preference) and `prefer` (SshConfig::prefer_ciphers): the
// preferred ones the library has, in that order, then the rest in the library's order. An
// empty `prefer` means chacha20-poly1305, then AES-GCM (libssh2 >= 1.11: it encrypts a whole
// packet per call for chacha20-poly1305 and 16 bytes per call for AES-GCM, which costs the
// client more per MiB; docs/ssh.md). Where the library has none of them (1.10) the result is
// its own order; the server's list decides as usual (the first of ours that it also offers).
std::string cipher_preference(const std::vector<std::string>& supported,
                              std::string_view prefer = {});
}  // namespace ssh_detail

}  // namespace pvs
