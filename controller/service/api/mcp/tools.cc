// The MCP tools that act on sandboxes (create, list, destroy, internet) and run commands
// (exec), and the dispatcher that runs any tool and audits it. File tools: tools_files.cc.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "api/mcp/jsonrpc.h"
#include "api/mcp/tool_impl.h"
#include "api/ports/port_routes.h"
#include "api/sandboxes/egress_log_view.h"
#include "api/sandboxes/output_cap.h"
#include "api/templates/template_routes.h"
#include "http/requests.h"
#include "policy/canonical.h"
#include "policy/egress_access.h"
#include "pvesandbox/common/log.h"

namespace pvs::service::mcp {

// ---- ToolContext ------------------------------------------------------------------------------

std::string ToolContext::arguments_json() const {
  return to_json(call.arguments);
}

std::pair<std::string, std::string> ToolContext::split_sandbox_id() const {
  Poco::JSON::Object::Ptr rest = new Poco::JSON::Object(*call.arguments);
  if (!rest->has("sandbox_id")) throw bad_request("sandbox_id: required");
  Poco::Dynamic::Var v = rest->get("sandbox_id");
  if (!v.isString()) throw bad_request("sandbox_id: must be a string");
  std::string id = v.extract<std::string>();
  if (!is_sandbox_id(id))
    throw bad_request(
        "sandbox_id: not a sandbox id (sb- and 12 hex digits, as sandbox_list shows)");
  rest->remove("sandbox_id");
  return {id, to_json(rest)};
}

std::shared_ptr<Sandbox> ToolContext::sandbox(const std::string& id) {
  record.sandbox = id;
  return ops.sandboxes.sandbox_for(call.principal, id);
}

JsonBody parse_arguments(const std::string& text) {
  auto body = JsonBody::parse(text);
  if (!body) throw body.error();
  return std::move(*body);
}

void finish_arguments(const JsonBody& body) {
  if (auto e = body.finish()) throw *e;
}

namespace {

std::string sandbox_text(const SandboxInfo& info) {
  return sandbox_json(info);
}

// ---- sandboxes --------------------------------------------------------------------------------

ToolResult tool_create(ToolContext& c) {
  std::string args = c.arguments_json();
  auto req = parse_create(args, c.ops.config);
  if (!req) throw req.error();
  c.record.params_json = args;  // no secrets in a create
  PolicyRequest asked;
  asked.action = PolicyAction::kSandboxCreate;
  asked.cpus = req->cpus;
  asked.memory_mb = req->memory_mb;
  asked.disk_gb = req->disk_gb;
  auto egress = resolve_egress(req->internet, c.ops.config, c.call.principal.name);
  if (!egress) throw egress.error();
  set_policy_egress(asked, *egress);
  asked.canonical = canonical_create(*req, *egress);
  c.record.policy_json = c.gate.admit_tool(c.call.principal, "", asked, c.call.progress,
                                           c.call.resume_approval, c.call.pending_approval);
  auto sandbox = c.ops.sandboxes.create_for(c.call.principal, *req, *egress);
  SandboxInfo info = sandbox->info();
  c.record.sandbox = info.id;
  std::string json = sandbox_text(info);
  return {false, json, json};
}

ToolResult tool_list(ToolContext& c) {
  JsonBody body = parse_arguments(c.arguments_json());
  Labels selector;
  if (auto v = body.string_map("labels", kMaxLabels, kMaxLabelValue)) {
    if (auto e = label_error(*v)) body.reject("labels", *e);
    selector = std::move(*v);
  }
  finish_arguments(body);
  JsonWriter w;
  w.begin_object().key("sandboxes").begin_array();
  for (const auto& info : c.ops.sandboxes.list_for(c.call.principal, selector))
    w.raw(sandbox_text(info));
  std::string json = w.end_array().end_object().take();
  return {false, json, json};
}

ToolResult tool_destroy(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  finish_arguments(parse_arguments(rest));
  auto sandbox = c.sandbox(id);
  if (auto st = sandbox->destroy(); !st) throw from_error(st.error());
  return {false, "destroyed " + id, "{\"destroyed\":\"" + id + "\"}"};
}

ToolResult tool_pause(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  finish_arguments(parse_arguments(rest));
  auto sandbox = c.sandbox(id);
  if (auto st = sandbox->pause(PauseMode::kFilesystem); !st) throw from_error(st.error());
  std::string json = sandbox_text(sandbox->info());
  return {false, json, json};
}

ToolResult tool_resume(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  auto ttl = parse_resume(rest, c.ops.config);
  if (!ttl) throw ttl.error();
  c.record.params_json = "{\"ttl_seconds\":" + std::to_string(*ttl) + "}";
  auto sandbox = c.sandbox(id);
  if (auto st = sandbox->resume(std::chrono::seconds(*ttl)); !st) throw from_error(st.error());
  std::string json = sandbox_text(sandbox->info());
  return {false, json, json};
}

ToolResult tool_capture(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  auto name = parse_capture(rest);
  if (!name) throw name.error();
  c.record.params_json = rest;
  auto sandbox = c.sandbox(id);
  JsonWriter w;
  write_template(w, c.ops.sandboxes.capture_for(c.call.principal, *sandbox, *name));
  std::string json = w.take();
  return {false, json, json};
}

ToolResult tool_fork(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  auto req = parse_fork(rest, c.ops.config);
  if (!req) throw req.error();
  c.record.params_json = rest;
  auto sandbox = c.sandbox(id);
  auto info = sandbox->info();
  CreateRequest create = fork_request(info, req->ttl_seconds);
  c.record.policy_json = c.gate.admit_tool(
      c.call.principal, info.id, fork_policy_request(create, info.egress, info.id, req->count),
      c.call.progress, c.call.resume_approval, c.call.pending_approval);
  auto forks =
      c.ops.sandboxes.fork_for(c.call.principal, *sandbox, req->count, create, info.egress);
  JsonWriter w;
  w.begin_object().key("sandboxes").begin_array();
  for (const auto& f : forks) w.raw(sandbox_json(f->info()));
  std::string json = w.end_array().end_object().take();
  return {false, json, json};
}

ToolResult tool_ports(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  finish_arguments(parse_arguments(rest));
  auto sandbox = c.sandbox(id);
  auto found = read_listening(*sandbox);
  std::string text;
  for (const auto& p : found) {
    text += std::to_string(p.port) + " on";
    for (const auto& a : p.addresses) text += " " + a;
    text += ": /v1/sandboxes/" + id + "/ports/" + std::to_string(p.port) + "/\n";
  }
  if (text.empty()) text = "nothing listens in " + id + "\n";
  return {false, text, ports::listening_json(id, found)};
}

ToolResult tool_preview(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  auto req = parse_preview_request(rest, c.ops.config.ports_preview_max_seconds);
  if (!req) throw req.error();
  auto sandbox = c.sandbox(id);
  auto link = c.ops.ports.preview_link(c.call.principal, id, req->port, req->seconds);
  JsonWriter w;
  w.begin_object().key("sandbox").value(id).key("port").value(static_cast<int>(req->port));
  w.key("path").value(link.path).key("expires_at").value(iso_time(link.expires)).end_object();
  c.record.params_json = "{\"port\":" + std::to_string(req->port) + "}";
  return {false,
          "preview link to port " + std::to_string(req->port) + " of " + id + " until " +
              iso_time(link.expires) + " (no token needed; path on this server): " + link.path,
          w.take()};
}

ToolResult tool_internet(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  auto req = parse_internet(rest);
  if (!req) throw req.error();
  c.record.params_json = "{\"internet\":" + egress_request_json(*req) + "}";
  auto sandbox = c.sandbox(id);
  auto egress = resolve_egress(*req, c.ops.config, c.call.principal.name);
  if (!egress) throw egress.error();
  // Read once: the approval shows its refused names, the answer those still refused.
  auto before = egress_log_or_empty(*sandbox);
  PolicyRequest asked = internet_request(before, *egress);
  c.record.policy_json = c.gate.admit_tool(c.call.principal, id, asked, c.call.progress,
                                           c.call.resume_approval, c.call.pending_approval);
  if (auto st = sandbox->set_egress(*egress); !st) throw from_error(st.error());
  // The names it was refused that the new egress still refuses: the agent can ask for the
  // right one next.
  auto still = refused_names(before, 20, &*egress);
  std::string json = sandbox_text(sandbox->info());
  JsonWriter w;  // the sandbox's fields and still_refused
  w.begin_array();
  for (const auto& n : still) w.value(n);
  w.end_array();
  json.pop_back();
  json += ",\"still_refused\":" + w.take() + "}";
  std::string refusals = refusals_text(before, 20, &*egress);
  if (refusals.empty()) return {false, json, json};
  return {false, json + "\nstill " + refusals, json};
}

// ---- exec -------------------------------------------------------------------------------------

std::string exec_text(const ExecResult& r, const std::string& out, const std::string& err,
                      int timeout) {
  std::string t;
  if (r.timed_out)
    t = "timed out after " + std::to_string(timeout) + " s: the command was killed\n";
  else if (!r.exit_signal.empty())
    t = "killed by signal " + r.exit_signal + "\n";
  else
    t = "exit code: " + std::to_string(r.exit_code) + "\n";
  t += "stdout:\n" + (out.empty() ? std::string("(empty)") : out);
  if (!out.empty() && out.back() != '\n') t += '\n';
  if (!err.empty() || r.err_total > 0)
    t += (out.empty() ? "\n" : "") + std::string("stderr:\n") + err;
  return t;
}

// Runs the command on a worker thread and reports progress on this one, once a second.
Result<ExecResult> exec_with_progress(ToolContext& c, Sandbox& sandbox, std::string command,
                                      ExecOptions options, int timeout) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<Result<ExecResult>> result;
    std::atomic<std::uint64_t> bytes{0};
  };
  auto state = std::make_shared<State>();
  options.on_output = [state](ExecStream, std::string_view data) { state->bytes += data.size(); };
  SandboxRoutes& exec = c.ops.exec;
  std::thread worker([state, &exec, &sandbox, command = std::move(command),
                      options = std::move(options)]() mutable {
    auto r = exec.run_exec(sandbox, std::move(command), std::move(options));
    std::lock_guard lock(state->mu);
    state->result = std::move(r);
    state->cv.notify_one();
  });
  auto start = std::chrono::steady_clock::now();
  std::unique_lock lock(state->mu);
  while (!state->cv.wait_for(lock, std::chrono::seconds(1),
                             [&] { return state->result.has_value(); })) {
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string message = "running for " + std::to_string(static_cast<int>(elapsed)) + " s; " +
                          std::to_string(state->bytes.load()) + " bytes of output so far";
    lock.unlock();
    try {
      c.call.progress(elapsed, timeout, message);
    } catch (const std::exception& e) {
      log::debug("mcp progress: " + std::string(e.what()));
    }
    lock.lock();
  }
  lock.unlock();
  worker.join();
  return std::move(*state->result);
}

