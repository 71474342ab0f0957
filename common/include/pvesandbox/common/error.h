// Errors as values at module boundaries.
//
//   pvs::Result<Cidr> r = Cidr::parse(text);
//   if (!r) log(r.error().message);
//
// A Result<T> holds either a T or an Error; Status is Result<void>. Both are tl::expected
// (std::expected cannot be used: clang 14 does not compile libstdc++ 12's <expected>).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <tl/expected.hpp>

namespace pvs {

// What went wrong, coarse enough for a caller to act on. Modules add detail in the message.
enum class ErrorCode {
  kInvalidArgument,   // the input is malformed or out of range
  kNotFound,          // the thing named does not exist
  kAlreadyExists,     // creating something that is there already
  kPermissionDenied,  // the caller may not do this
  kUnauthenticated,   // the caller could not be identified
  kConflict,          // state forbids it now (locked, running, ...)
  kTooLarge,          // a size limit was exceeded
  kLimitExceeded,     // a per-caller limit (how many it may hold or run) is reached
  kUnavailable,       // a peer cannot be reached; retrying later may work
  kTimeout,           // a deadline passed
  kIo,                // an operating system call failed
  kInternal,          // a bug or an invariant broken
};

// The stable lower-case name of a code, e.g. "invalid_argument".
std::string_view to_string(ErrorCode code);

// What the Proxmox API reported (pve::ErrorKind in the client), for the orchestrator to act on.
enum class ProxmoxErrc {
  kNotFound,           // 500 "... does not exist" (Proxmox never sends 404 for a missing guest)
  kLocked,             // "CT is locked (disk)", "can't lock file ... got timeout"
  kAlreadyExists,      // "CT 105 already exists on node 'pve'", nextid "VM 105 already exists"
  kAlreadyRunning,     // "CT 105 already running"
  kNotRunning,         // "CT 105 not running"
  kPermissionDenied,   // 403
  kAuthentication,     // 401: bad, expired or missing token
  kInvalidParameters,  // 400 "Parameter verification failed." (see ProxmoxDetail::param_errors)
  kTransport,          // connect failure, timeout, reset; 595/596 from pveproxy
  kTls,                // certificate not trusted / fingerprint mismatch
  kTaskFailed,         // a UPID task ended with an error (see ProxmoxDetail::task_log)
  kTimeout,            // wait_task's deadline passed
  kNotImplemented,     // 501: unknown path or method, body on GET/DELETE
  kProtocol,           // the answer was not what the API documents
  kServer,             // any other error
};

// The Proxmox side of an Error: its kind and what the API said.
struct ProxmoxDetail {
  ProxmoxErrc kind = ProxmoxErrc::kServer;
  int http_status = 0;                              // 0 if no HTTP response arrived
  std::map<std::string, std::string> param_errors;  // 400: parameter -> message
  std::string upid;                                 // kTaskFailed / kTimeout: the task
  std::vector<std::string> task_log;                // kTaskFailed: last lines of the task log
  int attempts = 1;                                 // requests sent for this call
};

// What exactly failed in an SSH or SFTP operation; callers branch on this, the message is for
// people.
enum class SshErrc {
  kInvalidArgument,   // bad config or arguments (empty host, bad env name, ...)
  kKeyInvalid,        // the private key cannot be read or parsed (or wrong passphrase)
  kKeyUnsupported,    // an RSA key: libssh2 1.10 signs only ssh-rsa (SHA-1), OpenSSH refuses it
  kResolveFailed,     // host name did not resolve
  kConnectRefused,    // TCP RST: nothing listens on host:port
  kConnectTimeout,    // no TCP/SSH handshake within connect_timeout
  kNetwork,           // other socket error (unreachable, reset during setup, ...)
  kHandshake,         // SSH key exchange failed (e.g. no ed25519 host key)
  kHostKeyMismatch,   // the server's key differs from the pinned/known/first-seen one
  kHostKeyUnknown,    // known_hosts policy and the host is not in the file
  kAuthFailed,        // the server refused our key for this user
  kChannelRefused,    // the server refused to open a channel (MaxSessions, ...)
  kDisconnected,      // the connection dropped while the operation was in flight
  kTimeout,           // an operation deadline passed (exec timeouts are results, not errors)
  kProtocol,          // unexpected libssh2/SSH failure
  kNoSuchFile,        // SFTP: path does not exist
  kPermissionDenied,  // SFTP: access refused
  kDiskFull,          // SFTP: write failed and the remote filesystem has no space left
  kAlreadyExists,     // SFTP: e.g. mkdir of an existing path
  kSftpFailure,       // SFTP: other server-side failure
  kLocalIo,           // reading the local source / writing the local sink failed
  kTooLarge,          // a download exceeded its max_size
  kClosed,            // the session was closed while the operation waited
};

// One error type for the whole project. `code` is what a caller acts on; when a peer produced
// the error, its own kind rides along (`proxmox` or `ssh`) for callers that need the detail:
//   if (r.error().is(ProxmoxErrc::kLocked)) retry();
struct Error {
  Error() = default;
  Error(ErrorCode c, std::string m) : code(c), message(std::move(m)) {}

  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::optional<ProxmoxDetail> proxmox;  // set when the Proxmox API produced it
  std::optional<SshErrc> ssh;            // set when an SSH/SFTP operation produced it

  bool is(ProxmoxErrc kind) const { return proxmox && proxmox->kind == kind; }
  bool is(SshErrc kind) const { return ssh && *ssh == kind; }

  // "invalid_argument: bad ttl"
  std::string to_string() const;
};

template <typename T>
using Result = tl::expected<T, Error>;
using Status = Result<void>;

// Builds the error side of a Result: `return pvs::fail(ErrorCode::kNotFound, "no such vm");`
inline tl::unexpected<Error> fail(ErrorCode code, std::string message) {
  return tl::unexpected<Error>(Error{code, std::move(message)});
}
inline tl::unexpected<Error> fail(Error error) {
  return tl::unexpected<Error>(std::move(error));
}

// An error from errno: "<what>: <strerror(err)>", code kIo.
Error errno_error(std::string_view what, int err);

}  // namespace pvs
