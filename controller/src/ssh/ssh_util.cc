// Pure helpers of the SSH client: error kinds, fingerprints, key sniffing, command building,
// the capped output buffer, libssh2 error mapping.
#include <libssh2.h>
#include <libssh2_sftp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "pvesandbox/common/text.h"
#include "session_impl.h"

namespace pvs {

std::string_view to_string(SshErrc kind) {
  switch (kind) {
    case SshErrc::kInvalidArgument: return "invalid_argument";
    case SshErrc::kKeyInvalid: return "key_invalid";
    case SshErrc::kKeyUnsupported: return "key_unsupported";
    case SshErrc::kResolveFailed: return "resolve_failed";
    case SshErrc::kConnectRefused: return "connect_refused";
    case SshErrc::kConnectTimeout: return "connect_timeout";
    case SshErrc::kNetwork: return "network";
    case SshErrc::kHandshake: return "handshake";
    case SshErrc::kHostKeyMismatch: return "host_key_mismatch";
    case SshErrc::kHostKeyUnknown: return "host_key_unknown";
    case SshErrc::kAuthFailed: return "auth_failed";
    case SshErrc::kChannelRefused: return "channel_refused";
    case SshErrc::kDisconnected: return "disconnected";
    case SshErrc::kTimeout: return "timeout";
    case SshErrc::kProtocol: return "protocol";
    case SshErrc::kNoSuchFile: return "no_such_file";
    case SshErrc::kPermissionDenied: return "permission_denied";
    case SshErrc::kDiskFull: return "disk_full";
    case SshErrc::kAlreadyExists: return "already_exists";
    case SshErrc::kSftpFailure: return "sftp_failure";
    case SshErrc::kLocalIo: return "local_io";
    case SshErrc::kTooLarge: return "too_large";
    case SshErrc::kClosed: return "closed";
  }
  return "unknown";
}

ErrorCode error_code_for(SshErrc kind) {
  switch (kind) {
    case SshErrc::kInvalidArgument:
    case SshErrc::kKeyInvalid:
    case SshErrc::kKeyUnsupported: return ErrorCode::kInvalidArgument;
    case SshErrc::kResolveFailed:
    case SshErrc::kConnectRefused:
    case SshErrc::kNetwork:
    case SshErrc::kHandshake:
    case SshErrc::kChannelRefused:
    case SshErrc::kDisconnected:
    case SshErrc::kClosed: return ErrorCode::kUnavailable;
    case SshErrc::kConnectTimeout:
    case SshErrc::kTimeout: return ErrorCode::kTimeout;
    case SshErrc::kHostKeyMismatch:
    case SshErrc::kHostKeyUnknown:
    case SshErrc::kAuthFailed: return ErrorCode::kUnauthenticated;
    case SshErrc::kNoSuchFile: return ErrorCode::kNotFound;
    case SshErrc::kPermissionDenied: return ErrorCode::kPermissionDenied;
    case SshErrc::kDiskFull:
    case SshErrc::kTooLarge: return ErrorCode::kTooLarge;
    case SshErrc::kAlreadyExists: return ErrorCode::kAlreadyExists;
    case SshErrc::kLocalIo: return ErrorCode::kIo;
    case SshErrc::kSftpFailure:
    case SshErrc::kProtocol: return ErrorCode::kInternal;
  }
  return ErrorCode::kInternal;
}

tl::unexpected<Error> ssh_fail(SshErrc kind, std::string message) {
  Error e(error_code_for(kind), std::move(message));
  e.ssh = kind;
  return tl::unexpected<Error>(std::move(e));
}

namespace ssh_detail {

SshErrc rename_error_kind(std::string_view err) {
  auto has = [&](std::string_view what) { return err.find(what) != std::string_view::npos; };
  if (has("ermission denied") || has("peration not permitted") || has("ead-only file system"))
    return SshErrc::kPermissionDenied;
  if (has("o space left") || has("uota exceeded")) return SshErrc::kDiskFull;
  if (has("s a directory") || has("ot empty") || has("overwrite directory"))
    return SshErrc::kAlreadyExists;
  if (has("ot a directory") || has("o such file")) return SshErrc::kNoSuchFile;
  return SshErrc::kSftpFailure;
}

void retag(Error& e, SshErrc kind) {
  e.ssh = kind;
  e.code = error_code_for(kind);
}

namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_unpadded(std::string_view in) {
  std::string out;
  std::size_t i = 0;
  auto byte = [&](std::size_t k) { return static_cast<unsigned char>(in[k]); };
  for (; i + 3 <= in.size(); i += 3) {
    std::uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (in.size() - i == 1) {
    std::uint32_t v = byte(i) << 16;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
  } else if (in.size() - i == 2) {
    std::uint32_t v = (byte(i) << 16) | (byte(i + 1) << 8);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
  }
  return out;
}

}  // namespace

std::string random_hex(int digits) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  while (static_cast<int>(s.size()) < digits) {
    std::uint64_t v = rng();
    for (int i = 0; i < 16 && static_cast<int>(s.size()) < digits; ++i, v >>= 4) s += kHex[v & 15];
  }
  return s;
}

std::string base64(std::string_view in) {
  std::string out = base64_unpadded(in);
  out.append((4 - out.size() % 4) % 4, '=');
  return out;
}

namespace {

// Decodes base64, skipping whitespace; stops at '='. False on any other character.
bool base64_decode(std::string_view in, std::string* out) {
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    if (c == '=') break;
    const char* p = std::strchr(kB64, c);
    if (p == nullptr || c == '\0') return false;
    acc = (acc << 6) | static_cast<std::uint32_t>(p - kB64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return true;
}

// Reads an SSH "string" (uint32 length + bytes) at *pos.
bool read_ssh_string(std::string_view buf, std::size_t* pos, std::string_view* out) {
  if (buf.size() - *pos < 4 || *pos > buf.size()) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(buf.data() + *pos);
  std::uint32_t len = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
                      (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
  *pos += 4;
  if (len > buf.size() - *pos) return false;
  *out = buf.substr(*pos, len);
  *pos += len;
  return true;
}

bool valid_env_name(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string format_sha256_fingerprint(std::string_view raw_digest) {
  return "SHA256:" + base64_unpadded(raw_digest);
}

Result<std::string> private_key_type(std::string_view text) {
  constexpr std::string_view kBegin = "-----BEGIN ";
  std::size_t b = text.find(kBegin);
  if (b == std::string_view::npos) {
    return ssh_fail(SshErrc::kKeyInvalid, "not a PEM/OpenSSH private key (no BEGIN line)");
  }
  std::size_t label_start = b + kBegin.size();
  std::size_t label_end = text.find("-----", label_start);
  if (label_end == std::string_view::npos) {
    return ssh_fail(SshErrc::kKeyInvalid, "malformed BEGIN line in private key");
  }
  std::string_view label = text.substr(label_start, label_end - label_start);
  if (label == "RSA PRIVATE KEY") return std::string("ssh-rsa");
  if (label == "EC PRIVATE KEY") return std::string("ecdsa");
  if (label == "DSA PRIVATE KEY") return std::string("ssh-dss");
  if (label == "PRIVATE KEY" || label == "ENCRYPTED PRIVATE KEY") return std::string("pkcs8");
  if (label != "OPENSSH PRIVATE KEY") {
    return ssh_fail(SshErrc::kKeyInvalid,
                    "unknown private key format \"" + std::string(label) + "\"");
  }
  std::size_t body = text.find('\n', label_end);
  std::size_t end = text.find("-----END", label_end);
  if (body == std::string_view::npos || end == std::string_view::npos || end < body) {
    return ssh_fail(SshErrc::kKeyInvalid, "truncated OpenSSH private key");
  }
  std::string blob;
  if (!base64_decode(text.substr(body, end - body), &blob)) {
    return ssh_fail(SshErrc::kKeyInvalid, "bad base64 in OpenSSH private key");
  }
  constexpr std::string_view kMagic("openssh-key-v1\0", 15);
  if (blob.compare(0, kMagic.size(), kMagic) != 0) {
    return ssh_fail(SshErrc::kKeyInvalid, "OpenSSH private key without openssh-key-v1 magic");
  }
  std::string_view buf(blob);
  std::size_t pos = kMagic.size();
  std::string_view cipher, kdf, kdfopts, pub, type;
  if (!read_ssh_string(buf, &pos, &cipher) || !read_ssh_string(buf, &pos, &kdf) ||
      !read_ssh_string(buf, &pos, &kdfopts) || buf.size() - pos < 4) {
    return ssh_fail(SshErrc::kKeyInvalid, "truncated OpenSSH private key header");
  }
  pos += 4;  // number of keys
  std::size_t ppos = 0;
  if (!read_ssh_string(buf, &pos, &pub) || !read_ssh_string(pub, &ppos, &type)) {
    return ssh_fail(SshErrc::kKeyInvalid, "truncated OpenSSH public key in private key file");
  }
  return std::string(type);
}

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

Result<std::string> build_remote_command(std::string_view command, const ExecOptions& options) {
  if (command.find('\0') != std::string_view::npos) {
    return ssh_fail(SshErrc::kInvalidArgument, "command contains a NUL byte");
  }
  std::string s;
  if (options.timeout.count() > 0) {
    // The login shell is a session and process-group leader (sshd calls setsid), so $$ names
    // the process group of everything the command starts: the controller kills that group on
    // timeout, and registers it with the session's watchdog, the guard for when the controller
    // is gone (ssh_watchdog.cc, docs/ssh.md). A builtin: nothing is forked for it.
    s += "printf '\\036pvs:%s\\036' \"$$\" >&2\n";
  }
  if (!options.cwd.empty()) {
    if (options.cwd.find('\0') != std::string::npos) {
      return ssh_fail(SshErrc::kInvalidArgument, "cwd contains a NUL byte");
    }
    s += "cd -- " + shell_quote(options.cwd) + " || exit 126\n";
  }
  for (const auto& [name, value] : options.env) {
    if (!valid_env_name(name)) {
      return ssh_fail(SshErrc::kInvalidArgument,
                      "invalid environment variable name " + pvs::quoted(name));
    }
    if (value.find('\0') != std::string::npos) {
      return ssh_fail(SshErrc::kInvalidArgument, "environment value of " + name + " has a NUL");
    }
    s += "export " + name + "=" + shell_quote(value) + "\n";
  }
  s.append(command);
  return s;
}

void CappedBuffer::append(std::string_view data) {
  total_ += data.size();
  const std::size_t head_cap = cap_ / 2;
  const std::size_t tail_cap = cap_ - head_cap;
  if (head_.size() < head_cap) {
    std::size_t n = std::min(head_cap - head_.size(), data.size());
    head_.append(data.substr(0, n));
    data.remove_prefix(n);
  }
  if (data.empty() || tail_cap == 0) return;
  if (data.size() >= tail_cap) {
    ring_.assign(data.substr(data.size() - tail_cap));
    ring_pos_ = 0;
    return;
  }
  if (ring_.size() < tail_cap) {
    std::size_t n = std::min(tail_cap - ring_.size(), data.size());
    ring_.append(data.substr(0, n));
    data.remove_prefix(n);
    ring_pos_ = 0;
  }
  while (!data.empty()) {
    std::size_t n = std::min(tail_cap - ring_pos_, data.size());
    std::memcpy(ring_.data() + ring_pos_, data.data(), n);
    ring_pos_ = (ring_pos_ + n) % tail_cap;
    data.remove_prefix(n);
  }
}

std::string CappedBuffer::take() {
  std::string out = std::move(head_);
  out.append(ring_, ring_pos_, std::string::npos);
  out.append(ring_, 0, ring_pos_);
  head_.clear();
  ring_.clear();
  ring_pos_ = 0;
  return out;
}

std::string cipher_preference(const std::vector<std::string>& supported, std::string_view prefer) {
  if (prefer.empty()) {
    prefer = "chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com";
  }
  std::vector<std::string_view> first;
  for (std::string_view rest = prefer; !rest.empty();) {
    const std::size_t comma = rest.find(',');
    const std::string_view m = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const bool has = std::find(supported.begin(), supported.end(), m) != supported.end();
    if (has && std::find(first.begin(), first.end(), m) == first.end()) first.push_back(m);
  }
  std::string out;
  auto add = [&](std::string_view m) {
    if (!out.empty()) out += ',';
    out += m;
  };
  for (std::string_view m : first) add(m);
  for (const auto& m : supported) {
    if (std::find(first.begin(), first.end(), m) == first.end()) add(m);
  }
  return out;
}

bool is_fatal_session_error(int rc) {
  switch (rc) {
    case LIBSSH2_ERROR_SOCKET_NONE:
    case LIBSSH2_ERROR_INVALID_MAC:
    case LIBSSH2_ERROR_KEX_FAILURE:
    case LIBSSH2_ERROR_SOCKET_SEND:
    case LIBSSH2_ERROR_KEY_EXCHANGE_FAILURE:
    case LIBSSH2_ERROR_DECRYPT:
    case LIBSSH2_ERROR_SOCKET_DISCONNECT:
    case LIBSSH2_ERROR_PROTO:
    case LIBSSH2_ERROR_SOCKET_TIMEOUT:
    case LIBSSH2_ERROR_SOCKET_RECV:
    case LIBSSH2_ERROR_ENCRYPT:
    case LIBSSH2_ERROR_BAD_SOCKET:
    case LIBSSH2_ERROR_ALLOC: return true;
    default: return false;
  }
}

Error session_error(LIBSSH2_SESSION* s, int rc, std::string_view what) {
  char* msg = nullptr;
  int len = 0;
  if (s != nullptr) libssh2_session_last_error(s, &msg, &len, 0);
  std::string text(what);
  text += ": ";
  text += (msg != nullptr && len > 0) ? std::string(msg, static_cast<std::size_t>(len))
                                      : std::string("libssh2 error");
  text += " (" + std::to_string(rc) + ")";
  SshErrc kind = SshErrc::kProtocol;
  if (is_fatal_session_error(rc)) {
    kind = SshErrc::kDisconnected;
  } else if (rc == LIBSSH2_ERROR_TIMEOUT) {
    kind = SshErrc::kTimeout;
  } else if (rc == LIBSSH2_ERROR_CHANNEL_FAILURE) {
    kind = SshErrc::kChannelRefused;
  } else if (rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED ||
             rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED) {
    kind = SshErrc::kAuthFailed;
  }
  return ssh_fail(kind, std::move(text)).value();
}

Error sftp_error(LIBSSH2_SESSION* s, LIBSSH2_SFTP* sftp, int rc, std::string_view what) {
  if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL || sftp == nullptr) return session_error(s, rc, what);
  unsigned long fx = libssh2_sftp_last_error(sftp);
  SshErrc kind = SshErrc::kSftpFailure;
  std::string name;
  switch (fx) {
    case LIBSSH2_FX_NO_SUCH_FILE:
    case LIBSSH2_FX_NO_SUCH_PATH:
      kind = SshErrc::kNoSuchFile;
      name = "no such file";
      break;
    case LIBSSH2_FX_PERMISSION_DENIED:
    case LIBSSH2_FX_WRITE_PROTECT:
      kind = SshErrc::kPermissionDenied;
      name = "permission denied";
      break;
    case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM:
    case LIBSSH2_FX_QUOTA_EXCEEDED:
      kind = SshErrc::kDiskFull;
      name = "no space left";
      break;
    case LIBSSH2_FX_FILE_ALREADY_EXISTS:
      kind = SshErrc::kAlreadyExists;
      name = "exists";
      break;
    case LIBSSH2_FX_NOT_A_DIRECTORY:
      kind = SshErrc::kNoSuchFile;
      name = "not a directory";
      break;
    case LIBSSH2_FX_OP_UNSUPPORTED: name = "operation unsupported"; break;
    default: name = "failure"; break;
  }
  return ssh_fail(kind,
                  std::string(what) + ": " + name + " (SFTP status " + std::to_string(fx) + ")")
      .value();
}

}  // namespace ssh_detail
}  // namespace pvs
