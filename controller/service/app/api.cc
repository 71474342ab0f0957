#include "app/api.h"

#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequestImpl.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/SecureServerSocket.h>
#include <Poco/Net/ServerSocket.h>
#include <Poco/Net/SocketAddress.h>
#include <Poco/String.h>
#include <Poco/ThreadPool.h>
#include <Poco/URI.h>

#include <array>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <streambuf>
#include <thread>

#include "api/console/console.h"
#include "api/ports/port_proxy.h"
#include "e2b/control_wire.h"
#include "http/json.h"
#include "http/openapi.h"
#include "http/requests.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/version.h"

namespace pvs::service {

using Poco::Net::HTTPResponse;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string iso_time(std::int64_t unix_seconds) {
  return format_rfc3339_ms(unix_seconds * 1000).substr(0, 19) + "Z";
}

std::string RequestContext::query_value(const std::string& key) const {
  auto it = query.find(key);
  return it == query.end() ? std::string() : it->second;
}

// ---- Api --------------------------------------------------------------------------------------

Api::Api(ServiceConfig config, AuditLog* audit, Metrics* metrics)
    : config_(std::move(config)),
      tokens_(config_.tokens, config_.default_max_sandboxes, config_.default_max_paused),
      audit_(audit),
      metrics_(metrics),
      limits_({config_.max_requests_per_token, config_.max_streams_per_token}),
      denied_({std::chrono::seconds(config_.audit_denied_interval_seconds), 1024}) {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  request_prefix_ = buf;
  metrics_->add_collector([this](Metrics& m) { collect(m); });

  for (const Route& route : routes()) router_.add(std::string(route.method), route.pattern, &route);
}

Api::~Api() = default;

void Api::set_manager(std::shared_ptr<Manager> manager) {
  // Each token's limits on its paused and running sandboxes (docs/api.md "Pause and resume"),
  // on a copy of the tokens: the Manager may outlive this Api.
  if (manager)
    manager->set_owner_limits([tokens = tokens_](const std::string& owner, bool pausing,
                                                 std::size_t running,
                                                 std::size_t paused) -> Status {
      auto p = tokens.find(owner);
      if (!p) return {};  // a sandbox of no configured token: nothing to count against
      if (pausing && paused >= static_cast<std::size_t>(p->max_paused))
        return fail(ErrorCode::kLimitExceeded,
                    "token " + owner + " keeps " + std::to_string(paused) +
                        " paused sandboxes (limit max_paused " + std::to_string(p->max_paused) +
                        "); resume or destroy one first");
      if (!pausing && running >= static_cast<std::size_t>(p->max_sandboxes))
        return fail(ErrorCode::kLimitExceeded,
                    "token " + owner + " runs " + std::to_string(running) +
                        " sandboxes (limit max_sandboxes " + std::to_string(p->max_sandboxes) +
                        "); pause or destroy one first");
      return {};
    });
  std::lock_guard lock(mu_);
  manager_ = std::move(manager);
}

std::shared_ptr<Manager> Api::manager() const {
  std::lock_guard lock(mu_);
  return manager_;
}

void Api::handle(Poco::Net::HTTPServerRequest& request, Poco::Net::HTTPServerResponse& response) {
  RequestContext ctx;
  ctx.request = &request;
  ctx.response = &response;
  ctx.start = std::chrono::steady_clock::now();
  ctx.method = request.getMethod();
  ctx.request_id = request_prefix_ + "-" + std::to_string(next_request_++);
  ctx.route = "unmatched";
  try {
    dispatch(ctx);
  } catch (const ApiError& e) {
    if (!ctx.responded) send_error(ctx, e);
  } catch (const Poco::Exception& e) {
    log::error("request " + ctx.request_id + ": " + e.displayText());
    if (!ctx.responded) send_error(ctx, internal_error("internal error"));
  } catch (const std::exception& e) {
    log::error("request " + ctx.request_id + ": " + e.what());
    if (!ctx.responded) send_error(ctx, internal_error("internal error"));
  }
  finish(ctx);
  if (ctx.drain) drain_body(ctx);
}

void Api::dispatch(RequestContext& ctx) {
  Poco::URI uri;
  try {
    uri = Poco::URI(ctx.request->getURI());
    ctx.path = uri.getPath();
    for (auto& [k, v] : uri.getQueryParameters()) ctx.query.emplace(k, v);
  } catch (const Poco::Exception&) {
    throw bad_request("malformed request URI");
  }
  if (config_.console_enabled && is_console_path(ctx.path)) return console_routes_.serve(ctx);
  if (dispatch_e2b_port(ctx)) return;
  // E2B's envd by Host name (49983-<id>.<e2b.domain>): the data plane's routes (docs/e2b.md).
  if (!config_.e2b_domain.empty()) {
    if (auto id = e2b::envd_host_sandbox(ctx.request->getHost(), config_.e2b_domain)) {
      ctx.e2b_sandbox = *id;
      ctx.path = "/e2b/envd" + ctx.path;
    }
  }
  auto match = router_.match(ctx.method, ctx.path);
  if (!match.handler && ctx.path.rfind("/e2b/", 0) == 0) {
    ctx.route = "/e2b/*";  // E2B endpoints not served answer in E2B's shape, saying so
    return e2b_routes_.unsupported(ctx);
  }
  if (!match.handler) {
    if (!match.allowed.empty()) {
      ctx.response->set("Allow", match.allowed);
      throw method_not_allowed(ctx.method.substr(0, 16) +
                               " is not allowed here; allowed: " + match.allowed);
    }
    throw not_found("no such endpoint: " + ctx.path.substr(0, 200));
  }
  const Route& route = **match.handler;
  ctx.params = std::move(match.params);
  ctx.route = std::string(route.pattern);  // bounded cardinality for metrics
  if (route.access != Route::Access::kPublic) authenticate(ctx);
  if (route.access == Route::Access::kAdmin && !ctx.principal->admin)
    throw from_error(Error{ErrorCode::kPermissionDenied, "this endpoint needs an admin token"});
  ctx.action = std::string(route.action);
  auto slot = ctx.principal ? limits_.acquire(ctx.principal->name, TokenLimits::Kind::kRequest)
                            : std::optional<TokenLimits::Slot>();
  if (ctx.principal && !slot) {
    ctx.response->set("Retry-After", "1");
    throw limit_exceeded("token " + ctx.principal->name + " has " +
                         std::to_string(limits_.limit(TokenLimits::Kind::kRequest)) +
                         " requests in flight (auth.max_requests_per_token)");
  }
  route.handler(*this, ctx);
}

// E2B's routing to a sandbox's port other than envd's (docs/e2b.md, "Ports"): by Host
// "<port>-<id>.<e2b.domain>" (what getHost(port) gives, behind wildcard DNS), or, as with
// E2B_SANDBOX_URL, a request under /e2b/envd/ with E2b-Sandbox-Id and E2b-Sandbox-Port. False
// when the request is neither. Errors answer in E2B's shape.
bool Api::dispatch_e2b_port(RequestContext& ctx) {
  std::optional<e2b::PortHost> to;
  std::string prefix;
  if (!config_.e2b_domain.empty()) to = e2b::port_host(ctx.request->getHost(), config_.e2b_domain);
  if (!to && ctx.path.rfind("/e2b/envd/", 0) == 0 && ctx.request->has("E2b-Sandbox-Port")) {
    auto port = ports::parse_port(ctx.request->get("E2b-Sandbox-Port"));
    if (port && *port != e2b::kEnvdPort) {
      to = e2b::PortHost{ctx.request->get("E2b-Sandbox-Id", ""), *port};
      prefix = "/e2b/envd";
    }
  }
  if (!to || to->port == e2b::kEnvdPort) return false;
  ctx.route = "/e2b/port";
  ctx.action = "sandbox.port";
  try {
    if (!is_sandbox_id(to->sandbox)) throw not_found("no sandbox named by E2b-Sandbox-Id");
    if (!ports::is_proxied_method(ctx.method))
      throw method_not_allowed(ctx.method.substr(0, 16) + " is not proxied to a sandbox's port");
    auto target = ports::upstream_target_after(ctx.request->getURI(), prefix);
    if (!target) throw target.error();
    auto found = e2b_routes_.port_target(ctx, to->sandbox, to->port);
    auto slot = limits_.acquire(ctx.principal->name, TokenLimits::Kind::kRequest);
    if (!slot)
      throw limit_exceeded("token " + ctx.principal->name + " has too many requests in flight");
    // By Host, the page has an origin of its own: no opaque-origin CSP (port_routes.h).
    port_routes_.forward(ctx, *found.sandbox,
                         {to->port, *target, "", found.host, !prefix.empty(), true});
  } catch (const ApiError& e) {
    if (ctx.responded) throw;
    ctx.error = e;
    send_bytes(ctx, e.status, "application/json", e2b::e2b_error_body(e));
  }
  return true;
}

// A valid bearer token, or 401. Refused calls are audited (what was tried and why, never what
// was presented), aggregated per source so that a flood cannot fill the disk (DeniedLog).
void Api::authenticate(RequestContext& ctx) {
  // A copy: get() returns its default argument by reference (a temporary here).
  std::string authorization = ctx.request->get("Authorization", "");
  if (authorization.empty()) authorization = websocket_bearer(*ctx.request);
  ctx.principal = tokens_.authenticate(authorization);
  if (ctx.principal) return;
  ctx.response->set("WWW-Authenticate", "Bearer");
  auto now = DeniedLog::Clock::now();
  for (const auto& line : denied_.flush(now)) audit_denied(ctx, line, "");
  std::string remote = ctx.request->clientAddress().host().toString();
  if (auto line = denied_.record(remote, now)) {
    const char* reason =
        authorization.empty() ? "missing"
        : authorization.size() > 7 && Poco::icompare(authorization.substr(0, 7), "Bearer ") == 0
            ? "unknown_token"
            : "not_bearer";
    audit_denied(ctx, *line, reason);
  }
  throw unauthenticated();
}

void Api::audit_denied(RequestContext& ctx, const DeniedLog::Line& line, std::string_view reason) {
  if (!audit_) return;
  AuditRecord r;
  r.request_id = ctx.request_id;
  r.remote = line.remote;
  r.action = "auth.denied";
  auto id = ctx.params.find("id");
  if (line.first && id != ctx.params.end()) r.sandbox = id->second.substr(0, 64);
  JsonWriter p;
  p.begin_object();
  if (line.first) {
    p.key("method").value(ctx.method.substr(0, 16)).key("route").value(ctx.route);
    p.key("reason").value(reason);
  } else {
    p.key("count").value(line.count);
    p.key("interval_seconds").value(config_.audit_denied_interval_seconds);
  }
  r.params_json = p.end_object().take();
  r.status = 401;
  r.error_code = "unauthenticated";
  if (auto st = audit_->append(r); !st) {
    metrics_->inc("pvs_audit_failures_total");
    log::error("audit: " + st.error().message);
  }
}

// Metrics label only the methods the API knows, so a made-up method adds no series.
static std::string method_label(const std::string& method) {
  for (const char* known : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
    if (method == known) return method;
  return "other";
}

void Api::finish(RequestContext& ctx) {
  metrics_->inc("pvs_http_requests_total", {{"method", method_label(ctx.method)},
                                            {"route", ctx.route},
                                            {"status", std::to_string(ctx.status)}});
  metrics_->observe("pvs_http_request_duration_seconds", {{"route", ctx.route}},
                    seconds_since(ctx.start));
  if (ctx.status == 413 || ctx.status == 429) metrics_->inc("pvs_rejected_total");
}

// Mutating calls are audited before the reply leaves (also when they failed).
AuditRecord audit_record(const RequestContext& ctx, int status) {
  AuditRecord r;
  r.request_id = ctx.request_id;
  r.token = ctx.principal ? ctx.principal->name : "";
  r.remote = ctx.request->clientAddress().host().toString();
  r.action = ctx.action;
  r.sandbox = ctx.sandbox;
  r.params_json = ctx.params_json;
  r.policy_json = ctx.policy_json;
  r.status = status;
  r.duration_ms = static_cast<std::int64_t>(seconds_since(ctx.start) * 1000);
  return r;
}

void Api::audit(RequestContext& ctx, int status, const ApiError* error) {
  if (!audit_ || ctx.action.empty()) return;
  AuditRecord r = audit_record(ctx, status);
  if (error) {
    r.error_code = error->code;
    r.error_message = error->message;
  }
  append_audit(r);
}

// Before replying: a body the handler did not read must not poison the next request on this
// connection (Poco does not drain it). A small one is read now; a large or chunked one is read
// after the reply (drain_body), with the connection closed then: closing a socket with unread
// data resets it, and a client still sending would never see the status (e.g. a 413).
void settle_body(RequestContext& ctx) {
  if (ctx.body_read) return;
  auto& req = *ctx.request;
  if (req.getChunkedTransferEncoding()) {
    ctx.response->setKeepAlive(false);
    ctx.drain = true;
  } else if (req.hasContentLength() && req.getContentLength64() > 0) {
    if (req.getContentLength64() <= (64 << 10)) {
      req.stream().ignore(req.getContentLength64());
    } else {
      ctx.response->setKeepAlive(false);
      ctx.drain = true;
    }
  }
  ctx.body_read = true;
}

std::ostream& start_ndjson(RequestContext& ctx) {
  settle_body(ctx);
  ctx.responded = true;
  ctx.status = 200;
  auto& resp = *ctx.response;
  resp.setStatus(Poco::Net::HTTPResponse::HTTP_OK);
  resp.set("X-Request-Id", ctx.request_id);
  resp.setContentType("application/x-ndjson");
  resp.setChunkedTransferEncoding(true);
  return resp.send();
}

void emit_line(std::ostream& out, const std::string& line) {
  if (!out.good()) return;
  out << line << '\n';
  out.flush();
}

// Reads and drops what is left of a refused request's body, at most kDrainBytes or kDrainTime
// (as nginx's lingering close), so that the client reads the reply before the connection ends.
void Api::drain_body(RequestContext& ctx) {
  constexpr std::uint64_t kDrainBytes = 1ull << 30;
  constexpr auto kDrainTime = std::chrono::seconds(10);
  auto deadline = std::chrono::steady_clock::now() + kDrainTime;
  auto* impl = dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(ctx.request);
  std::uint64_t drained = 0;
  std::vector<char> buf(64 << 10);
  try {
    std::istream& in = ctx.request->stream();
    while (in && drained < kDrainBytes) {
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      if (impl) impl->socket().setReceiveTimeout(Poco::Timespan(left.count()));
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      if (in.gcount() <= 0) break;
      drained += static_cast<std::uint64_t>(in.gcount());
    }
  } catch (const Poco::Exception&) {
    // a timeout or a reset: the connection is closed next either way
  }
}

void Api::send_json(RequestContext& ctx, int status, const std::string& body) {
  send_bytes(ctx, status, "application/json", body);
}

// Audits the reply, settles the request body, sets the status line and the request id.
static Poco::Net::HTTPServerResponse& start_reply(Api& api, RequestContext& ctx, int status,
                                                  const ApiError* error) {
  api.audit(ctx, status, error);
  settle_body(ctx);
  ctx.responded = true;
  ctx.status = status;
  auto& resp = *ctx.response;
  resp.setStatus(static_cast<HTTPResponse::HTTPStatus>(status));
  resp.set("X-Request-Id", ctx.request_id);
  return resp;
}

void Api::begin_reply(RequestContext& ctx, int status, const std::string& content_type) {
  start_reply(*this, ctx, status, ctx.error ? &*ctx.error : nullptr).setContentType(content_type);
}

void Api::send_bytes(RequestContext& ctx, int status, const std::string& content_type,
                     std::string_view body) {
  begin_reply(ctx, status, content_type);
  ctx.response->setContentLength64(static_cast<Poco::Int64>(body.size()));
  ctx.response->sendBuffer(body.data(), body.size());
}

void Api::abort_reply(RequestContext& ctx) {
  // Detached from the HTTP session, the connection is reset here; Poco's final chunk then
  // goes nowhere and the session ends (as after a WebSocket upgrade).
  ctx.response->setKeepAlive(false);
  auto* impl = dynamic_cast<Poco::Net::HTTPServerRequestImpl*>(ctx.request);
  if (!impl) return;
  try {
    Poco::Net::StreamSocket socket = impl->detachSocket();
    socket.setLinger(true, 0);
    socket.close();
  } catch (const Poco::Exception& e) {
    log::warn("request " + ctx.request_id + ": resetting the connection: " + e.displayText());
  }
}

void Api::send_error(RequestContext& ctx, const ApiError& error) {
  ctx.error = error;
  if (error.status >= 500)
    log::warn("request " + ctx.request_id + " " + ctx.method + " " + ctx.route + ": " +
              error.message);
  send_json(ctx, error.status, error.body());
}

void Api::send_empty(RequestContext& ctx, int status) {
  auto& resp = start_reply(*this, ctx, status, nullptr);
  resp.setContentLength(0);
  resp.send();
}

std::string Api::read_body(RequestContext& ctx, std::uint64_t limit) {
  auto& req = *ctx.request;
  if (req.hasContentLength() && req.getContentLength64() > static_cast<std::int64_t>(limit)) {
    ctx.response->setKeepAlive(false);
    throw too_large("request body larger than " + std::to_string(limit) + " bytes");
  }
  std::string body;
  if (!req.hasContentLength() && !req.getChunkedTransferEncoding()) {
    ctx.body_read = true;
    return body;
  }
  std::istream& in = req.stream();
  char buf[64 << 10];
  while (in) {
    in.read(buf, sizeof buf);
    body.append(buf, static_cast<std::size_t>(in.gcount()));
    if (body.size() > limit) {
      ctx.response->setKeepAlive(false);
      throw too_large("request body larger than " + std::to_string(limit) + " bytes");
    }
  }
  if (req.hasContentLength() &&
      body.size() != static_cast<std::uint64_t>(req.getContentLength64())) {
    ctx.response->setKeepAlive(false);
    throw bad_request("request body shorter than its Content-Length");
  }
  ctx.body_read = true;
  return body;
}

std::string Api::json_body(RequestContext& ctx) {
  const std::string& type = ctx.request->getContentType();
  if (!type.empty() && type.rfind("application/json", 0) != 0) {
    throw unsupported_media_type("send the body as application/json");
  }
  return read_body(ctx, config_.max_body_bytes);
}

std::shared_ptr<Manager> Api::require_manager() {
  auto m = manager();
  if (!m) throw unavailable("starting: the controller has not reached Proxmox yet");
  return m;
}

void Api::append_audit(const AuditRecord& record) {
  if (!audit_) return;
  if (auto st = audit_->append(record); !st) {
    metrics_->inc("pvs_audit_failures_total");
    log::error("audit: " + st.error().message);
  }
}

}  // namespace pvs::service
