// The MCP terminal tools: terminal_open, terminal_input (type, then wait and show the screen),
// terminal_screen, terminal_close, on the same operations as the terminal routes (terminal_ops.cc).
#include <Poco/JSON/Parser.h>

#include "api/mcp/jsonrpc.h"
#include "api/mcp/tool_impl.h"

namespace pvs::service::mcp {

namespace {

// What a model reads of a terminal: a status line, then the visible screen.
std::string screen_text(const TerminalEntry& entry, const ScreenSnapshot& s,
                        const std::string& outcome) {
  TerminalState st = entry.terminal->state();
  std::string t = "terminal " + entry.id + " ";
  if (st.running) {
    t += "running";
  } else if (st.exit && st.exit->signal.empty() && st.exit->error.empty()) {
    t += "exited with code " + std::to_string(st.exit->exit_code);
  } else {
    t += "ended" + (st.exit && !st.exit->signal.empty() ? " by signal " + st.exit->signal : "");
  }
  t += ", " + std::to_string(s.cols) + "x" + std::to_string(s.rows) + ", cursor at row " +
       std::to_string(s.cursor_row + 1) + " column " + std::to_string(s.cursor_col + 1);
  if (s.alternate_screen) t += ", a full-screen program is drawing";
  if (!s.title.empty()) t += ", title \"" + s.title + "\"";
  if (!outcome.empty()) t += "; wait: " + outcome;
  t += "\n";
  for (const auto& line : s.scrollback) t += line + "\n";
  std::size_t last = s.lines.size();
  while (last > 0 && s.lines[last - 1].empty()) --last;  // trailing blank lines
  for (std::size_t i = 0; i < last; ++i) t += s.lines[i] + "\n";
  return t;
}

// Removes `key` from `o` and returns it as JSON text ("" when absent).
std::string take_member(Poco::JSON::Object::Ptr o, const std::string& key) {
  if (!o->has(key)) return "";
  std::string text = to_json(o->get(key));
  o->remove(key);
  return text;
}

struct TerminalArgs {
  std::shared_ptr<TerminalEntry> entry;
  Poco::JSON::Object::Ptr rest;  // the other arguments
};

TerminalArgs terminal_args(ToolContext& c) {
  auto [id, rest_text] = c.split_sandbox_id();
  auto rest = Poco::JSON::Parser().parse(rest_text).extract<Poco::JSON::Object::Ptr>();
  std::string tid = rest->optValue<std::string>("terminal_id", "");
  if (tid.empty()) throw bad_request("terminal_id: required (terminal_open returns it)");
  rest->remove("terminal_id");
  c.record.sandbox = id;
  auto entry = c.ops.terminals.terminal_for(c.call.principal, id, tid);
  return {std::move(entry), rest};
}

ToolResult screen_result(TerminalEntry& entry, std::size_t scrollback, const std::string& outcome,
                         const std::string& wait_json) {
  ScreenSnapshot s = entry.terminal->screen(scrollback);
  std::string json = wait_json.empty() ? "{\"terminal\":" + terminal_json(entry) +
                                             ",\"screen\":" + screen_json(s) + "}"
                                       : wait_json;
  return {false, screen_text(entry, s, outcome), json};
}

}  // namespace

ToolResult tool_terminal_open(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  auto req = parse_terminal_create(rest);
  if (!req) throw req.error();
  c.record.params_json =
      "{\"command\":" + to_json_string(req->command.substr(0, 4096)) + "}";  // no env values
  auto sandbox = c.sandbox(id);
  auto [asked, decision] = c.ops.terminals.judge_terminal_open(c.call.principal, *req);
  try {
    auto a = c.gate.admission(c.call.principal, id, asked, decision, "", false, c.call.progress);
    c.record.policy_json = a.policy_json;
    if (a.pending) throw PolicyGate::still_pending(*a.pending);
  } catch (const PolicyRefusal& refused) {
    c.record.policy_json = refused.policy_json;
    throw refused.error;
  }
  auto entry = c.ops.terminals.open_terminal(c.call.principal, *sandbox, *req);
  c.record.params_json.insert(1, "\"terminal\":\"" + entry->id + "\",");
  // The first prompt or the program's first screen.
  TerminalWaitRequest first;
  first.quiet_ms = 200;
  first.timeout_ms = 3000;
  std::string waited = c.ops.terminals.wait_terminal(*entry, first);
  return screen_result(*entry, 0, "", waited);
}

ToolResult tool_terminal_input(ToolContext& c) {
  TerminalArgs a = terminal_args(c);
  const ServiceConfig& config = c.ops.config;
  std::string wait_text = take_member(a.rest, "wait");
  auto items = parse_terminal_input(to_json(a.rest), config.terminal_max_input_bytes);
  if (!items) throw items.error();
  auto wait =
      parse_terminal_wait(wait_text.empty() ? "{\"quiet_ms\":300,\"timeout_ms\":10000}" : wait_text,
                          config.terminal_max_wait_seconds);
  if (!wait) throw bad_request("wait." + wait.error().message);
  std::uint64_t bytes = 0;
  std::string typed;
  for (const auto& i : *items) {
    bytes += i.value.size();
    typed += i.kind == InputItem::Kind::kKey ? *encode_key(i.value) : i.value;
  }
  c.record.params_json = "{\"terminal\":\"" + a.entry->id +
                         "\",\"items\":" + std::to_string(items->size()) +
                         ",\"bytes\":" + std::to_string(bytes) + "}";
  TerminalEntry& entry = *a.entry;
  PolicyGate::Admission admitted;
  try {
    admitted = c.ops.terminals.type_into(
        c.call.principal, entry, typed, [&] { return entry.terminal->send(*items); },
        c.call.resume_approval, false, c.call.progress);
  } catch (const PolicyRefusal& refused) {  // not an ApiError: the tool's error, audited
    c.record.policy_json = refused.policy_json;
    throw refused.error;
  }
  c.record.policy_json = admitted.policy_json;
  if (admitted.pending) {
    if (c.call.pending_approval) *c.call.pending_approval = admitted.pending->id;
    throw PolicyGate::still_pending(*admitted.pending);
  }
  std::string json = c.ops.terminals.wait_terminal(entry, *wait);
  auto outcome = Poco::JSON::Parser().parse(json).extract<Poco::JSON::Object::Ptr>();
  return screen_result(entry, static_cast<std::size_t>(wait->scrollback),
                       outcome->getValue<std::string>("outcome"), json);
}

ToolResult tool_terminal_screen(ToolContext& c) {
  TerminalArgs a = terminal_args(c);
  JsonBody body = parse_arguments(to_json(a.rest));
  std::size_t scrollback = 0;
  if (auto v = body.integer("scrollback", 0, 100000)) scrollback = static_cast<std::size_t>(*v);
  finish_arguments(body);
  return screen_result(*a.entry, scrollback, "", "");
}

ToolResult tool_terminal_close(ToolContext& c) {
  TerminalArgs a = terminal_args(c);
  finish_arguments(parse_arguments(to_json(a.rest)));
  c.record.params_json = "{\"terminal\":\"" + a.entry->id + "\"}";
  c.ops.terminals.close_terminal(*a.entry);
  return {false, "closed " + a.entry->id, "{\"closed\":\"" + a.entry->id + "\"}"};
}

}  // namespace pvs::service::mcp
