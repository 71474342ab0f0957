// envd's Connect RPCs (docs/e2b.md), served by the controller over the sandbox's SSH session:
// POST /e2b/envd/<service>/<Method> (and the same at / for Host 49983-<id>.<domain>). The
// sandbox comes from E2b-Sandbox-Id (or the Host name), the caller is proved by X-Access-Token
// (the sandbox's envdAccessToken), and the call acts for the sandbox's owner (the token that
// created it, whoever connected or listed it since), within that token's per-token limits: the
// same ownership, limits, policy, approvals, audit and metrics as REST. What the policy judges
// here (docs/policy.md "The E2B API"): a Start as exec (a pty also as terminal.open and an
// interactive terminal.attach), with the sandbox's envVars among its env names; stdin lines
// under terminal.input rules; a Move once, both ends, its approval binding what lands.
#include <charconv>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "api/files/real_path.h"
#include "api/ports/port_proxy.h"
#include "e2b/connect_stream.h"
#include "e2b/control_wire.h"
#include "e2b/e2b_routes.h"
#include "e2b/filesystem/dir_watch.h"
#include "e2b/filesystem/files_wire.h"
#include "e2b/filesystem/fs_ops.h"
#include "e2b/sessions.h"
#include "http/auth.h"
#include "http/chunk_frames.h"
#include "http/json.h"
#include "policy/canonical.h"
#include "policy/typed_line.h"

namespace pvs::service {
namespace {

using e2b::ConnectCode;
using e2b::ConnectError;

// An error with a Connect code of its own (ApiErrors are mapped by e2b::from_api_error).
struct ConnectFailure {
  ConnectError error;
};

[[noreturn]] void fail_with(ConnectCode code, std::string message) {
  throw ConnectFailure{{code, std::move(message)}};
}

template <typename T>
T take(e2b::Parsed<T> parsed) {
  if (!parsed) throw ConnectFailure{*parsed.error};
  return std::move(*parsed.value);
}

template <typename T>
T take(e2b::FsResult<T> r) {
  if (r.error) throw ConnectFailure{*r.error};
  return std::move(*r.value);
}

void check(const Status& st) {
  if (!st) throw ConnectFailure{e2b::connect_error_of(st.error())};
}

bool is_stream_method(const std::string& name) {
  return name == "process.Process/Start" || name == "process.Process/Connect" ||
         name == "filesystem.Filesystem/WatchDir";
}

ConnectError connect_error_of(const ApiError& e) {
  // An approval a person has not decided yet: the call may be repeated once it is approved.
  if (e.message.find(" is pending: a person must approve") != std::string::npos)
    return {ConnectCode::kFailedPrecondition, e.message};
  return e2b::from_api_error(e);
}

// The strictest decision on `asks` (deny over approve over allow; the first of equals) and the
// request it was made on: what one call that is several actions at once is admitted as.
std::pair<PolicyRequest, PolicyDecision> strictest(const Policy& policy, const std::string& token,
                                                   std::vector<PolicyRequest> asks) {
  std::size_t best = 0;
  PolicyDecision decided;
  for (std::size_t i = 0; i < asks.size(); ++i) {
    PolicyDecision d = policy.decide(token, asks[i]);
    if (i == 0 || strictness(d.verdict) > strictness(decided.verdict)) {
      best = i;
      decided = std::move(d);
    }
  }
  return {std::move(asks[best]), std::move(decided)};
}

// A Start is exec; a pty is also a terminal opened (terminal.open, on the same command line)
// and attached to interactively (terminal.attach "interactive"), as REST's open and WebSocket
// are. Its env names are the sandbox's envVars and its own envs: both are its environment.
std::pair<PolicyRequest, PolicyDecision> judge_start(
    const Policy& policy, const std::string& token, const e2b::StartRequest& req,
    const std::map<std::string, std::string>& defaults) {
  PolicyRequest exec;
  exec.action = PolicyAction::kExec;
  exec.text = e2b::policy_text(req.process);
  for (const auto& [name, value] : defaults) exec.env_names.push_back(name);
  for (const auto& [name, value] : req.process.envs) exec.env_names.push_back(name);
  exec.canonical = e2b::canonical_start(req, defaults);
  if (!req.pty) return strictest(policy, token, {exec});
  PolicyRequest open = exec;
  open.action = PolicyAction::kTerminalOpen;
  PolicyRequest attach = exec;
  attach.action = PolicyAction::kTerminalAttach;
  attach.text = "interactive";
  attach.env_names.clear();
  return strictest(policy, token, {open, exec, attach});
}

// What lands at a move's destination: the source's attributes and, for a regular file of at
// most kMaxContentMaxBytes, its content's SHA-256 (read over SFTP, not by the sandbox's tools).
FileIdentity identity_of(Sandbox& sandbox, const std::string& path) {
  FileIdentity f;
  auto st = sandbox.stat(path);
  if (!st) {
    f.kind = "missing";  // the move then fails: NotFound
    return f;
  }
  f.kind = st->is_regular()   ? "file"
           : st->is_dir()     ? "dir"
           : st->is_symlink() ? "symlink"
                              : "other";
  f.mode = st->mode;
  f.size = st->size;
  f.mtime = st->mtime;
  if (st->is_regular() && st->size <= kMaxContentMaxBytes) {
    if (auto content = sandbox.read_file(path, kMaxContentMaxBytes))
      f.content_sha256 = sha256_hex(*content);
  }
  return f;
}

std::chrono::milliseconds header_ms(const Poco::Net::HTTPServerRequest& r, const char* name,
                                    std::chrono::milliseconds fallback) {
  auto v = e2b::parse_timeout_ms(r.get(name, ""));
  return v && *v > 0 ? std::chrono::milliseconds(*v) : fallback;
}

// A signed URL's query, when it is what proves the caller: a request to /files
// (`operation` set) without an X-Access-Token, with a `signature`. As envd, a request with the
// header is judged by the header alone.
std::optional<e2b::FileSignature> signed_query(RequestContext& ctx, std::string_view operation) {
  if (operation.empty() || !ctx.request->get("X-Access-Token", "").empty() ||
      ctx.query_value("signature").empty())
    return std::nullopt;
  e2b::FileSignature s{ctx.query_value("path"), std::string(operation), ctx.query_value("username"),
                       ctx.query_value("signature"), std::nullopt};
  if (std::string e = ctx.query_value("signature_expiration"); !e.empty()) {
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), n);
    if (ec != std::errc() || end != e.data() + e.size())
      fail_with(ConnectCode::kInvalidArgument, "signature_expiration: not a number of seconds");
    s.expiration = n;
  }
  return s;
}

}  // namespace

