// The E2B-compatible API's routes (docs/e2b.md): E2B's control plane under /e2b/ and an
// envd-compatible data plane under /e2b/envd/ (or at / for Host 49983-<id>.<domain>), served
// over each sandbox's SSH session. A handler class with narrow dependencies: how to answer
// (Replies), the policy gate, the token limits and metrics, and the sandbox operations the REST
// API shares (as functions), so ownership, limits, policy, approvals, audit and metrics are the
// REST API's own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/observability/audit.h"
#include "core/observability/denied_log.h"
#include "core/observability/metrics.h"
#include "e2b/envd_wire.h"
#include "e2b/sessions.h"
#include "e2b/volume_helpers.h"
#include "http/auth.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "http/requests.h"
#include "http/token_limits.h"
#include "policy/gate.h"
#include "pvesandbox/custom_templates.h"
#include "pvesandbox/template_recipe.h"

namespace pvs::service {
namespace e2b {
class TemplateBuilds;
}

// What E2B's replies say about a sandbox and its session (routes_control.cc).
e2b::SandboxView view_of(const SandboxInfo& info, const e2b::SandboxSession& session,
                         const std::string& domain);
// Its volumeMounts: (name, path) of each mount, the names from `volumes` (routes_volumes.cc).
std::vector<std::pair<std::string, std::string>> mounts_of(const SandboxInfo& info,
                                                           const std::vector<VolumeInfo>& volumes);

class E2bRoutes {
 public:
  struct Deps {
    const ServiceConfig& config;
    Replies& replies;
    PolicyGate& gate;
    TokenLimits& limits;
    Metrics* metrics;
    const TokenStore& tokens;
    std::function<void(const AuditRecord&)> audit;
    // The REST API's sandbox operations (app/api.h).
    std::function<std::shared_ptr<Sandbox>(const Principal&, const std::string&)> sandbox_for;
    std::function<std::shared_ptr<Sandbox>(const Principal&, const CreateRequest&, const Egress&)>
        create_for;
    std::function<std::vector<SandboxInfo>(const Principal&, const Labels&)> list_for;
    std::function<void(Sandbox&)> destroy;  // closes its terminals, then destroys it
    // True for a custom template's name (docs/templates.md): a templateID that names one.
    std::function<bool(const std::string&)> is_custom_template = nullptr;
    // Templates of a sandbox's files and forks, and the custom templates a caller may see and
    // delete (SandboxOps: capture_for, fork_for, templates_for, delete_template_for).
    std::function<CustomTemplate(const Principal&, Sandbox&, const std::string&)> capture_for =
        nullptr;
    std::function<std::vector<std::shared_ptr<Sandbox>>(const Principal&, Sandbox&, int,
                                                        CreateRequest, const Egress&)>
        fork_for = nullptr;
    std::function<std::vector<CustomTemplate>(const Principal&)> templates_for = nullptr;
    std::function<void(const Principal&, const std::string&)> delete_template_for = nullptr;
    // Manager::build_template (docs/templates.md), for E2B's template builds.
    std::function<Result<TemplateBuild>(const TemplateRecipe&, const BuildOutput&)> build_template =
        nullptr;
    // Volumes (pvesandbox/volumes.h): the caller's, a new one of the default size, one deleted
    // (by id; ApiError 404 for none of the caller's, 409 while mounted).
    std::function<std::vector<VolumeInfo>(const Principal&)> volumes_for = nullptr;
    std::function<VolumeInfo(const Principal&, const std::string&)> create_volume_for = nullptr;
    std::function<void(const Principal&, const std::string&)> delete_volume_for = nullptr;
    // How far the Manager has recovered what Proxmox holds: a kept session's 404 proves its
    // sandbox gone only once its node has been read whole (e2b::kept_prunable).
    struct Recovery {
      bool open = false;                  // the Manager is open (before: nothing is known)
      std::uint64_t passes = 0;           // its reconcile passes so far
      std::set<std::string> unrecovered;  // configured nodes not NodeInfo::recovered yet
    };
    std::function<Recovery()> recovery = nullptr;  // null: all is known
  };
  explicit E2bRoutes(Deps deps);
  ~E2bRoutes();

  // Control plane (routes_control.cc).
  void create(RequestContext& ctx);
  void list(RequestContext& ctx);
  void connect(RequestContext& ctx);  // resumes a paused sandbox (201)
  void pause(RequestContext& ctx);
  void show(RequestContext& ctx);
  void kill(RequestContext& ctx);
  void timeout(RequestContext& ctx);
  void network(RequestContext& ctx);
  void metrics(RequestContext& ctx);
  void unsupported(RequestContext& ctx);
  // Snapshots and fork (routes_snapshots.cc): templates of a sandbox's files.
  void snapshot_create(RequestContext& ctx);
  void snapshot_list(RequestContext& ctx);
  void template_delete(RequestContext& ctx);  // Sandbox.deleteSnapshot (and a template's delete)
  void fork(RequestContext& ctx);
  // Volumes (routes_volumes.cc): the control plane; the content plane (routes_volume_content.cc)
  // in the sandbox that mounts the volume (e2b/volume_helpers.h).
  void volume_create(RequestContext& ctx);
  void volume_list(RequestContext& ctx);
  void volume_show(RequestContext& ctx);
  void volume_delete(RequestContext& ctx);
  void volume_content(RequestContext& ctx);
  // A create is about to mount these volumes: their helper sandboxes go first.
  void release_volume_helpers(const std::vector<std::string>& volume_ids);
  // Data plane (routes_envd.cc, routes_envd_files.cc).
  // A request for one of a sandbox's ports (other than envd's), routed as E2B routes it: by
  // Host "<port>-<id>.<domain>" or by E2b-Sandbox-Id/E2b-Sandbox-Port. Checks its
  // e2b-traffic-access-token (none for a sandbox created with allowPublicTraffic), sets the
  // principal to the sandbox's owner, and returns the sandbox and the Host its services see
  // (maskRequestHost expanded; "": localhost:<port>): the caller proxies (PortRoutes).
  // 403 for a missing or wrong token, 404 for a sandbox without an E2B session here.
  struct PortTarget {
    std::shared_ptr<Sandbox> sandbox;
    std::string host;
  };
  PortTarget port_target(RequestContext& ctx, const std::string& id, std::uint16_t port);
  void rpc(RequestContext& ctx);
  void files_get(RequestContext& ctx);
  void files_post(RequestContext& ctx);
  void health(RequestContext& ctx);
  // Template builds (templates/routes_templates.cc): admin tokens' keys only.
  void template_request(RequestContext& ctx);
  void template_files(RequestContext& ctx);
  void template_upload(RequestContext& ctx);  // the one-time upload link; no key
  void template_start(RequestContext& ctx);
  void template_status(RequestContext& ctx);
  void template_alias(RequestContext& ctx);  // Template.exists: any key

