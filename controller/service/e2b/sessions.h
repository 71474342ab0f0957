// What the E2B API keeps per sandbox, beside the Manager's own record: the envd access token
// minted at create (or at the first connect of a sandbox it has no session for), the default
// environment (envVars), the template asked for, and the processes and watchers the data plane
// runs. With `e2b.sessions_file` the session's record outlives a controller restart (the
// tokens and envVars: an agent's handle keeps working); without, after a restart
// Sandbox.connect mints a new token and the environment starts empty (see docs/e2b.md).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "e2b/control_wire.h"
#include "e2b/filesystem/watchers.h"
#include "e2b/processes.h"

namespace pvs::service::e2b {

// What a session is beyond the controller's process: the part kept in `e2b.sessions_file`
// across restarts (session_store.h).
struct SessionRecord {
  std::string id;
  std::string access_token;
  std::string template_id;
  std::map<std::string, std::string> env_vars;
  // Who the data plane acts for: the sandbox's owner as the Manager records it (the token that
  // created it), never the caller of connect, show or list (an admin's list must not make a
  // tenant's calls run as the admin: #46 finding 1). E2bRoutes looks its Principal up by name
  // at every call and refuses the call when that token is no longer configured.
  std::string owner;
  // trafficAccessToken: what a request to one of its ports (other than envd's) must carry as
  // e2b-traffic-access-token; empty for a sandbox created with network.allowPublicTraffic.
  std::string traffic_token;
  std::string mask_host;  // network.maskRequestHost (PortAccess)
  // The sandbox's node (empty in a file from before 2026-12-02): a kept session is pruned once
  // that node has been read whole since the restart (kept_prunable), not every node.
  std::string node;
};

// Whether a kept session's 404 now proves its sandbox gone: its node has been read whole since
// the controller started (not among `unrecovered`, the configured nodes not NodeInfo::recovered),
// or every node has when the record names none.
bool kept_prunable(const SessionRecord& record, const std::set<std::string>& unrecovered);

struct SandboxSession : SessionRecord {
  std::shared_ptr<ProcessTable> processes;
  std::shared_ptr<Watchers> watchers;  // the polled watch's (CreateWatcher)
};

// A signed file URL's query (e2b::file_signature) and what it asks: "read" (GET /files) or
// "write" (POST /files).
struct FileSignature {
  std::string path, operation, username, signature;
  std::optional<std::int64_t> expiration;
};

// A fresh envd access token: 32 random bytes, base64url without padding.
std::string mint_access_token();

class SessionStore;
struct SessionFile;

class SessionRegistry {
 public:
  // With `sessions_file`, the sessions it holds are taken up (each becomes live at its
  // sandbox's next call or ensure) and every change is written back to it (session_store.h);
  // without, sessions live in memory only.
  explicit SessionRegistry(const std::string& sessions_file = "");
  ~SessionRegistry();
  // Why the file's sessions could not be taken up ("" when they were, or there is no file).
  const std::string& load_error() const { return load_error_; }
  // The key E2B volume tokens are sealed with: the file's (kept with the sessions, so that a
  // Volume handle outlives a restart too), else a new one (written to the file when there is
  // one).
  const std::string& volume_key() const { return volume_key_; }
  // The session of `sandbox`, made if there is none: the one kept from before a restart, else
  // with a new token and its owner from sandbox->info(). Who calls does not change it.
  std::shared_ptr<SandboxSession> ensure(const std::shared_ptr<pvs::Sandbox>& sandbox,
                                         const std::string& template_id = "base",
                                         const std::map<std::string, std::string>& env = {},
                                         const PortAccess& ports = {});
  std::shared_ptr<SandboxSession> find(const std::string& id) const;
  // The owner of a session kept from before a restart and not yet live again, or "".
  std::string kept_owner(const std::string& id) const;
  // True when `token` is the sandbox's access token (constant time); false without a session.
  bool token_matches(const std::string& id, std::string_view token) const;
  // True when `signed_url.signature` is file_signature(...) under the sandbox's access token
  // (constant time); false without a session. The expiration is the caller's to check.
  bool signature_matches(const std::string& id, const FileSignature& signed_url) const;
  // The sandbox whose access token made `signed_url`'s signature, or "": for a signed URL that
  // names no sandbox (under E2B_SANDBOX_URL the SDK builds it on that URL's origin). One hash
  // per session.
  std::string signed_by(const FileSignature& signed_url) const;
  // The same for its traffic token (false for a public one: nothing to match).
  bool traffic_token_matches(const std::string& id, std::string_view token) const;
  // Forgets the sandbox (in the file too) and ends its processes and watchers.
  void erase(const std::string& id);
  // Ends every session's processes and watchers; the file keeps them (the controller stops,
  // its sandboxes run on).
  void shutdown();
  // Forgets the kept sessions (from the file, not live yet) for which `gone` says true: those
  // of sandboxes destroyed while the controller was down. Returns how many went.
  std::size_t prune_kept(const std::function<bool(const SessionRecord&)>& gone);
  // Waits until the file holds every change made so far (tests).
  void flush();

 private:
  // The session record of `id`, live or kept; nullptr for none. Under mu_.
  const SessionRecord* record(const std::string& id) const;
  SessionFile contents() const;
  void changed();

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<SandboxSession>> sessions_;
  std::map<std::string, SessionRecord> kept_;  // from the file, not live yet
  std::string load_error_;
  std::string volume_key_;
  std::unique_ptr<SessionStore> store_;  // last: its writer stops before the rest goes
};

}  // namespace pvs::service::e2b