// 401 unless the X-Access-Token is the sandbox's, or the signed URL's signature is (for its
// path, operation and user) and has not expired.
void E2bRoutes::authenticate(const std::string& id,
                             const std::optional<e2b::FileSignature>& signed_url,
                             std::string_view token) {
  if (!signed_url) {
    if (!sessions_.token_matches(id, token))
      fail_with(ConnectCode::kUnauthenticated, "missing or wrong X-Access-Token for " + id +
                                                   " (the envdAccessToken of its create or "
                                                   "connect; /files also takes a signed URL)");
    return;
  }
  if (!sessions_.signature_matches(id, *signed_url))
    fail_with(ConnectCode::kUnauthenticated,
              "invalid signature for " + signed_url->operation + " of this path in " + id);
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now().time_since_epoch());
  if (signed_url->expiration && *signed_url->expiration < now.count())
    fail_with(ConnectCode::kUnauthenticated, "signature is already expired");
}

E2bRoutes::Target E2bRoutes::target(RequestContext& ctx, std::string_view signed_operation) {
  prune_kept_sessions();
  auto signed_url = signed_query(ctx, signed_operation);
  std::string id =
      !ctx.e2b_sandbox.empty() ? ctx.e2b_sandbox : ctx.request->get("E2b-Sandbox-Id", "");
  if (id.empty() && signed_url) id = sessions_.signed_by(*signed_url);
  if (!is_sandbox_id(id))
    fail_with(ConnectCode::kNotFound,
              "no sandbox named by E2b-Sandbox-Id (or the Host name, or a signed URL)");
  std::string port = ctx.request->get("E2b-Sandbox-Port", "49983");
  if (port != "49983")
    fail_with(ConnectCode::kUnimplemented,
              "port " + port.substr(0, 8) + ": pve-sandbox serves envd's port 49983 only");
  ctx.sandbox = id;
  authenticate(id, signed_url, ctx.request->get("X-Access-Token", ""));
  auto session = sessions_.find(id);
  const std::string owner = session ? session->owner : sessions_.kept_owner(id);
  if (owner.empty()) fail_with(ConnectCode::kNotFound, "no sandbox " + id);
  // The data plane acts for the sandbox's owner, whoever connected or listed it last (#46
  // finding 1); an owner whose token is gone from the configuration acts no more.
  ctx.principal = d_.tokens.find(owner);
  if (!ctx.principal)
    fail_with(ConnectCode::kPermissionDenied,
              "the token that owns " + id + " (" + owner.substr(0, 64) +
                  ") is no longer configured: its data plane is refused (docs/e2b.md)");
  return owned(*ctx.principal, id, std::move(session));
}