  // A sandbox destroyed through another door (REST, MCP): its session and processes go.
  void forget(const std::string& id) { sessions_.erase(id); }

 private:
  struct Target {
    std::shared_ptr<e2b::SandboxSession> session;
    std::shared_ptr<Sandbox> sandbox;
  };
  void control(RequestContext& ctx, const std::function<void()>& work);
  void prune_kept_sessions();
  void envd(RequestContext& ctx, bool stream, const std::function<void()>& work);
  // GET/POST /files: `operation` ("read", "write") is what a signed URL must have been signed
  // for when the request carries no X-Access-Token.
  void files_call(RequestContext& ctx, std::string_view operation,
                  const std::function<void(const Target&)>& work);
  // The sandbox the request names (Host or E2b-Sandbox-Id; for /files, `signed_operation` set,
  // also a signed URL's signature), its caller proved by X-Access-Token or the signed URL.
  Target target(RequestContext& ctx, std::string_view signed_operation = {});
  // The sandbox `id` for its owner, with its session (`session`, or the one kept from before a
  // restart made live). The Manager's 404 forgets the session too, and is thrown on.
  Target owned(const Principal& owner, const std::string& id,
               std::shared_ptr<e2b::SandboxSession> session);
  void authenticate(const std::string& id, const std::optional<e2b::FileSignature>& signed_url,
                    std::string_view token);
  void dispatch(RequestContext& ctx, const Target& t, const std::string& method,
                const std::string& body);
  void filesystem(RequestContext& ctx, const Target& t, const std::string& method,
                  const std::string& body);
  void start(RequestContext& ctx, const Target& t, const e2b::StartRequest& req);
  void stream(RequestContext& ctx, e2b::EventQueue& events, std::chrono::milliseconds limit,
              const std::string& keepalive_message = e2b::keepalive_event());
  void watch(RequestContext& ctx, const Target& t, const e2b::WatchDirRequest& req);
  void polled_watch(RequestContext& ctx, const Target& t, const std::string& method,
                    const std::string& body);
  std::string watched_path(RequestContext& ctx, const e2b::WatchDirRequest& req);
  void audit_denied(RequestContext& ctx, const DeniedLog::Line& line, std::string_view reason);
  std::string home() const;
  TokenLimits::Slot take_slot(RequestContext& ctx, TokenLimits::Kind kind);
  // The policy gate's say (its decision for the audit log); throws ApiError for deny and for an
  // approval still pending after approval_wait_seconds (its message names the approval).
  std::string admit(const Principal& who, const std::string& sandbox, const PolicyRequest& asked);
  // The same for a decision already made (the strictest of several, docs/policy.md).
  std::string admit_decided(const Principal& who, const std::string& sandbox,
                            const PolicyRequest& asked, const PolicyDecision& decision);
  // filesystem.Filesystem/Move: both ends judged, one approval binding both and what lands.
  void move(RequestContext& ctx, const Target& t, const std::string& source,
            const std::string& destination);
  // SendInput to a process's stdin under terminal.input rules: its lines judged (a pipe).
  void judge_stdin(RequestContext& ctx, const Target& t, std::uint32_t pid,
                   const std::string& data);
  int max_ttl() const;
  void admin_only(RequestContext& ctx);
  e2b::TemplateBuilds& builds();  // made at the first template call
  // routes_volume_content.cc: a volume's token (sealed {volume, owner}); the real path of a
  // volume path, refused outside the volume; one call; a listing.
  std::string volume_token(const VolumeInfo& v);
  std::string volume_real(Sandbox& sb, const std::string& root, const std::string& path,
                          int missing);
  void volume_call(RequestContext& ctx, Sandbox& sb, const std::string& root,
                   const std::string& what);
  std::string list_volume_dir(Sandbox& sb, const std::string& root, const std::string& real,
                              std::uint32_t depth);
  e2b::VolumeHelpers& volume_helpers();  // made at the first content call

  Deps d_;
  e2b::SessionRegistry sessions_;
  std::mutex prune_mu_;
  std::atomic<bool> pruned_{false};  // the kept sessions were pruned after a full recovery
  std::uint64_t pruned_pass_ = 0;    // the pass the last partial prune followed (prune_mu_)
  DeniedLog denied_;
  std::once_flag builds_once_;
  std::once_flag helpers_once_;
  std::unique_ptr<e2b::VolumeHelpers> helpers_;
  std::atomic<bool> helpers_made_{false};        // no content call yet: no helper to release
  std::shared_ptr<e2b::TemplateBuilds> builds_;  // last: its builds end before the rest goes
};

}  // namespace pvs::service
