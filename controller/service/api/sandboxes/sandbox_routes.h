// Sandboxes (room api/sandboxes/): POST/GET /v1/sandboxes, GET/DELETE /v1/sandboxes/{id},
// PUT .../internet, GET .../egress/log, POST .../ttl, POST .../pause and .../resume,
// POST .../exec (buffered, or NDJSON as
// output arrives), the snapshots (take, list, roll back, delete), and templates of a sandbox's
// files and forks (POST .../capture, POST .../fork). A handler class with narrow
// dependencies: the sandboxes a caller may use (SandboxOps), the policy gate, the token limits
// (streaming execs), the metrics (execs counted), the reply helpers, and what a destroy forgets
// elsewhere (the sandbox's terminals and E2B session).
//
// run_exec and exec_options are what the MCP tool exec shares with POST .../exec.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "api/sandboxes/sandbox_ops.h"
#include "core/config/config.h"
#include "core/observability/metrics.h"
#include "http/replies.h"
#include "http/request_context.h"
#include "http/requests.h"
#include "http/token_limits.h"
#include "policy/gate.h"

namespace pvs::service {

// How the policy judges a fork (routes_fork.cc): as `count` creates of `r`
// (PolicyAction::kSandboxCreate) from the files of sandbox `source`.
PolicyRequest fork_policy_request(const CreateRequest& r, const Egress& egress,
                                  const std::string& source, int count);

class SandboxRoutes {
 public:
  struct Deps {
    const ServiceConfig& config;
    SandboxOps& sandboxes;
    PolicyGate& gate;
    TokenLimits& limits;
    Metrics* metrics;
    Replies& replies;
    // Before a sandbox is destroyed: its terminals are closed, its E2B session forgotten.
    std::function<void(const std::string& id)> forget;
  };
  explicit SandboxRoutes(Deps deps) : d_(std::move(deps)) {}

  void create(RequestContext& ctx);  // routes_sandboxes.cc
  void list(RequestContext& ctx);
  void show(RequestContext& ctx);
  void destroy(RequestContext& ctx);
  void internet(RequestContext& ctx);
  void egress_log(RequestContext& ctx);
  void usage(RequestContext& ctx);
  void ttl(RequestContext& ctx);
  void pause(RequestContext& ctx);  // routes_pause.cc
  void resume(RequestContext& ctx);
  void exec(RequestContext& ctx);     // routes_exec.cc
  void capture(RequestContext& ctx);  // routes_fork.cc
  void fork(RequestContext& ctx);
  void snapshot_create(RequestContext& ctx);  // routes_snapshots.cc
  void snapshot_list(RequestContext& ctx);
  void snapshot_rollback(RequestContext& ctx);
  void snapshot_delete(RequestContext& ctx);

  // The ExecOptions of a request: its timeout (else max_exec_timeout_seconds), env, cwd, stdin.
  ExecOptions exec_options(ExecRequest request, std::size_t max_output) const;
  // Runs a command and counts it in the metrics (pvs_exec_total, pvs_exec_duration_seconds).
  Result<ExecResult> run_exec(Sandbox& sandbox, std::string command, ExecOptions options);

 private:
  void exec_stream(RequestContext& ctx, const std::shared_ptr<Sandbox>& sandbox,
                   std::string command, ExecOptions options);
  void account_exec(const Result<ExecResult>& r, std::chrono::steady_clock::time_point start);

  Deps d_;
};

}  // namespace pvs::service