E2bRoutes::Target E2bRoutes::owned(const Principal& owner, const std::string& id,
                                   std::shared_ptr<e2b::SandboxSession> session) {
  try {
    auto sandbox = d_.sandbox_for(owner, id);
    if (!session) session = sessions_.ensure(sandbox);  // kept from before a restart
    return {std::move(session), std::move(sandbox)};
  } catch (const ApiError& e) {
    // Destroyed through another door (REST, MCP, its TTL): the session goes with it.
    if (e.status == 404) sessions_.erase(id);
    throw;
  }
}

E2bRoutes::PortTarget E2bRoutes::port_target(RequestContext& ctx, const std::string& id,
                                             std::uint16_t port) {
  prune_kept_sessions();
  ctx.sandbox = id;
  auto session = sessions_.find(id);
  if (!session && !sessions_.kept_owner(id).empty()) {  // kept from before a restart
    if (auto owner = d_.tokens.find(sessions_.kept_owner(id))) {
      try {
        session = owned(*owner, id, nullptr).session;
      } catch (const ApiError&) {  // gone meanwhile: answered below
      }
    }
  }
  if (!session)
    throw not_found("no sandbox " + id +
                    " known to the E2B API here (after a controller restart without "
                    "e2b.sessions_file: Sandbox.connect first)");
  if (!session->traffic_token.empty()) {
    std::string token = ctx.request->get("e2b-traffic-access-token", "");
    if (token.empty())
      throw from_error(Error{ErrorCode::kPermissionDenied,
                             "missing e2b-traffic-access-token: the ports of " + id +
                                 " want the trafficAccessToken of its create or connect"});
    if (!sessions_.traffic_token_matches(id, token))
      throw from_error(
          Error{ErrorCode::kPermissionDenied, "wrong e2b-traffic-access-token for " + id});
  }
  ctx.principal = d_.tokens.find(session->owner);
  if (!ctx.principal)
    throw from_error(Error{ErrorCode::kPermissionDenied,
                           "the token that owns " + id + " is no longer configured"});
  auto t = owned(*ctx.principal, id, session);
  return {std::move(t.sandbox),
          session->mask_host.empty() ? "" : ports::expand_host_mask(session->mask_host, port)};
}

void E2bRoutes::envd(RequestContext& ctx, bool stream, const std::function<void()>& work) {
  std::optional<ConnectError> error;
  try {
    work();
    return;
  } catch (const ConnectFailure& f) {
    error = f.error;
  } catch (const ApiError& e) {
    error = connect_error_of(e);
  } catch (const std::exception& e) {
    error = ConnectError{ConnectCode::kInternal, std::string("internal error: ") + e.what()};
  }
  if (ctx.responded) return;
  ctx.error = ApiError{e2b::http_status(error->code), std::string(e2b::code_name(error->code)),
                       error->message};
  if (stream)
    d_.replies.send_bytes(ctx, 200, "application/connect+json", e2b::end_stream(error));
  else
    d_.replies.send_bytes(ctx, e2b::http_status(error->code), "application/json",
                          e2b::unary_error_body(*error));
}

