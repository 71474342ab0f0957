// A template's service: its files, the boot-time command and its supervisor (service.h).
#include "service.h"

#include <cctype>
#include <chrono>

namespace pvs::lifecycle {

namespace {

// The supervisor: $1 the start command's file, $2 its pid file. Runs the command, logs its end
// and runs it again after a delay that doubles from 1 s to 30 s and starts over once a run
// lasted a minute. Its process group holds what the command starts (service_down_command).
constexpr const char* kSupervisor = R"SH(echo $$ > "$2"
delay=1
while :; do
  echo "pve-sandbox: $(date -u +%FT%TZ) starting the start command ($1)"
  t0=$(date +%s)
  sh -l "$1"
  rc=$?
  [ $(( $(date +%s) - t0 )) -lt 60 ] || delay=1
  echo "pve-sandbox: $(date -u +%FT%TZ) the start command exited with status $rc; again in $delay s"
  sleep "$delay"
  delay=$(( delay * 2 )); [ "$delay" -le 30 ] || delay=30
done
)SH";

// Where the log and the pid file live for the SSH user: root's in /var/log and /run.
constexpr const char* kPlaces = R"SH(d=/etc/pve-sandbox/template
if [ "$(id -u)" = 0 ]; then run=/run/pve-sandbox; log=/var/log/pve-sandbox/start.log
else run=$HOME/.pve-sandbox; log=$HOME/.pve-sandbox/start.log; fi
)SH";

// Starts the supervisor unless the pid file names a live one (a pid file left on the disk by
// an earlier boot names nothing, or another process), then waits for the ready check.
constexpr const char* kUp = R"SH([ -f $d/start ] || [ -f $d/ready ] || exit 0
mkdir -p "$run" "${log%/*}" || exit 4
if [ -f $d/start ]; then
  pid=$(cat "$run/start.pid" 2>/dev/null)
  if [ -z "$pid" ] || ! grep -qa pve-sandbox-start "/proc/$pid/cmdline" 2>/dev/null; then
    (cd && setsid -f sh -c "$supervisor" pve-sandbox-start $d/start "$run/start.pid" \
      </dev/null >>"$log" 2>&1) || { echo "the start command's supervisor did not start"; exit 4; }
  fi
fi
[ -f $d/ready ] || exit 0
t=$(cat $d/ready-timeout 2>/dev/null); t=${t:-120}
end=$(( $(date +%s) + t ))
while left=$(( end - $(date +%s) )); [ "$left" -gt 0 ]; do
  (cd && timeout -k 1 "$left" sh -l $d/ready) >/dev/null 2>&1 </dev/null && exit 0
  sleep 0.2
done
echo "the ready check did not pass in $t s"
[ -s "$log" ] && { echo "the end of $log:"; tail -n 20 "$log"; }
exit 3
)SH";

constexpr const char* kDown = R"SH(pid=$(cat "$run/start.pid" 2>/dev/null)
[ -n "$pid" ] && grep -qa pve-sandbox-start "/proc/$pid/cmdline" 2>/dev/null &&
  kill -TERM -- "-$pid" 2>/dev/null
rm -f "$run/start.pid" "$log"
true
)SH";

}  // namespace

std::vector<TemplateRecipe::File> service_files(const TemplateRecipe& r) {
  std::vector<TemplateRecipe::File> out;
  if (r.start.empty() && r.ready.empty()) return out;
  const std::string dir = kServiceDir;
  if (!r.start.empty()) out.push_back({dir + "/start", r.start + "\n", 0644});
  if (!r.ready.empty()) out.push_back({dir + "/ready", r.ready + "\n", 0644});
  int timeout = r.ready_timeout_seconds > 0 ? r.ready_timeout_seconds : kDefaultReadyTimeout;
  out.push_back({dir + "/ready-timeout", std::to_string(timeout) + "\n", 0644});
  return out;
}

std::string service_up_command() {
  return "supervisor=" + ssh_detail::shell_quote(kSupervisor) + "\n" + kPlaces + kUp;
}

std::string service_down_command() {
  return std::string(kPlaces) + kDown;
}

Status start_service(SshSession& ssh) {
  ExecOptions o;
  o.timeout = kServiceUpGuard;
  o.max_output = 16 << 10;
  auto r = ssh.exec(service_up_command(), std::move(o));
  if (!r) return fail(r.error().code, "the template's service: " + r.error().message);
  if (r->exit_code == 0) return {};
  std::string said = r->out + r->err;  // what the script printed: the log's end, at most 2 KiB
  while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) said.pop_back();
  if (said.size() > 2048) said = "..." + said.substr(said.size() - 2048);
  if (r->exit_code == 3) return fail(ErrorCode::kTimeout, "the template's service: " + said);
  return fail(ErrorCode::kUnavailable, "the template's service did not start (exit " +
                                           std::to_string(r->exit_code) +
                                           (said.empty() ? ")" : "): " + said));
}

}  // namespace pvs::lifecycle
