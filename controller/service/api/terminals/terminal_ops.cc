// What the terminal routes, their WebSocket and the MCP terminal tools share: finding and opening
// terminals, typing into them under the policy (terminal.input), waiting on their screens.
#include "api/terminals/terminal_routes.h"
#include "http/json.h"
#include "policy/canonical.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {

std::shared_ptr<TerminalEntry> TerminalRoutes::terminal_for(const Principal& who,
                                                            const std::string& sandbox,
                                                            const std::string& tid) {
  auto sb = d_.sandboxes.sandbox_for(who, sandbox);  // 404 for others' sandboxes
  auto entry = d_.terminals.find(sb->id(), tid);
  if (!entry) throw not_found("no terminal " + tid.substr(0, 64) + " in " + sb->id());
  return entry;
}

std::shared_ptr<TerminalEntry> TerminalRoutes::open_terminal(const Principal& who, Sandbox& sandbox,
                                                             const TerminalCreateRequest& request) {
  TerminalOptions o;
  o.command = request.command;
  o.cols = request.cols;
  o.rows = request.rows;
  o.env = request.env;
  o.cwd = request.cwd;
  o.scrollback_lines = static_cast<std::size_t>(d_.config.terminal_scrollback_lines);
  o.max_pending_input = std::max<std::size_t>(1 << 20, d_.config.terminal_max_input_bytes * 4);
  auto entry = d_.terminals.open(sandbox.id(), who.name, request.command,
                                 [&] { return Terminal::open(sandbox, o); });
  if (!entry) throw entry.error();
  return *entry;
}

std::pair<PolicyRequest, PolicyDecision> TerminalRoutes::judge_terminal_open(
    const Principal& who, const TerminalCreateRequest& request) const {
  PolicyRequest open;
  open.action = PolicyAction::kTerminalOpen;
  open.text = request.command;
  for (const auto& [name, value] : request.env) open.env_names.push_back(name);
  open.canonical = canonical_terminal_open(request);  // an approval covers env, cwd and size too
  PolicyDecision d = d_.config.policy.decide(who.name, open);
  if (d.verdict == Verdict::kDeny || (request.command.empty() && request.env.empty()))
    return {open, d};
  PolicyRequest exec = open;  // the command (or the login shell) runs as exec would run it
  exec.action = PolicyAction::kExec;
  PolicyDecision e = d_.config.policy.decide(who.name, exec);
  if (e.verdict == Verdict::kDeny ||
      (e.verdict == Verdict::kApprove && d.verdict != Verdict::kApprove))
    return {exec, e};
  return {open, d};
}

void TerminalRoutes::close_terminal(TerminalEntry& entry) {
  d_.terminals.close(entry.sandbox, entry.id);
}

// Each completed line is judged alone (a pattern's ^ and $ are that line's); a denied line
// refuses the whole input, and the lines that need a person are approved together, in one
// approval that shows them all. A refusal forgets the line and sends C-u, so the shell forgets
// it too.
PolicyGate::Admission TerminalRoutes::admit_lines(const Principal& who, TerminalEntry& entry,
                                                  const std::vector<std::string>& lines,
                                                  const std::string& approval_id, bool async,
                                                  const PolicyGate::WaitProgress& progress) {
  auto [asked, decision] = decide_lines(d_.config.policy, who.name, lines);
  try {
    return d_.gate.admission(who, entry.sandbox, asked, decision, approval_id, async, progress);
  } catch (const PolicyRefusal&) {
    entry.typed.clear();
    if (auto st = entry.terminal->write("\x15"); !st)  // C-u: the shell forgets the line too
      log::debug("terminal " + entry.id + ": " + st.error().message);
    throw;
  }
}

PolicyGate::Admission TerminalRoutes::type_into(const Principal& who, TerminalEntry& entry,
                                                std::string_view typed,
                                                const std::function<Status()>& send,
                                                const std::string& approval_id, bool async,
                                                const PolicyGate::WaitProgress& progress) {
  std::lock_guard lock(entry.input_mu);
  TypedLine::Next next = entry.typed.after(typed);
  // Input whose effect on the line the model does not follow could make the shell run a line
  // the policy never judged: refused, unsent, the model unchanged (docs/policy.md).
  if (!next.understood && d_.config.policy.judges(who.name, PolicyAction::kTerminalInput)) {
    throw unprocessable("terminal_input_not_modelled",
                        "terminal input refused: \"" + next.not_understood.substr(0, 64) +
                            "\" changes the line in a way the terminal.input policy cannot "
                            "follow (cursor, history, completion, yank, Alt-x, escape sequences "
                            "other than F1-F4); type text, Backspace, C-w, C-u or Enter");
  }
  PolicyGate::Admission admitted;
  if (!next.lines.empty()) {
    admitted = admit_lines(who, entry, next.lines, approval_id, async, progress);
    if (admitted.pending) return admitted;
  }
  if (auto st = send(); !st) {
    if (st.error().code == ErrorCode::kTooLarge) throw too_large(st.error().message);
    if (st.error().code == ErrorCode::kInvalidArgument) throw bad_request(st.error().message);
    throw conflict_ended(entry);
  }
  entry.typed.commit(std::move(next));
  return admitted;
}

std::string TerminalRoutes::wait_terminal(TerminalEntry& entry,
                                          const TerminalWaitRequest& request) {
  WaitCondition c;
  c.pattern = request.regex;
  c.quiet = std::chrono::milliseconds(request.quiet_ms);
  c.timeout = std::chrono::milliseconds(request.timeout_ms);
  entry.readers.fetch_add(1);  // not idle while someone waits on it
  WaitResult r = entry.terminal->wait(c);
  entry.readers.fetch_sub(1);
  JsonWriter w;
  w.begin_object().key("outcome").value(to_string(r.outcome));
  w.key("waited_ms").value(static_cast<std::int64_t>(r.waited.count()));
  if (r.outcome == WaitOutcome::kMatched) w.key("match").value(r.match);
  w.key("terminal").raw(terminal_json(entry));
  w.key("screen").raw(
      screen_json(entry.terminal->screen(static_cast<std::size_t>(request.scrollback))));
  return w.end_object().take();
}

}  // namespace pvs::service
