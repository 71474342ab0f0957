// Commands in a sandbox: buffered (one JSON reply) or streamed (NDJSON events as output
// arrives).
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "api/sandboxes/output_cap.h"
#include "api/sandboxes/sandbox_routes.h"
#include "http/json.h"
#include "http/requests.h"
#include "policy/canonical.h"

namespace pvs::service {

namespace {

// The buffered reply. Output caps count encoded bytes (escaping can make one byte six): what
// does not fit is cut and the reply says truncated.
std::string exec_result_json(const ExecResult& r, std::size_t max_encoded) {
  std::string out = "{\"exit_code\":" + std::to_string(r.exit_code);
  if (!r.exit_signal.empty()) {
    out += ",\"signal\":";
    append_json_string_capped(out, r.exit_signal, 64);
  }
  out += ",\"stdout\":";
  bool cut = append_json_string_capped(out, r.out, max_encoded) < r.out.size();
  out += ",\"stderr\":";
  cut |= append_json_string_capped(out, r.err, max_encoded) < r.err.size();
  out += ",\"stdout_bytes\":" + std::to_string(r.out_total);
  out += ",\"stderr_bytes\":" + std::to_string(r.err_total);
  out += std::string(",\"timed_out\":") + (r.timed_out ? "true" : "false");
  out += std::string(",\"truncated\":") + (r.truncated || cut ? "true" : "false");
  out += ",\"duration_ms\":" + std::to_string(r.duration.count() / 1000) + "}";
  return out;
}

// Counts and caps the bytes a streaming exec buffers between the SSH thread and the socket.
struct ExecStreamState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<ExecStream, std::string>> chunks;
  std::size_t buffered = 0;
  bool dropped = false;
  bool done = false;
  std::optional<Result<ExecResult>> result;
};

constexpr std::size_t kStreamBufferCap = 8 << 20;

}  // namespace

void SandboxRoutes::exec(RequestContext& ctx) {
  auto req = parse_exec(d_.replies.json_body(ctx), d_.config);
  if (!req) throw req.error();
  {
    // The command is recorded; stdin and env values may hold secrets and are not.
    JsonWriter p;
    p.begin_object().key("command").value(req->command.substr(0, 4096));
    p.key("cwd").value(req->cwd).key("env_names").begin_array();
    for (const auto& [k, v] : req->env) p.value(k);
    p.end_array().key("stdin_bytes").value(static_cast<std::uint64_t>(req->stdin_data.size()));
    p.key("timeout_seconds").value(req->timeout_seconds).end_object();
    ctx.params_json = p.take();
  }
  auto sandbox = d_.sandboxes.find(ctx);
  PolicyRequest asked;
  asked.action = PolicyAction::kExec;
  asked.text = req->command;
  for (const auto& [name, value] : req->env) asked.env_names.push_back(name);
  asked.canonical = canonical_exec(*req);
  asked.content = req->stdin_data;
  if (!d_.gate.admit(ctx, asked)) return;
  std::string command = std::move(req->command);
  ExecOptions options = exec_options(std::move(*req), d_.config.max_exec_output_bytes);
  bool streaming = ctx.request->get("Accept", "").find("application/x-ndjson") != std::string::npos;
  auto stream_slot = streaming ? d_.limits.acquire(ctx.principal->name, TokenLimits::Kind::kStream)
                               : std::optional<TokenLimits::Slot>();
  if (streaming && !stream_slot) {
    ctx.response->set("Retry-After", "1");
    throw limit_exceeded("token " + ctx.principal->name + " has " +
                         std::to_string(d_.limits.limit(TokenLimits::Kind::kStream)) +
                         " streaming execs running (auth.max_streams_per_token)");
  }
  // On record when it starts, so a long or crashed command is in the audit log too; the
  // "sandbox.exec" record follows with the outcome.
  {
    std::string action = std::exchange(ctx.action, "sandbox.exec.start");
    d_.replies.audit(ctx, 0, nullptr);
    ctx.action = action;
  }
  if (streaming) {
    exec_stream(ctx, sandbox, std::move(command), std::move(options));
    return;
  }
  auto r = run_exec(*sandbox, std::move(command), std::move(options));
  if (!r) throw from_error(r.error());
  d_.replies.send_json(
      ctx, 200,
      exec_result_json(*r, static_cast<std::size_t>(d_.config.max_exec_output_bytes) + 2));
}