void E2bRoutes::rpc(RequestContext& ctx) {
  const std::string method = ctx.params.at("service") + "/" + ctx.params.at("method");
  const bool stream = is_stream_method(method);
  envd(ctx, stream, [&] {
    auto kind = e2b::classify_content_type(ctx.request->getContentType());
    if (kind != (stream ? e2b::ContentKind::kStreamJson : e2b::ContentKind::kUnaryJson))
      fail_with(ConnectCode::kInvalidArgument,
                std::string("this server speaks Connect's JSON codec: Content-Type ") +
                    (stream ? "application/connect+json" : "application/json"));
    auto t = target(ctx);
    auto slot = take_slot(ctx, TokenLimits::Kind::kRequest);  // the owner's (#46 finding 2)
    std::string body = d_.replies.read_body(ctx, e2b::kMaxEnvdMessage + e2b::kEnvelopeHeader);
    if (stream) {
      auto one = e2b::single_message(body, e2b::kMaxEnvdMessage);
      if (!one.message) throw ConnectFailure{*one.error};
      body = std::move(*one.message);
    }
    dispatch(ctx, t, method, body);
  });
}

void E2bRoutes::dispatch(RequestContext& ctx, const Target& t, const std::string& method,
                         const std::string& body) {
  auto& procs = *t.session->processes;
  auto process_of = [&](const e2b::Selector& s) {
    auto p = procs.find(s);
    if (!p) fail_with(ConnectCode::kNotFound, "process not found");
    return p;
  };
  if (method == "process.Process/Start") return start(ctx, t, take(e2b::parse_start(body)));
  if (method == "process.Process/Connect") {
    auto p = process_of(take(e2b::parse_selector_request(body)));
    // A stream slot as a Start's; the reader's queue goes when the stream returns (#46).
    auto slot = take_slot(ctx, TokenLimits::Kind::kStream);
    auto events = p->subscribe();
    if (!events) throw ConnectFailure{e2b::connect_error_of(events.error())};
    e2b::Unsubscribe leave{p, *events};
    return stream(ctx, **events, std::chrono::hours(24));
  }
  if (method == "process.Process/List") {
    std::vector<e2b::ProcessInfo> out;
    for (const auto& p : procs.running()) out.push_back({p->config(), p->pid(), p->tag()});
    return d_.replies.send_json(ctx, 200, e2b::list_reply(out));
  }
  if (method == "process.Process/SendInput") {
    auto in = take(e2b::parse_send_input(body));
    ctx.action = "e2b.process.input";
    ctx.params_json = "{\"bytes\":" + std::to_string(in.data.size()) + "}";
    auto p = process_of(in.process);
    if (in.pty && d_.config.policy.judges(ctx.principal->name, PolicyAction::kTerminalInput))
      fail_with(ConnectCode::kPermissionDenied,
                "a pty's input would bypass this token's terminal.input rules");
    if (!in.pty) judge_stdin(ctx, t, p->pid(), in.data);
    check(p->send_input(*t.sandbox, in.data, in.pty));
    return d_.replies.send_json(ctx, 200, "{}");
  }
  if (method == "process.Process/SendSignal") {
    auto s = take(e2b::parse_send_signal(body));
    ctx.action = "e2b.process.signal";
    ctx.params_json = "{\"signal\":" + std::to_string(s.signal) + "}";
    check(process_of(s.process)->signal(*t.sandbox, s.signal));
    return d_.replies.send_json(ctx, 200, "{}");
  }
  if (method == "process.Process/CloseStdin") {
    check(process_of(take(e2b::parse_selector_request(body)))->close_stdin(*t.sandbox));
    return d_.replies.send_json(ctx, 200, "{}");
  }
  if (method == "process.Process/Update") {
    auto u = take(e2b::parse_update(body));
    auto p = process_of(u.process);
    if (u.pty) check(p->resize(u.pty->cols, u.pty->rows));
    return d_.replies.send_json(ctx, 200, "{}");
  }
  if (method == "filesystem.Filesystem/WatchDir")
    return watch(ctx, t, take(e2b::parse_watch_dir(body)));
  if (method.ends_with("Watcher") || method.ends_with("WatcherEvents"))
    return polled_watch(ctx, t, method, body);
  filesystem(ctx, t, method, body);
}