ToolResult tool_exec(ToolContext& c) {
  auto [id, rest] = c.split_sandbox_id();
  const ServiceConfig& config = c.ops.config;
  auto req = parse_exec(rest, config);
  if (!req) throw req.error();
  if (req->timeout_seconds == 0)
    req->timeout_seconds =
        std::min(config.mcp.exec_timeout_seconds, config.max_exec_timeout_seconds);
  int timeout = req->timeout_seconds;
  {
    JsonWriter p;  // as REST: the command, not stdin or env values
    p.begin_object().key("command").value(req->command.substr(0, 4096));
    p.key("cwd").value(req->cwd).key("env_names").begin_array();
    for (const auto& [k, v] : req->env) p.value(k);
    p.end_array().key("stdin_bytes").value(static_cast<std::uint64_t>(req->stdin_data.size()));
    p.key("timeout_seconds").value(timeout).end_object();
    c.record.params_json = p.take();
  }
  auto sandbox = c.sandbox(id);
  PolicyRequest asked;
  asked.action = PolicyAction::kExec;
  asked.text = req->command;
  for (const auto& [name, value] : req->env) asked.env_names.push_back(name);
  asked.canonical = canonical_exec(*req);
  asked.content = req->stdin_data;
  c.record.policy_json = c.gate.admit_tool(c.call.principal, id, asked, c.call.progress,
                                           c.call.resume_approval, c.call.pending_approval);
  AuditRecord start = c.record;
  start.action = "mcp.exec.start";
  c.ops.audit(start);
  std::size_t cap = static_cast<std::size_t>(config.mcp.exec_output_bytes);
  std::string command = std::move(req->command);
  ExecOptions options = c.ops.exec.exec_options(std::move(*req), cap);
  auto r = c.call.progress
               ? exec_with_progress(c, *sandbox, std::move(command), std::move(options), timeout)
               : c.ops.exec.run_exec(*sandbox, std::move(command), std::move(options));
  if (!r) throw from_error(r.error());
  std::string out = mark_omitted(r->out, r->out_total, cap);
  std::string err = mark_omitted(r->err, r->err_total, cap);
  JsonWriter s;
  s.begin_object().key("exit_code").value(r->exit_code);
  if (!r->exit_signal.empty()) s.key("signal").value(r->exit_signal);
  s.key("stdout").value(out).key("stderr").value(err);
  s.key("stdout_bytes").value(r->out_total).key("stderr_bytes").value(r->err_total);
  s.key("timed_out").value(r->timed_out).key("truncated").value(r->truncated);
  s.key("duration_ms").value(static_cast<std::int64_t>(r->duration.count() / 1000));
  return {false, exec_text(*r, out, err, timeout), s.end_object().take()};
}