ExecOptions SandboxRoutes::exec_options(ExecRequest req, std::size_t max_output) const {
  ExecOptions options;
  options.stdin_data = std::move(req.stdin_data);
  options.env = std::move(req.env);
  options.cwd = std::move(req.cwd);
  options.timeout = std::chrono::seconds(
      req.timeout_seconds > 0 ? req.timeout_seconds : d_.config.max_exec_timeout_seconds);
  options.max_output = max_output;
  return options;
}

Result<ExecResult> SandboxRoutes::run_exec(Sandbox& sandbox, std::string command,
                                           ExecOptions options) {
  auto started = std::chrono::steady_clock::now();
  auto r = sandbox.exec(std::move(command), std::move(options));
  account_exec(r, started);
  return r;
}

void SandboxRoutes::account_exec(const Result<ExecResult>& r,
                                 std::chrono::steady_clock::time_point start) {
  std::string result = !r                  ? "error"
                       : r->timed_out      ? "timeout"
                       : r->exit_code == 0 ? "ok"
                                           : "nonzero";
  d_.metrics->inc("pvs_exec_total", {{"result", result}});
  d_.metrics->observe("pvs_exec_duration_seconds", {}, seconds_since(start));
}

// Streaming: start, then stdout/stderr chunks as they arrive, then exit (or error).
void SandboxRoutes::exec_stream(RequestContext& ctx, const std::shared_ptr<Sandbox>& sandbox,
                                std::string command, ExecOptions options) {
  auto started = std::chrono::steady_clock::now();
  auto state = std::make_shared<ExecStreamState>();
  options.on_output = [state](ExecStream which, std::string_view data) {
    std::lock_guard lock(state->mu);
    if (state->buffered + data.size() > kStreamBufferCap) {
      state->dropped = true;  // the client reads too slowly; never block the SSH thread
      return;
    }
    state->buffered += data.size();
    state->chunks.emplace_back(which, std::string(data));
    state->cv.notify_one();
  };
  std::ostream& out = start_ndjson(ctx);
  auto emit = [&out](const std::string& line) { emit_line(out, line); };
  {
    JsonWriter w;
    w.begin_object().key("type").value("start").key("sandbox").value(sandbox->id()).end_object();
    emit(w.take());
  }
  std::thread worker(
      [state, sandbox, command = std::move(command), options = std::move(options)]() mutable {
        auto r = sandbox->exec(std::move(command), std::move(options));
        std::lock_guard lock(state->mu);
        state->result = std::move(r);
        state->done = true;
        state->cv.notify_one();
      });
  while (true) {
    std::deque<std::pair<ExecStream, std::string>> chunks;
    bool done = false;
    {
      std::unique_lock lock(state->mu);
      state->cv.wait(lock, [&] { return state->done || !state->chunks.empty(); });
      chunks.swap(state->chunks);
      state->buffered = 0;
      done = state->done;
    }
    for (const auto& [which, data] : chunks) {
      JsonWriter w;
      w.begin_object().key("type").value(which == ExecStream::kStdout ? "stdout" : "stderr");
      w.key("data").value(data).end_object();
      emit(w.take());
    }
    if (done) break;
  }
  worker.join();
  const Result<ExecResult>& r = *state->result;
  account_exec(r, started);
  JsonWriter w;
  w.begin_object();
  if (r) {
    d_.replies.audit(ctx, 200, nullptr);
    w.key("type").value("exit").key("exit_code").value(r->exit_code);
    if (!r->exit_signal.empty()) w.key("signal").value(r->exit_signal);
    w.key("timed_out").value(r->timed_out);
    w.key("truncated").value(r->truncated || state->dropped);
    w.key("duration_ms").value(static_cast<std::int64_t>(r->duration.count() / 1000));
  } else {
    ApiError e = from_error(r.error());
    d_.replies.audit(ctx, e.status, &e);
    w.key("type").value("error").key("error").begin_object();
    w.key("code").value(e.code).key("message").value(e.message).end_object();
  }
  w.end_object();
  emit(w.take());
}

}  // namespace pvs::service
