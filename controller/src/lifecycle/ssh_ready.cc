// The SSH step of create: wait for the sandbox's sshd, give the sandbox its own host key, and
// hand over a session pinned to it.
//
// Every clone starts with the template's host key, and every tenant can read it in its own
// container: pinning the template's key alone would let any tenant impersonate any sandbox.
// So the first session (verified by the configured policy, normally the template's pinned key)
// replaces the key, and from then on only the new key is accepted for this sandbox: by the
// session handed over, by its extra connections, and after a restart (the fingerprint is in
// the sandbox's metadata).
#include <thread>

#include "core.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/common/text.h"

namespace pvs::lifecycle {

namespace {

// Runs as the SSH user (root in a real template). Deletes every host key the template brought
// (other types too: no tenant may hold a key that another sandbox presents), creates a fresh
// ed25519 key and prints its fingerprint. OpenSSH before 9.8 reads host keys for each new
// connection; a newer listener is told to re-read them (SIGHUP re-executes it; open sessions
// stay up, and the pinned reconnect below retries while it restarts).
constexpr const char* kReplaceHostKey =
    "set -e; umask 077; cd /etc/ssh; "
    "rm -f ssh_host_*_key ssh_host_*_key.pub ssh_host_*_key-cert.pub; "
    "ssh-keygen -q -t ed25519 -N '' -C '' -f ssh_host_ed25519_key; "
    "ssh-keygen -l -f ssh_host_ed25519_key.pub; "
    "if [ -s /run/sshd.pid ]; then kill -HUP \"$(cat /run/sshd.pid)\" 2>/dev/null || true; fi";

bool waiting_cannot_fix(const Error& e) {
  return e.is(SshErrc::kAuthFailed) || e.is(SshErrc::kHostKeyMismatch) ||
         e.is(SshErrc::kKeyInvalid) || e.is(SshErrc::kKeyUnsupported);
}

}  // namespace

Result<std::shared_ptr<SshSession>> ManagerCore::connect_until(const SshConfig& sc,
                                                               Clock::time_point deadline,
                                                               const std::string& stale_key) {
  Error last{ErrorCode::kTimeout, "ssh not ready"};
  auto delay = milliseconds(20);
  for (;;) {
    auto ssh = std::make_shared<SshSession>(sc);
    ExecOptions probe;
    probe.timeout = seconds(10);
    auto r = ssh->exec("true", probe);
    if (r && r->exit_code == 0) return ssh;
    if (!r) last = r.error();
    log::debug("ssh " + sc.host +
               ": not ready yet: " + (r ? "exit " + std::to_string(r->exit_code) : last.message));
    bool stale = !r && r.error().is(SshErrc::kHostKeyMismatch) && !stale_key.empty() &&
                 ssh->host_key_fingerprint() == stale_key;
    ssh->close();
    if (!r && !stale && waiting_cannot_fix(r.error()))
      return fail(ErrorCode::kUnavailable, "ssh: " + last.message);
    if (Clock::now() + delay >= deadline)
      return fail(ErrorCode::kTimeout, "ssh not ready in time: " + last.message);
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, milliseconds(500));
  }
}

Result<std::string> ManagerCore::replace_host_key(SshSession& session) {
  ExecOptions o;
  o.timeout = seconds(30);
  auto r = session.exec(kReplaceHostKey, o);
  if (!r) return fail(ErrorCode::kUnavailable, "ssh: replacing the host key: " + r.error().message);
  auto at = r->out.find("SHA256:");
  std::string fp = at == std::string::npos ? "" : r->out.substr(at, 50);
  if (r->exit_code != 0 || !is_sha256_fingerprint(fp))
    return fail(ErrorCode::kUnavailable,
                "ssh: the template cannot replace its host key (exit " +
                    std::to_string(r->exit_code) + ": " + pvs::quoted(r->err, 200) +
                    "); it needs ssh-keygen and a writable /etc/ssh, or set "
                    "ssh.per_sandbox_host_keys: false");
  return fp;
}

Result<std::shared_ptr<SshSession>> ManagerCore::wait_for_ssh(Ipv4Address address,
                                                              std::string* host_key, bool own_key,
                                                              const std::string& first_key) {
  auto deadline = Clock::now() + cfg_.ssh_ready_timeout;
  SshConfig first = cfg_.ssh;
  first.host = address.to_string();
  if (!first_key.empty()) {  // a clone of a captured sandbox presents that sandbox's key
    first.host_key_policy = HostKeyPolicy::kPinned;
    first.host_key_fingerprint = first_key;
  }
  first.connect_timeout = std::min(first.connect_timeout, milliseconds(2000));
  auto probe = connect_until(first, deadline);
  if (!probe) return probe;
  std::string fp = (*probe)->host_key_fingerprint();
  std::string replaced_key;
  if (cfg_.per_sandbox_host_keys && own_key) {
    replaced_key = fp;
    auto replaced = replace_host_key(**probe);
    if (!replaced) return fail(replaced.error());
    fp = *replaced;
  }
  (*probe)->close();
  // The session the sandbox keeps: the configured timeouts, and only this sandbox's key.
  SshConfig pinned = cfg_.ssh;
  pinned.host = first.host;
  pinned.host_key_policy = HostKeyPolicy::kPinned;
  pinned.host_key_fingerprint = fp;
  auto ssh = connect_until(pinned, std::max(deadline, Clock::now() + pinned.connect_timeout),
                           replaced_key);
  if (!ssh) return ssh;
  *host_key = fp;
  return ssh;
}

}  // namespace pvs::lifecycle