void E2bRoutes::filesystem(RequestContext& ctx, const Target& t, const std::string& method,
                           const std::string& body) {
  const std::string home = this->home();
  auto resolved = [&](const std::string& path) {
    auto r = e2b::resolve_path(path, home);
    if (!r) fail_with(ConnectCode::kInvalidArgument, r.error().message);
    return *r;
  };
  // The path judged is the one the sandbox resolves (links followed, #32 finding 7), and the
  // operation acts on exactly that path.
  auto judge = [&](const char* action, const std::string& path) {
    ctx.action = action;
    std::string real = real_write_path(*t.sandbox, path);
    JsonWriter p;
    ctx.params_json = p.begin_object().key("path").value(real).end_object().take();
    PolicyRequest asked;
    asked.action = PolicyAction::kFilesWrite;
    asked.path = real;
    JsonWriter c;
    asked.canonical =
        c.begin_object().key("op").value(action).key("path").value(real).end_object().take();
    ctx.policy_json = admit(*ctx.principal, t.sandbox->id(), asked);
    return real;
  };
  if (method == "filesystem.Filesystem/Stat")
    return d_.replies.send_json(ctx, 200,
                                e2b::entry_reply(take(e2b::stat_entry(
                                    *t.sandbox, resolved(take(e2b::parse_path_request(body)))))));
  if (method == "filesystem.Filesystem/ListDir") {
    auto l = take(e2b::parse_list_dir(body));
    return d_.replies.send_json(
        ctx, 200,
        e2b::entries_reply(take(e2b::list_entries(*t.sandbox, resolved(l.path), l.depth))));
  }
  if (method == "filesystem.Filesystem/MakeDir") {
    std::string path = judge("e2b.files.mkdir", resolved(take(e2b::parse_path_request(body))));
    return d_.replies.send_json(ctx, 200, e2b::entry_reply(take(e2b::make_dir(*t.sandbox, path))));
  }
  if (method == "filesystem.Filesystem/Move") {
    auto m = take(e2b::parse_move(body));
    return move(ctx, t, resolved(m.source), resolved(m.destination));
  }
  if (method == "filesystem.Filesystem/Remove") {
    std::string path = judge("e2b.files.remove", resolved(take(e2b::parse_path_request(body))));
    take(e2b::remove(*t.sandbox, path));
    return d_.replies.send_json(ctx, 200, "{}");
  }
  fail_with(ConnectCode::kUnimplemented,
            method.substr(0, 100) + " is not supported by pve-sandbox's envd (docs/e2b.md)");
}

void E2bRoutes::start(RequestContext& ctx, const Target& t, const e2b::StartRequest& req) {
  std::string text = e2b::policy_text(req.process);
  ctx.action = "e2b.process.start";
  {
    JsonWriter p;
    p.begin_object()
        .key("command")
        .value(text.substr(0, 4096))
        .key("pty")
        .value(req.pty.has_value());
    p.key("env_names").begin_array();
    for (const auto& [k, v] : req.process.envs) p.value(k);
    p.end_array().key("default_env_names").begin_array();
    for (const auto& [k, v] : t.session->env_vars) p.value(k);
    ctx.params_json = p.end_array().end_object().take();
  }
  // A pty's input is keystrokes the terminal.input line model does not follow here: under rules
  // that judge this token's typed lines it would be a way around them (#32, finding 1).
  if (req.pty && d_.config.policy.judges(ctx.principal->name, PolicyAction::kTerminalInput))
    fail_with(ConnectCode::kPermissionDenied,
              "a pty's input would bypass this token's terminal.input rules: open a terminal "
              "through the REST API (POST /v1/sandboxes/{id}/terminals), whose input they judge");
  auto [asked, decision] =
      judge_start(d_.config.policy, ctx.principal->name, req, t.session->env_vars);
  ctx.policy_json = admit_decided(*ctx.principal, t.sandbox->id(), asked, decision);
  auto slot = take_slot(ctx, TokenLimits::Kind::kStream);
  e2b::StartOptions o;
  o.default_env = t.session->env_vars;
  o.login_snapshot = d_.config.e2b_login_snapshot;
  auto max = std::chrono::milliseconds(std::chrono::seconds(d_.config.max_exec_timeout_seconds));
  o.timeout = header_ms(*ctx.request, "Connect-Timeout-Ms", max);
  o.max_timeout = max;
  auto events = std::make_shared<e2b::EventQueue>();
  auto started = std::chrono::steady_clock::now();
  auto proc = t.session->processes->start(req, o, events);
  if (!proc) throw ConnectFailure{e2b::connect_error_of(proc.error())};
  e2b::Unsubscribe leave{*proc, events};  // the process runs on; this reader's queue goes
  stream(ctx, *events, o.timeout + std::chrono::seconds(5));
  auto end = (*proc)->end_info();
  d_.metrics->inc("pvs_exec_total", {{"result", !end                  ? "error"
                                                : end->exit_code == 0 ? "ok"
                                                                      : "nonzero"}});
  d_.metrics->observe("pvs_exec_duration_seconds", {}, seconds_since(started));
}

