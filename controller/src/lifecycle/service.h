// A template's service (docs/templates.md, "Start and ready"): what a build writes into the
// template for a recipe's `start` and `ready`, and what runs at every boot of a sandbox made
// from it (create, hot pool member, resume) before the sandbox is handed out:
//
//   /etc/pve-sandbox/template/start          the start command (sh -l, in the SSH user's home)
//   /etc/pve-sandbox/template/ready          the ready check (sh -l; ready when it exits 0)
//   /etc/pve-sandbox/template/ready-timeout  seconds the ready check may take in all
//
// The start command runs under a supervisor (its own session, so no exec's end takes it
// along) that restarts it when it ends (1 s, doubling to 30 s; back to 1 s after a minute
// up) and logs each start and end with the command's output to /var/log/pve-sandbox/start.log
// (root; another SSH user: ~/.pve-sandbox/start.log). The sandbox's own disk says whether it
// has a service: one exec per boot, which returns at once when it has none.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/ssh_session.h"
#include "pvesandbox/template_recipe.h"

namespace pvs::lifecycle {

inline constexpr const char* kServiceDir = "/etc/pve-sandbox/template";

// The files a build writes for `recipe` (none without start and ready).
std::vector<TemplateRecipe::File> service_files(const TemplateRecipe& recipe);

// What an exec of service_up_command may take: the ready check keeps its own limit (at most
// kMaxReadyTimeout); this only guards against a lost channel.
inline constexpr std::chrono::seconds kServiceUpGuard{kMaxReadyTimeout + 30};

// The shell command that starts the service unless its supervisor runs, then waits for the
// ready check: exit 0 ready (or no service), 3 not ready in time (its output says so, with the
// end of the log), 4 the supervisor could not be started.
std::string service_up_command();
// Stops the supervisor and what it started, and removes its log and pid file (a build's check
// leaves nothing in the template).
std::string service_down_command();

// service_up_command over `ssh`: kTimeout when the ready check did not pass in time,
// kUnavailable when the service could not be started, both with what the sandbox said.
Status start_service(SshSession& ssh);

}  // namespace pvs::lifecycle
