// Bulk bytes through OpenSSH's own client (SshConfig::bulk_client; docs/ssh.md, "Bulk bytes
// through OpenSSH").
//
// libssh2 encrypts with its own portable C ChaCha20, or AES-GCM sixteen bytes per call, and on a
// shared machine the controller's CPU per byte is the transfer's rate. OpenSSH's client uses
// libcrypto's vectorised ciphers on whole packets. So a transfer of at least one chunk
// (SshConfig::transfer_chunk) runs `ssh` as a child for its bytes, on an exec channel of a
// connection of its own (`cat`), while SFTP over libssh2 keeps everything around them: the
// checks and typed errors before, the fsync and the rename after.
//
// The child trusts only the host key libssh2 verified for this session (a known_hosts file of
// one line under the session's private directory, StrictHostKeyChecking), reads no
// configuration (-F /dev/null), forwards nothing, and has no agent. The first client of a
// session becomes its master (ControlMaster=auto, ControlPersist): later transfers run as
// further channels on that connection, without a key exchange and a login each; the session's
// close() ends it, and it ends by itself a minute after its last transfer. A master serves one
// connection of the session: after a reconnect the next transfer makes another, so none goes
// through a master whose connection may have dropped with the one libssh2 lost. The remote command
// prints a random token before it execs `cat`: nothing of the transfer is sent or taken before the
// token, so a client that cannot start (none installed, a key it refuses, a host it cannot reach)
// leaves the source untouched and the caller goes on over SFTP.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "session_impl.h"

namespace pvs::ssh_detail {

// Who the child connects to, as the libssh2 session did.
struct BulkPeer {
  const SshConfig& config;
  std::string host_key;    // the verified key, as the server sent it (SSH wire format)
  std::uint64_t key_from;  // the connection (counted from 1) that key was verified on
  BulkClients& clients;    // the session's: its close() stops the client (kClosed)
};
// The peer of `session`'s current connection.
BulkPeer bulk_peer(SshSession::Impl& session);
// How long the master stays after its last client (OpenSSH's ControlPersist).
inline constexpr int kMasterPersistSeconds = 60;

// Writes `dir`/`name` (0600) in one step: a reader sees the old file or the new one. Its path,
// or "" when it could not be written.
std::string write_private_file(const std::string& dir, const std::string& name,
                               std::string_view content);

// True if `config` lets transfers go through bulk_client at all (a client named, a key without
// a passphrase, chunks on).
bool bulk_enabled(const SshConfig& config);

// Writes `head`, then the rest of `rest`, to the existing file `path` (emptied first).
// nullopt: the client did not start and nothing was read from `rest` (go on over SFTP).
Result<std::optional<std::uint64_t>> bulk_upload(const BulkPeer& peer, const std::string& path,
                                                 std::string_view head, const Source& rest);

// Hands the file at `path` to `sink` until its end; the bytes delivered. nullopt: the client
// did not start and `sink` got nothing. `options.max_size` and `options.timeout` hold as over
// SFTP.
Result<std::optional<std::uint64_t>> bulk_download(const BulkPeer& peer, const std::string& path,
                                                   const Sink& sink,
                                                   const DownloadOptions& options);

}  // namespace pvs::ssh_detail