// Judged once: each end as files.write (the source goes away, the destination appears), the
// stricter decision counts, and an approval binds both ends and what lands (#46, finding 4).
void E2bRoutes::move(RequestContext& ctx, const Target& t, const std::string& source,
                     const std::string& destination) {
  ctx.action = "e2b.files.move";
  std::string from = real_write_path(*t.sandbox, source);
  std::string to = real_write_path(*t.sandbox, destination);
  JsonWriter p;
  ctx.params_json =
      p.begin_object().key("source").value(from).key("destination").value(to).end_object().take();
  PolicyRequest out, in;
  out.action = in.action = PolicyAction::kFilesWrite;
  out.path = from;
  in.path = to;
  auto [asked, decision] = strictest(d_.config.policy, ctx.principal->name, {out, in});
  asked.canonical = canonical_move(
      from, to,
      decision.verdict == Verdict::kApprove ? identity_of(*t.sandbox, from) : FileIdentity{});
  ctx.policy_json = admit_decided(*ctx.principal, t.sandbox->id(), asked, decision);
  d_.replies.send_json(ctx, 200, e2b::entry_reply(take(e2b::move(*t.sandbox, from, to))));
}

// A process's stdin is a pipe, and a shell reading it runs what it reads: under terminal.input
// rules each line is judged as a terminal's typed line is (a denied line refuses the whole
// input, the lines that need a person are approved together), and only whole lines of text are
// taken, so what the reader gets is exactly what was judged (#46, finding 3).
void E2bRoutes::judge_stdin(RequestContext& ctx, const Target& t, std::uint32_t pid,
                            const std::string& data) {
  const std::string& token = ctx.principal->name;
  if (!d_.config.policy.judges(token, PolicyAction::kTerminalInput)) return;
  TypedLine::Next next = piped_lines(data);
  if (!next.understood)
    fail_with(ConnectCode::kInvalidArgument,
              "stdin refused (" + next.not_understood.substr(0, 64) +
                  "): under this token's terminal.input rules stdin takes whole lines of text, "
                  "each ended by LF, no control bytes but Tab, so that each line is judged");
  auto [asked, decision] = decide_lines(d_.config.policy, token, next.lines);
  JsonWriter c;
  asked.canonical = c.begin_object()
                        .key("pid")
                        .value(static_cast<std::uint64_t>(pid))
                        .key("stdin")
                        .value(data)
                        .end_object()
                        .take();
  ctx.policy_json = admit_decided(*ctx.principal, t.sandbox->id(), asked, decision);
}

void E2bRoutes::stream(RequestContext& ctx, e2b::EventQueue& events,
                       std::chrono::milliseconds limit, const std::string& keepalive_message) {
  d_.replies.begin_reply(ctx, 200, "application/connect+json");
  ctx.response->setChunkedTransferEncoding(true);
  // A reader that went away is found by a failed write, or while the stream is quiet by the
  // socket's hang-up (within 0.5 s); keepalives at most a minute apart (#46 finding 2).
  auto keepalive = e2b::keepalive_interval(ctx.request->get("Keepalive-Ping-Interval", ""));
  std::ostream& out = ctx.response->send();
  e2b::pump_events(out, events, std::chrono::steady_clock::now() + limit, keepalive,
                   keepalive_message, [&ctx] { return client_hung_up(ctx); });
}