// ---- the table --------------------------------------------------------------------------------

struct Handler {
  std::string_view name;
  ToolResult (*run)(ToolContext&);
};

constexpr Handler kHandlers[] = {
    {"sandbox_create", tool_create},
    {"sandbox_list", tool_list},
    {"sandbox_destroy", tool_destroy},
    {"sandbox_ports", tool_ports},
    {"sandbox_preview", tool_preview},
    {"sandbox_pause", tool_pause},
    {"sandbox_resume", tool_resume},
    {"sandbox_capture", tool_capture},
    {"sandbox_fork", tool_fork},
    {"exec", tool_exec},
    {"read_file", tool_read_file},
    {"write_file", tool_write_file},
    {"edit_file", tool_edit_file},
    {"list_dir", tool_list_dir},
    {"internet", tool_internet},
    {"terminal_open", tool_terminal_open},
    {"terminal_input", tool_terminal_input},
    {"terminal_screen", tool_terminal_screen},
    {"terminal_close", tool_terminal_close},
};

}  // namespace

ToolResult run_tool(const ToolOps& ops, const ToolCall& call) {
  auto start = std::chrono::steady_clock::now();
  ToolContext c{ops, ops.gate, call, {}};
  c.record.request_id = call.request_id;
  c.record.token = call.principal.name;
  c.record.remote = call.remote;
  c.record.action = "mcp." + call.name;
  c.record.params_json = "{}";
  ToolResult result;
  ApiError error;
  bool failed = false;
  try {
    const Handler* h = nullptr;
    for (const Handler& candidate : kHandlers)
      if (candidate.name == call.name) h = &candidate;
    if (!h) throw internal_error("tool " + call.name + " has no handler");
    result = h->run(c);
  } catch (const ApiError& e) {
    error = e;
    failed = true;
  } catch (const std::exception& e) {
    log::error("mcp tool " + call.name + ": " + e.what());
    error = internal_error("internal error");
    failed = true;
  }
  if (failed) {
    result = ToolResult{true, error.message, ""};
    c.record.status = error.status;
    c.record.error_code = error.code;
    c.record.error_message = error.message;
  } else {
    c.record.status = 200;
  }
  c.record.duration_ms = static_cast<std::int64_t>(seconds_since(start) * 1000);
  ops.audit(c.record);
  return result;
}

}  // namespace pvs::service::mcp