// WatchDir: a watcher in the sandbox (e2b/filesystem/dir_watch.h) for as long as the stream lasts,
// within the call's timeout; a stream slot as a Start's.
void E2bRoutes::watch(RequestContext& ctx, const Target& t, const e2b::WatchDirRequest& req) {
  std::string path = watched_path(ctx, req);
  auto slot = take_slot(ctx, TokenLimits::Kind::kStream);
  auto max = std::chrono::milliseconds(std::chrono::seconds(d_.config.max_exec_timeout_seconds));
  e2b::WatchOptions o{path, req.recursive,
                      std::min(header_ms(*ctx.request, "Connect-Timeout-Ms", max), max)};
  auto events = std::make_shared<e2b::EventQueue>();
  auto watcher = e2b::DirWatch::start(t.sandbox, o, events);
  stream(ctx, *events, o.timeout + std::chrono::seconds(5), e2b::watch_keepalive_event());
  watcher->stop();
}

// The polled watch (e2b/filesystem/watchers.h): a watcher kept in the sandbox's session between
// calls. It holds one of the owner's stream slots until it ends (RemoveWatcher, the session's
// end, or max_exec_timeout_seconds), and CreateWatcher answers once the watch is in place.
void E2bRoutes::polled_watch(RequestContext& ctx, const Target& t, const std::string& method,
                             const std::string& body) {
  auto& watchers = *t.session->watchers;
  if (method == "filesystem.Filesystem/CreateWatcher") {
    auto req = take(e2b::parse_watch_dir(body));
    e2b::WatchOptions o{watched_path(ctx, req), req.recursive,
                        std::chrono::seconds(d_.config.max_exec_timeout_seconds)};
    auto hold = std::make_shared<TokenLimits::Slot>(take_slot(ctx, TokenLimits::Kind::kStream));
    auto wait = std::min(header_ms(*ctx.request, "Connect-Timeout-Ms", std::chrono::seconds(30)),
                         std::chrono::milliseconds(std::chrono::seconds(30)));
    auto id = take(watchers.create(o, wait, std::move(hold)));
    return d_.replies.send_json(ctx, 200, e2b::watcher_created_reply(id));
  }
  auto id = take(e2b::parse_watcher_id(body));
  if (method == "filesystem.Filesystem/GetWatcherEvents")
    return d_.replies.send_json(ctx, 200, e2b::watcher_events_reply(take(watchers.take(id))));
  if (method == "filesystem.Filesystem/RemoveWatcher") {
    take(watchers.remove(id));
    return d_.replies.send_json(ctx, 200, "{}");
  }
  fail_with(ConnectCode::kUnimplemented,
            method.substr(0, 100) + " is not supported by pve-sandbox's envd (docs/e2b.md)");
}

// The directory a WatchDir or CreateWatcher names, resolved (and in the audit record). Reading
// is not judged by the policy, as Stat and ListDir are not.
std::string E2bRoutes::watched_path(RequestContext& ctx, const e2b::WatchDirRequest& req) {
  auto path = e2b::resolve_path(req.path, home());
  if (!path) fail_with(ConnectCode::kInvalidArgument, path.error().message);
  JsonWriter p;
  ctx.params_json = p.begin_object()
                        .key("path")
                        .value(*path)
                        .key("recursive")
                        .value(req.recursive)
                        .end_object()
                        .take();
  return *path;
}

// A slot of `kind` among the per-token limits of the token the call acts for; a limit_exceeded
// (429, Connect's resource_exhausted) naming the setting when it holds its limit already.
TokenLimits::Slot E2bRoutes::take_slot(RequestContext& ctx, TokenLimits::Kind kind) {
  auto slot = d_.limits.acquire(ctx.principal->name, kind);
  if (slot) return std::move(*slot);
  const bool req = kind == TokenLimits::Kind::kRequest;
  ctx.response->set("Retry-After", "1");
  throw limit_exceeded("token " + ctx.principal->name + " has " +
                       std::to_string(d_.limits.limit(kind)) +
                       (req ? " requests in flight (auth.max_requests_per_token)"
                            : " streams running (auth.max_streams_per_token)"));
}

std::string E2bRoutes::home() const {
  const std::string& user = d_.config.manager.ssh.user;
  return user == "root" || user.empty() ? "/root" : "/home/" + user;
}

}  // namespace pvs::service
