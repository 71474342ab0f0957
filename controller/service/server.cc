#include "server.h"

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

#include "json.h"
#include "openapi.h"
#include "pvesandbox/common/log.h"
#include "pvesandbox/version.h"
#include "requests.h"

namespace pvs::service {
namespace {

using Poco::Net::HTTPResponse;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string iso_time(std::int64_t unix_seconds) {
  return format_rfc3339_ms(unix_seconds * 1000).substr(0, 19) + "Z";
}

const char* file_type(const SftpAttributes& a) {
  if (a.is_dir()) return "dir";
  if (a.is_regular()) return "file";
  if (a.is_symlink()) return "symlink";
  return "other";
}

std::string octal(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

std::string exec_result_json(const ExecResult& r) {
  JsonWriter w;
  w.begin_object();
  w.key("exit_code").value(r.exit_code);
  if (!r.exit_signal.empty()) w.key("signal").value(r.exit_signal);
  w.key("stdout").value(r.out).key("stderr").value(r.err);
  w.key("stdout_bytes").value(r.out_total).key("stderr_bytes").value(r.err_total);
  w.key("timed_out").value(r.timed_out).key("truncated").value(r.truncated);
  w.key("duration_ms").value(static_cast<std::int64_t>(r.duration.count() / 1000));
  w.end_object();
  return w.take();
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

std::string RequestContext::query_value(const std::string& key) const {
  auto it = query.find(key);
  return it == query.end() ? std::string() : it->second;
}

std::string sandbox_json(const SandboxInfo& s) {
  JsonWriter w;
  w.begin_object();
  w.key("id").value(s.id);
  w.key("vmid").value(s.vmid);
  w.key("node").value(s.node);
  w.key("hostname").value(s.hostname);
  w.key("address");
  if (s.address) {
    w.value(s.address->to_string());
  } else {
    w.null();
  }
  w.key("state").value(std::string(to_string(s.phase)));
  w.key("status").value(s.status);
  w.key("internet").value(s.internet);
  w.key("cpus").value(s.cpus).key("memory_mb").value(s.memory_mb).key("disk_gb").value(s.disk_gb);
  w.key("created_at").value(iso_time(s.created_at));
  w.key("expires_at");
  if (s.expires_at > 0) {
    w.value(iso_time(s.expires_at));
  } else {
    w.null();
  }
  w.key("labels").value(s.labels);
  w.key("owner").value(s.owner);
  w.end_object();
  return w.take();
}

// ---- Api --------------------------------------------------------------------------------------

namespace {
// A request body as a std::streambuf, for streaming it to SFTP with read-ahead: pump() (on the
// request's thread) reads the socket into a small queue while the consumer (the SSH session's
// I/O thread, through an istream) writes what is already there, so the two overlap. At most
// `limit` bytes, exactly `length` when the request has a Content-Length; any other outcome
// makes the reader fail (badbit) so the consumer gives up, and state() says why.
class BodyPump : public std::streambuf {
 public:
  enum class State { kOk, kTooLarge, kShort, kBroken };
  static constexpr std::size_t kChunk = 64 << 10;
  static constexpr std::size_t kDepth = 8;  // chunks read ahead: at most 512 KiB per upload

  BodyPump(std::istream* in, std::uint64_t limit, std::optional<std::uint64_t> length)
      : in_(in), limit_(limit), length_(length) {}

  // Reads the body until its end, an error, or cancel(). Never throws.
  void pump() {
    State outcome = State::kOk;
    std::string why;
    while (in_) {
      std::size_t want = kChunk;
      if (length_)
        want = static_cast<std::size_t>(std::min<std::uint64_t>(want, *length_ - received_));
      if (want == 0) break;
      std::string chunk(want, '\0');
      std::streamsize got = 0;
      try {
        in_->read(chunk.data(), static_cast<std::streamsize>(want));
        got = in_->gcount();
      } catch (const std::exception& e) {
        outcome = State::kBroken;
        why = e.what();
        break;
      }
      received_ += static_cast<std::uint64_t>(got);
      if (received_ > limit_) {
        outcome = State::kTooLarge;
        break;
      }
      if (got == 0) {
        if (length_ && received_ < *length_) outcome = State::kShort;
        break;
      }
      chunk.resize(static_cast<std::size_t>(got));
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return queue_.size() < kDepth || cancelled_; });
      if (cancelled_) {
        stopped_early_ = true;
        break;
      }
      queue_.push_back(std::move(chunk));
      cv_.notify_all();
    }
    std::lock_guard lock(mu_);
    state_ = outcome;
    error_ = why;
    finished_ = true;
    cv_.notify_all();
  }
  // The consumer is gone: pump() stops reading.
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }
  // After pump() returned:
  State state() const { return state_; }
  const std::string& error() const { return error_; }
  std::uint64_t received() const { return received_; }
  // Whether the whole body was read (false when the consumer stopped early).
  bool complete() const { return !stopped_early_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return !queue_.empty() || finished_; });
    if (queue_.empty()) {
      // An exception from the streambuf sets badbit in the istream reading it.
      if (state_ != State::kOk) throw std::runtime_error("request body unusable");
      return traits_type::eof();
    }
    current_ = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    setg(current_.data(), current_.data(), current_.data() + current_.size());
    return traits_type::to_int_type(*gptr());
  }

 private:
  std::istream* in_;
  std::uint64_t limit_;
  std::optional<std::uint64_t> length_;
  std::uint64_t received_ = 0;  // pump()'s thread only
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::string current_;  // the consumer's chunk
  bool finished_ = false, cancelled_ = false;
  bool stopped_early_ = false;  // pump()'s thread only
  State state_ = State::kOk;
  std::string error_;
};

// A download as a std::streambuf, the mirror of BodyPump: the SSH session's I/O thread writes
// the file into it (through an ostream) and next() hands the chunks to the request's thread,
// which writes them to the client, so the two overlap and the file is never held whole: at
// most kDepth chunks wait. A client that stops reading stalls the download once they are full
// (as a slow client stalls an upload); cancel() makes the writer fail instead.
class ReplyPump : public std::streambuf {
 public:
  static constexpr std::size_t kDepth = 8;

  // After the download returned (whatever it returned): next() reports the end.
  void finish() {
    std::lock_guard lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }
  // The client is gone: the writer fails from now on.
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    cv_.notify_all();
  }
  // The next chunk, or false at the end.
  bool next(std::string* chunk) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return !queue_.empty() || finished_; });
    if (queue_.empty()) return false;
    *chunk = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return true;
  }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return queue_.size() < kDepth || cancelled_; });
    // An exception from the streambuf sets badbit in the ostream writing it.
    if (cancelled_) throw std::runtime_error("the client went away");
    queue_.emplace_back(s, static_cast<std::size_t>(n));
    cv_.notify_all();
    return n;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    char ch = traits_type::to_char_type(c);
    xsputn(&ch, 1);
    return c;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  bool finished_ = false, cancelled_ = false;
};

// The Manager's peers whose calls /metrics shows.
struct CallPeer {
  const char* prefix;
  const char* what;
  CallStats ManagerStats::*stats;
};
constexpr CallPeer kCallPeers[] = {
    {"pvs_proxmox_request", "Proxmox API requests (retries included)",
     &ManagerStats::proxmox_calls},
    {"pvs_proxmox_task", "Proxmox tasks waited for (clone, start, stop, destroy, ...)",
     &ManagerStats::proxmox_tasks},
    {"pvs_agent_request", "Requests to pve-sandbox-agent", &ManagerStats::agent_calls},
};
}  // namespace

void Api::declare_metrics(Metrics& m) {
  m.declare_counter("pvs_http_requests_total", "HTTP requests by method, route and status.");
  m.declare_histogram("pvs_http_request_duration_seconds", "HTTP request latency by route.",
                      Metrics::latency_buckets());
  m.declare_gauge("pvs_manager_ready", "1 once the Manager recovered its state from Proxmox.");
  m.declare_gauge("pvs_sandboxes_live", "Live sandboxes.");
  m.declare_counter("pvs_sandbox_creates_total", "Sandboxes created.");
  m.declare_counter("pvs_sandbox_create_failures_total", "Sandbox creations that failed.");
  m.declare_counter("pvs_sandbox_destroys_total", "Sandboxes destroyed.");
  m.declare_counter("pvs_sandbox_destroy_failures_total", "Sandbox destructions that failed.");
  m.declare_counter("pvs_reconciles_total", "Reconciler runs.");
  m.declare_counter("pvs_reconcile_failures_total", "Reconciler runs that failed.");
  m.declare_counter("pvs_orphans_destroyed_total", "Orphan containers destroyed by recovery.");
  m.declare_counter("pvs_expired_destroyed_total", "Sandboxes destroyed when their TTL ended.");
  m.declare_gauge("pvs_quarantined_addresses", "Addresses waiting for a confirmed revoke.");
  m.declare_gauge("pvs_warm_pool_containers", "Stopped clones ready in the warm pool.");
  m.declare_counter("pvs_warm_pool_hits_total", "Creates served from the warm pool.");
  m.declare_counter("pvs_warm_pool_misses_total", "Creates that had to clone.");
  m.declare_counter("pvs_exec_total", "Commands run, by result (ok, nonzero, timeout, error).");
  m.declare_histogram("pvs_exec_duration_seconds", "Command latency through the API.",
                      Metrics::latency_buckets());
  m.declare_counter("pvs_audit_failures_total", "Audit records that could not be written.");
  m.declare_counter("pvs_rejected_total", "Requests rejected by limits (413, 429).");
  // The Manager's calls to its peers (pvs::CallStats), as histograms with its bucket bounds.
  std::vector<double> call_buckets;
  for (auto ms : CallStats::kBucketBoundsMs) call_buckets.push_back(ms / 1000.0);
  for (const auto& peer : kCallPeers) {
    m.declare_histogram(std::string(peer.prefix) + "_duration_seconds",
                        std::string(peer.what) + ": latency.", call_buckets);
    m.declare_counter(std::string(peer.prefix) + "_errors_total",
                      std::string(peer.what) + " that failed.");
  }
}

Api::Api(ServiceConfig config, AuditLog* audit, Metrics* metrics)
    : config_(std::move(config)),
      tokens_(config_.tokens, config_.default_max_sandboxes),
      audit_(audit),
      metrics_(metrics) {
  std::random_device rd;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", rd());
  request_prefix_ = buf;
  metrics_->add_collector([this](Metrics& m) {
    auto manager = this->manager();
    m.set("pvs_manager_ready", {}, manager ? 1 : 0);
    if (!manager) return;
    ManagerStats s = manager->stats();
    m.set("pvs_sandboxes_live", {}, static_cast<double>(s.live));
    m.set("pvs_quarantined_addresses", {}, static_cast<double>(s.quarantined_addresses));
    m.set("pvs_warm_pool_containers", {}, static_cast<double>(s.pooled));
    // Counters mirror the Manager's own (monotonic) counters.
    auto mirror = [&m](const char* name, std::uint64_t v) {
      double current = m.value(name);
      if (static_cast<double>(v) > current) m.inc(name, {}, static_cast<double>(v) - current);
    };
    mirror("pvs_sandbox_creates_total", s.creates);
    mirror("pvs_sandbox_create_failures_total", s.create_failures);
    mirror("pvs_sandbox_destroys_total", s.destroys);
    mirror("pvs_sandbox_destroy_failures_total", s.destroy_failures);
    mirror("pvs_reconciles_total", s.reconciles);
    mirror("pvs_reconcile_failures_total", s.reconcile_failures);
    mirror("pvs_orphans_destroyed_total", s.orphans_destroyed);
    mirror("pvs_expired_destroyed_total", s.expired_destroyed);
    mirror("pvs_warm_pool_hits_total", s.pool_hits);
    mirror("pvs_warm_pool_misses_total", s.pool_misses);
    for (const auto& peer : kCallPeers) {
      const CallStats& c = s.*peer.stats;
      m.set_histogram(std::string(peer.prefix) + "_duration_seconds", {},
                      std::vector<std::uint64_t>(c.buckets.begin(), c.buckets.end()), c.count,
                      c.sum_seconds);
      mirror((std::string(peer.prefix) + "_errors_total").c_str(), c.errors);
    }
  });

  router_.add("GET", "/v1/health", &Api::health);
  router_.add("GET", "/v1/openapi.json", &Api::openapi);
  router_.add("GET", "/metrics", &Api::metrics_text);
  router_.add("POST", "/v1/sandboxes", &Api::create);
  router_.add("GET", "/v1/sandboxes", &Api::list);
  router_.add("GET", "/v1/sandboxes/{id}", &Api::show);
  router_.add("DELETE", "/v1/sandboxes/{id}", &Api::destroy);
  router_.add("POST", "/v1/sandboxes/{id}/exec", &Api::exec);
  router_.add("GET", "/v1/sandboxes/{id}/files", &Api::get_file);
  router_.add("PUT", "/v1/sandboxes/{id}/files", &Api::put_file);
  router_.add("PUT", "/v1/sandboxes/{id}/internet", &Api::internet);
  router_.add("POST", "/v1/sandboxes/{id}/ttl", &Api::ttl);
  router_.add("POST", "/v1/sandboxes/{id}/snapshots", &Api::snapshot_create);
  router_.add("GET", "/v1/sandboxes/{id}/snapshots", &Api::snapshot_list);
  router_.add("POST", "/v1/sandboxes/{id}/snapshots/{name}/rollback", &Api::snapshot_rollback);
  router_.add("DELETE", "/v1/sandboxes/{id}/snapshots/{name}", &Api::snapshot_delete);
}

Api::~Api() = default;

void Api::set_manager(std::shared_ptr<Manager> manager) {
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
  auto match = router_.match(ctx.method, ctx.path);
  if (!match.handler) {
    if (!match.allowed.empty()) {
      ctx.response->set("Allow", match.allowed);
      throw method_not_allowed(ctx.method + " is not allowed here; allowed: " + match.allowed);
    }
    throw not_found("no such endpoint: " + ctx.path.substr(0, 200));
  }
  ctx.params = std::move(match.params);
  Handler handler = *match.handler;
  // The route label is the pattern, so metrics have bounded cardinality.
  ctx.route = ctx.path;
  for (const auto& [name, value] : ctx.params) {
    auto pos = ctx.route.find("/" + value);
    if (pos != std::string::npos) ctx.route.replace(pos + 1, value.size(), "{" + name + "}");
  }
  bool is_public =
      handler == &Api::health || handler == &Api::openapi || handler == &Api::metrics_text;
  if (!is_public) {
    // A copy: get() returns its default argument by reference (a temporary here).
    const std::string authorization = ctx.request->get("Authorization", "");
    ctx.principal = tokens_.authenticate(authorization);
    if (!ctx.principal) {
      // Refused calls are audited too: what was tried and why, never what was presented.
      ctx.action = "auth.denied";
      auto id = ctx.params.find("id");
      if (id != ctx.params.end()) ctx.sandbox = id->second.substr(0, 64);
      const char* reason =
          authorization.empty() ? "missing"
          : authorization.size() > 7 && Poco::icompare(authorization.substr(0, 7), "Bearer ") == 0
              ? "unknown_token"
              : "not_bearer";
      JsonWriter p;
      p.begin_object()
          .key("method")
          .value(ctx.method.substr(0, 16))
          .key("route")
          .value(ctx.route)
          .key("reason")
          .value(reason)
          .end_object();
      ctx.params_json = p.take();
      ctx.response->set("WWW-Authenticate", "Bearer");
      throw unauthenticated();
    }
  }
  (this->*handler)(ctx);
}

void Api::finish(RequestContext& ctx) {
  metrics_->inc(
      "pvs_http_requests_total",
      {{"method", ctx.method}, {"route", ctx.route}, {"status", std::to_string(ctx.status)}});
  metrics_->observe("pvs_http_request_duration_seconds", {{"route", ctx.route}},
                    seconds_since(ctx.start));
  if (ctx.status == 413 || ctx.status == 429) metrics_->inc("pvs_rejected_total");
}

// Mutating calls are audited before the reply leaves (also when they failed).
static void audit_before_reply(AuditLog* audit, Metrics* metrics, RequestContext& ctx, int status,
                               const ApiError* error) {
  if (!audit || ctx.action.empty()) return;
  AuditRecord r;
  r.request_id = ctx.request_id;
  r.token = ctx.principal ? ctx.principal->name : "";
  r.remote = ctx.request->clientAddress().host().toString();
  r.action = ctx.action;
  r.sandbox = ctx.sandbox;
  r.params_json = ctx.params_json;
  r.status = status;
  if (error) {
    r.error_code = error->code;
    r.error_message = error->message;
  }
  r.duration_ms = static_cast<std::int64_t>(seconds_since(ctx.start) * 1000);
  if (auto st = audit->append(r); !st) {
    metrics->inc("pvs_audit_failures_total");
    log::error("audit: " + st.error().message);
  }
}

// Before replying: a body the handler did not read must not poison the next request on this
// connection (Poco does not drain it).
static void settle_body(RequestContext& ctx) {
  auto& req = *ctx.request;
  if (req.getChunkedTransferEncoding()) {
    ctx.response->setKeepAlive(false);
  } else if (req.hasContentLength() && req.getContentLength64() > 0) {
    if (req.getContentLength64() <= (64 << 10)) {
      req.stream().ignore(req.getContentLength64());
    } else {
      ctx.response->setKeepAlive(false);
    }
  }
}

void Api::send_json(RequestContext& ctx, int status, const std::string& body) {
  send_bytes(ctx, status, "application/json", body);
}

void Api::begin_reply(RequestContext& ctx, int status, const std::string& content_type) {
  audit_before_reply(audit_, metrics_, ctx, status, ctx.error ? &*ctx.error : nullptr);
  settle_body(ctx);
  ctx.responded = true;
  ctx.status = status;
  auto& resp = *ctx.response;
  resp.setStatus(static_cast<HTTPResponse::HTTPStatus>(status));
  resp.set("X-Request-Id", ctx.request_id);
  resp.setContentType(content_type);
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
  audit_before_reply(audit_, metrics_, ctx, status, nullptr);
  settle_body(ctx);
  ctx.responded = true;
  ctx.status = status;
  auto& resp = *ctx.response;
  resp.setStatus(static_cast<HTTPResponse::HTTPStatus>(status));
  resp.set("X-Request-Id", ctx.request_id);
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
  if (!req.hasContentLength() && !req.getChunkedTransferEncoding()) return body;
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

std::shared_ptr<Sandbox> Api::find_sandbox(RequestContext& ctx) {
  const std::string& id = ctx.params.at("id");
  if (!is_sandbox_id(id)) throw bad_request("id: not a sandbox id (sb- and 12 hex digits)");
  ctx.sandbox = id;
  auto manager = require_manager();
  auto sandbox = manager->attach(id);
  if (!sandbox) {
    if (sandbox.error().code == ErrorCode::kNotFound) throw not_found("no sandbox " + id);
    throw from_error(sandbox.error());
  }
  if (!ctx.principal->admin && (*sandbox)->info().owner != ctx.principal->name) {
    throw not_found("no sandbox " + id);  // others' sandboxes are invisible
  }
  return *sandbox;
}

// ---- handlers ---------------------------------------------------------------------------------

void Api::health(RequestContext& ctx) {
  auto manager = this->manager();
  JsonWriter w;
  w.begin_object();
  int status = 200;
  if (!manager) {
    status = 503;
    w.key("status").value("starting");
  } else {
    {
      std::lock_guard lock(mu_);
      if (std::chrono::steady_clock::now() - health_at_ < std::chrono::seconds(1)) {
        auto cached = health_cached_;
        send_json(ctx, cached.first, cached.second);
        return;
      }
    }
    Health h = manager->health();
    bool ok = h.proxmox_ok && h.agent_ok;
    status = ok ? 200 : 503;
    w.key("status").value(ok ? "ok" : "degraded");
    w.key("proxmox").begin_object().key("ok").value(h.proxmox_ok);
    if (!h.proxmox_ok) w.key("error").value(h.proxmox_error);
    w.end_object();
    w.key("agent").begin_object().key("ok").value(h.agent_ok);
    if (!h.agent_ok) w.key("error").value(h.agent_error);
    w.end_object();
    w.key("sandboxes").value(static_cast<std::uint64_t>(manager->stats().live));
  }
  w.key("version").value(std::string(pvs::version()));
  w.end_object();
  std::string body = w.take();
  if (manager) {
    std::lock_guard lock(mu_);
    health_at_ = std::chrono::steady_clock::now();
    health_cached_ = {status, body};
  }
  send_json(ctx, status, body);
}

void Api::openapi(RequestContext& ctx) {
  send_json(ctx, 200, std::string(openapi_document()));
}

void Api::metrics_text(RequestContext& ctx) {
  send_bytes(ctx, 200, "text/plain; version=0.0.4; charset=utf-8", metrics_->render());
}

void Api::create(RequestContext& ctx) {
  ctx.action = "sandbox.create";
  auto req = parse_create(json_body(ctx), config_);
  if (!req) throw req.error();
  {
    JsonWriter p;
    p.begin_object().key("cpus").value(req->cpus).key("memory_mb").value(req->memory_mb);
    p.key("disk_gb").value(req->disk_gb).key("internet").value(req->internet);
    p.key("ttl_seconds").value(req->ttl_seconds).key("labels").value(req->labels);
    p.key("hostname").value(req->hostname).end_object();
    ctx.params_json = p.take();
  }
  auto manager = require_manager();
  const std::string& owner = ctx.principal->name;
  {
    std::lock_guard lock(mu_);
    int owned = creating_[owner];
    for (const auto& info : manager->list()) owned += info.owner == owner;
    if (owned >= ctx.principal->max_sandboxes) {
      throw limit_exceeded("token " + owner + " already has " + std::to_string(owned) +
                           " sandboxes (limit " + std::to_string(ctx.principal->max_sandboxes) +
                           ")");
    }
    ++creating_[owner];
  }
  struct Release {
    Api* api;
    std::string owner;
    ~Release() {
      std::lock_guard lock(api->mu_);
      if (--api->creating_[owner] == 0) api->creating_.erase(owner);
    }
  } release{this, owner};

  CreateOptions options;
  options.hostname = req->hostname;
  options.cpus = req->cpus;
  options.memory_mb = req->memory_mb;
  options.disk_gb = req->disk_gb;
  options.internet = req->internet;
  options.ttl = std::chrono::seconds(req->ttl_seconds);
  options.labels = req->labels;
  options.owner = owner;
  auto sandbox = manager->create(options);
  if (!sandbox) throw from_error(sandbox.error());
  SandboxInfo info = (*sandbox)->info();
  ctx.sandbox = info.id;
  ctx.response->set("Location", "/v1/sandboxes/" + info.id);
  send_json(ctx, 201, sandbox_json(info));
}

void Api::list(RequestContext& ctx) {
  std::vector<std::string> labels;
  auto range = ctx.query.equal_range("label");
  for (auto it = range.first; it != range.second; ++it) labels.push_back(it->second);
  for (const auto& [k, v] : ctx.query) {
    if (k != "label") throw bad_request(k.substr(0, 64) + ": unknown query parameter");
  }
  auto selector = parse_selector(labels);
  if (!selector) throw selector.error();
  auto manager = require_manager();
  JsonWriter w;
  w.begin_object().key("sandboxes").begin_array();
  for (const auto& info : manager->list(*selector)) {
    if (ctx.principal->admin || info.owner == ctx.principal->name) w.raw(sandbox_json(info));
  }
  w.end_array().end_object();
  send_json(ctx, 200, w.take());
}

void Api::show(RequestContext& ctx) {
  auto sandbox = find_sandbox(ctx);
  send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void Api::destroy(RequestContext& ctx) {
  ctx.action = "sandbox.destroy";
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->destroy(); !st) throw from_error(st.error());
  send_empty(ctx, 204);
}

void Api::exec(RequestContext& ctx) {
  ctx.action = "sandbox.exec";
  auto req = parse_exec(json_body(ctx), config_);
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
  auto sandbox = find_sandbox(ctx);
  ExecOptions options;
  options.stdin_data = std::move(req->stdin_data);
  options.env = req->env;
  options.cwd = req->cwd;
  options.timeout = std::chrono::seconds(
      req->timeout_seconds > 0 ? req->timeout_seconds : config_.max_exec_timeout_seconds);
  options.max_output = config_.max_exec_output_bytes;
  auto started = std::chrono::steady_clock::now();
  auto account = [&](const Result<ExecResult>& r) {
    std::string result = !r                  ? "error"
                         : r->timed_out      ? "timeout"
                         : r->exit_code == 0 ? "ok"
                                             : "nonzero";
    metrics_->inc("pvs_exec_total", {{"result", result}});
    metrics_->observe("pvs_exec_duration_seconds", {}, seconds_since(started));
  };

  std::string accept = ctx.request->get("Accept", "");
  if (accept.find("application/x-ndjson") == std::string::npos) {
    auto r = sandbox->exec(req->command, std::move(options));
    account(r);
    if (!r) throw from_error(r.error());
    send_json(ctx, 200, exec_result_json(*r));
    return;
  }

  // Streaming: start, then stdout/stderr chunks as they arrive, then exit (or error).
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
  settle_body(ctx);
  ctx.responded = true;
  ctx.status = 200;
  auto& resp = *ctx.response;
  resp.setStatus(HTTPResponse::HTTP_OK);
  resp.set("X-Request-Id", ctx.request_id);
  resp.setContentType("application/x-ndjson");
  resp.setChunkedTransferEncoding(true);
  std::ostream& out = resp.send();
  auto emit = [&out](const std::string& line) {
    if (!out.good()) return;
    out << line << '\n';
    out.flush();
  };
  {
    JsonWriter w;
    w.begin_object().key("type").value("start").key("sandbox").value(sandbox->id()).end_object();
    emit(w.take());
  }
  std::string command = req->command;
  std::thread worker([state, sandbox, command, options = std::move(options)]() mutable {
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
  account(r);
  JsonWriter w;
  w.begin_object();
  if (r) {
    audit_before_reply(audit_, metrics_, ctx, 200, nullptr);
    w.key("type").value("exit").key("exit_code").value(r->exit_code);
    if (!r->exit_signal.empty()) w.key("signal").value(r->exit_signal);
    w.key("timed_out").value(r->timed_out);
    w.key("truncated").value(r->truncated || state->dropped);
    w.key("duration_ms").value(static_cast<std::int64_t>(r->duration.count() / 1000));
  } else {
    ApiError e = from_error(r.error());
    audit_before_reply(audit_, metrics_, ctx, e.status, &e);
    w.key("type").value("error").key("error").begin_object();
    w.key("code").value(e.code).key("message").value(e.message).end_object();
  }
  w.end_object();
  emit(w.take());
}

void Api::get_file(RequestContext& ctx) {
  auto path = validate_path(ctx.query_value("path"));
  if (!path) throw path.error();
  std::string list = ctx.query_value("list");
  auto sandbox = find_sandbox(ctx);
  if (list == "true" || list == "1") {
    auto entries = sandbox->list_dir(*path);
    if (!entries) throw from_error(entries.error());
    JsonWriter w;
    w.begin_object().key("path").value(*path).key("entries").begin_array();
    for (const auto& e : *entries) {
      w.begin_object().key("name").value(e.name).key("type").value(file_type(e.attrs));
      w.key("size").value(e.attrs.size).key("mode").value(octal(e.attrs.mode));
      w.key("mtime").value(e.attrs.mtime).end_object();
    }
    w.end_array().end_object();
    send_json(ctx, 200, w.take());
    return;
  }
  auto attrs = sandbox->stat(*path);
  if (!attrs) throw from_error(attrs.error());
  if (attrs->is_dir()) throw bad_request(*path + " is a directory (list=true lists it)");
  if (attrs->size > config_.max_download_bytes) {
    throw too_large("file larger than " + std::to_string(config_.max_download_bytes) + " bytes");
  }
  // Streamed (chunked) from SFTP to the client. The reply starts with the first byte, so an
  // error before it (no permission, ...) still gets its status; one after it (the file grew
  // past the limit, the sandbox went away) can only cut the connection, without the final
  // chunk, so that no client takes a partial file for a whole one.
  ReplyPump pump;
  Result<std::uint64_t> got = 0;
  std::thread downloader([&] {
    std::ostream out(&pump);
    DownloadOptions o;
    o.max_size = config_.max_download_bytes;
    try {
      got = sandbox->download(*path, out, o);
    } catch (const std::exception& e) {
      got = fail(ErrorCode::kInternal, std::string("download: ") + e.what());
    }
    pump.finish();
  });
  std::ostream* client = nullptr;
  bool client_gone = false;
  for (std::string chunk; pump.next(&chunk);) {
    if (client_gone) continue;
    try {
      if (!client) {
        begin_reply(ctx, 200, "application/octet-stream");
        ctx.response->setChunkedTransferEncoding(true);
        client = &ctx.response->send();
      }
      client->write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      client_gone = !*client;
    } catch (const Poco::Exception&) {
      client_gone = true;
    }
    if (client_gone) pump.cancel();
  }
  downloader.join();
  if (!client) {
    if (!got) throw from_error(got.error());
    send_bytes(ctx, 200, "application/octet-stream", "");  // an empty file
    return;
  }
  if (!got || client_gone) {
    log::warn(
        "request " + ctx.request_id + ": download of " + *path + " cut off after " +
        "the reply began: " + (got ? std::string("the client went away") : got.error().message));
    abort_reply(ctx);
  }
}

void Api::put_file(RequestContext& ctx) {
  ctx.action = "sandbox.put_file";
  auto path = validate_path(ctx.query_value("path"));
  if (!path) throw path.error();
  std::uint32_t mode = 0644;
  if (std::string m = ctx.query_value("mode"); !m.empty()) {
    auto parsed = parse_mode(m);
    if (!parsed) throw parsed.error();
    mode = *parsed;
  }
  auto& req = *ctx.request;
  if (req.hasContentLength() &&
      req.getContentLength64() > static_cast<std::int64_t>(config_.max_upload_bytes)) {
    ctx.response->setKeepAlive(false);
    throw too_large("request body larger than " + std::to_string(config_.max_upload_bytes) +
                    " bytes");
  }
  auto sandbox = find_sandbox(ctx);
  // The body streams from the socket to SFTP (64 KiB at a time, never held whole); the upload
  // is atomic, so a body that breaks off or exceeds the limit leaves the target untouched.
  std::optional<std::uint64_t> length;
  if (req.hasContentLength()) length = static_cast<std::uint64_t>(req.getContentLength64());
  bool has_body = length.has_value() || req.getChunkedTransferEncoding();
  BodyPump body(has_body ? &req.stream() : nullptr, config_.max_upload_bytes, length);
  UploadOptions options;
  options.mode = mode;
  options.create_parents = true;
  Status st;
  {
    std::istream in(&body);
    std::thread uploader([&] {
      try {
        st = sandbox->upload(*path, in, options, length);
      } catch (const std::exception& e) {
        st = fail(ErrorCode::kInternal, std::string("upload: ") + e.what());
      }
      body.cancel();
    });
    body.pump();
    uploader.join();
  }
  JsonWriter p;
  p.begin_object().key("path").value(*path).key("mode").value(octal(mode));
  p.key("size").value(body.received()).end_object();
  ctx.params_json = p.str();
  if (!body.complete() || body.state() != BodyPump::State::kOk) ctx.response->setKeepAlive(false);
  if (body.state() == BodyPump::State::kTooLarge) {
    throw too_large("request body larger than " + std::to_string(config_.max_upload_bytes) +
                    " bytes");
  }
  if (body.state() == BodyPump::State::kShort) {
    throw bad_request("request body shorter than its Content-Length");
  }
  if (body.state() == BodyPump::State::kBroken) {
    throw bad_request("reading the request body failed: " + body.error());
  }
  if (!st) throw from_error(st.error());
  send_json(ctx, 200, p.take());
}

void Api::internet(RequestContext& ctx) {
  ctx.action = "sandbox.internet";
  auto enabled = parse_internet(json_body(ctx));
  if (!enabled) throw enabled.error();
  ctx.params_json = std::string("{\"enabled\":") + (*enabled ? "true" : "false") + "}";
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->set_internet(*enabled); !st) throw from_error(st.error());
  send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void Api::ttl(RequestContext& ctx) {
  ctx.action = "sandbox.ttl";
  auto seconds = parse_ttl(json_body(ctx), config_);
  if (!seconds) throw seconds.error();
  ctx.params_json = "{\"ttl_seconds\":" + std::to_string(*seconds) + "}";
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->extend_ttl(std::chrono::seconds(*seconds)); !st) {
    throw from_error(st.error());
  }
  send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void Api::snapshot_create(RequestContext& ctx) {
  ctx.action = "sandbox.snapshot";
  auto req = parse_snapshot(json_body(ctx));
  if (!req) throw req.error();
  JsonWriter p;
  p.begin_object().key("name").value(req->name).key("description").value(req->description);
  p.end_object();
  ctx.params_json = p.str();
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->snapshot(req->name, req->description); !st) {
    throw from_error(st.error());
  }
  send_json(ctx, 201, p.take());
}

void Api::snapshot_list(RequestContext& ctx) {
  auto sandbox = find_sandbox(ctx);
  auto snaps = sandbox->snapshots();
  if (!snaps) throw from_error(snaps.error());
  JsonWriter w;
  w.begin_object().key("snapshots").begin_array();
  for (const auto& s : *snaps) {
    w.begin_object().key("name").value(s.name).key("description").value(s.description);
    w.key("created_at").value(iso_time(s.created_at)).end_object();
  }
  w.end_array().end_object();
  send_json(ctx, 200, w.take());
}

// The {name} of a snapshot route, validated and recorded for the audit log. A missing snapshot
// is the Manager's kNotFound (404).
static const std::string& snapshot_name(RequestContext& ctx) {
  const std::string& name = ctx.params.at("name");
  if (!is_snapshot_name(name)) throw bad_request("name: not a snapshot name");
  ctx.params_json = "{\"name\":\"" + name + "\"}";
  return name;
}

void Api::snapshot_rollback(RequestContext& ctx) {
  ctx.action = "sandbox.rollback";
  const std::string& name = snapshot_name(ctx);
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->rollback(name); !st) throw from_error(st.error());
  send_json(ctx, 200, sandbox_json(sandbox->info()));
}

void Api::snapshot_delete(RequestContext& ctx) {
  ctx.action = "sandbox.delete_snapshot";
  const std::string& name = snapshot_name(ctx);
  auto sandbox = find_sandbox(ctx);
  if (auto st = sandbox->delete_snapshot(name); !st) throw from_error(st.error());
  send_empty(ctx, 204);
}

// ---- config mapping ---------------------------------------------------------------------------

Result<ManagerConfig> manager_config(const ServiceConfig& c) {
  ManagerConfig m;
  m.proxmox.base_url = c.proxmox_url;
  m.proxmox.token_id = c.proxmox_token_id;
  m.proxmox.token_secret = c.proxmox_token_secret;
  m.proxmox.ca_file = c.proxmox_ca_file;
  m.proxmox.fingerprint = c.proxmox_fingerprint;
  m.proxmox.insecure_skip_verify = c.proxmox_insecure_skip_verify;
  m.proxmox.request_timeout = std::chrono::seconds(c.proxmox_timeout_seconds);
  m.node = c.proxmox_node;
  m.template_vmid = c.template_vmid;
  m.pool = c.pool;
  m.storage = c.storage;
  m.full_clone = c.full_clone;
  m.warm_pool = c.warm_pool;
  m.vmid_min = c.vmid_min;
  m.vmid_max = c.vmid_max;

  auto cidr = Cidr::parse(c.network_cidr);
  if (!cidr) return fail(cidr.error());
  m.sandbox_cidr = *cidr;
  auto gw = Ipv4Address::parse(c.network_gateway);
  if (!gw) return fail(gw.error());
  m.gateway = *gw;
  m.bridge = c.network_bridge;
  for (const auto& r : c.network_reserved) {
    auto rc = Cidr::parse(r);
    if (!rc) return fail(rc.error());
    m.reserved.push_back(*rc);
  }
  m.dhcp = c.network_dhcp;
  m.firewall = c.network_firewall;

  m.ssh.user = c.ssh_user;
  m.ssh.port = c.ssh_port;
  m.ssh.private_key_file = c.ssh_private_key_file;
  m.ssh.passphrase = c.ssh_passphrase;
  m.ssh.host_key_policy = c.ssh_host_key_policy == "pinned"        ? HostKeyPolicy::kPinned
                          : c.ssh_host_key_policy == "known_hosts" ? HostKeyPolicy::kKnownHosts
                          : c.ssh_host_key_policy == "tofu"        ? HostKeyPolicy::kTrustOnFirstUse
                                                                   : HostKeyPolicy::kInsecure;
  m.ssh.host_key_fingerprint = c.ssh_host_key_fingerprint;
  m.ssh.known_hosts_file = c.ssh_known_hosts_file;
  m.ssh.connect_timeout = std::chrono::seconds(c.ssh_connect_timeout_seconds);
  m.ssh_ready_timeout = std::chrono::seconds(c.ssh_ready_timeout_seconds);
  m.wait_for_ssh = c.ssh_wait_for_ready;

  m.agent.socket_path = c.agent_socket;
  m.agent.timeout = std::chrono::seconds(c.agent_timeout_seconds);
  m.internet_lease = std::chrono::seconds(c.internet_lease_seconds);

  m.max_sandboxes = c.max_sandboxes;
  m.default_ttl = std::chrono::seconds(c.default_ttl_seconds);
  m.max_ttl = std::chrono::seconds(c.max_ttl_seconds);
  m.max_cpus = c.max_cpus;
  m.max_memory_mb = c.max_memory_mb;
  m.max_disk_gb = c.max_disk_gb;
  m.reconcile_interval = std::chrono::seconds(c.reconcile_interval_seconds);
  return m;
}

// ---- HttpServer -------------------------------------------------------------------------------

namespace {

class ApiHandler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit ApiHandler(Api& api) : api_(api) {}
  void handleRequest(Poco::Net::HTTPServerRequest& request,
                     Poco::Net::HTTPServerResponse& response) override {
    api_.handle(request, response);
  }

 private:
  Api& api_;
};

class ApiFactory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit ApiFactory(Api& api) : api_(api) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new ApiHandler(api_);
  }

 private:
  Api& api_;
};

}  // namespace

HttpServer::HttpServer(const ServiceConfig& config, Api& api) : config_(config), api_(api) {}

HttpServer::~HttpServer() {
  stop();
}

Status HttpServer::start() {
  try {
    Poco::Net::SocketAddress address(config_.listen_address, config_.listen_port);
    Poco::Net::ServerSocket socket;
    if (config_.tls_cert_file.empty()) {
      socket = Poco::Net::ServerSocket(address, config_.http_max_queued);
    } else {
      Poco::Net::Context::Ptr context =
          new Poco::Net::Context(Poco::Net::Context::TLS_SERVER_USE, config_.tls_key_file,
                                 config_.tls_cert_file, "", Poco::Net::Context::VERIFY_NONE, 9,
                                 false, "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!MD5:!DSS");
      context->disableProtocols(Poco::Net::Context::PROTO_SSLV2 | Poco::Net::Context::PROTO_SSLV3 |
                                Poco::Net::Context::PROTO_TLSV1 |
                                Poco::Net::Context::PROTO_TLSV1_1);
      socket = Poco::Net::SecureServerSocket(address, config_.http_max_queued, context);
    }
    port_ = socket.address().port();
    auto* params = new Poco::Net::HTTPServerParams;
    params->setMaxThreads(config_.http_threads);
    params->setMaxQueued(config_.http_max_queued);
    params->setKeepAlive(true);
    params->setKeepAliveTimeout(Poco::Timespan(config_.http_keepalive_timeout_seconds, 0));
    params->setMaxKeepAliveRequests(config_.http_max_keepalive_requests);
    params->setTimeout(Poco::Timespan(config_.http_request_timeout_seconds, 0));
    params->setServerName("pve-sandbox-controller");
    pool_ = std::make_unique<Poco::ThreadPool>(2, config_.http_threads + 2);
    server_ = std::make_unique<Poco::Net::HTTPServer>(new ApiFactory(api_), *pool_, socket, params);
    server_->start();
  } catch (const Poco::Exception& e) {
    return fail(ErrorCode::kUnavailable, "cannot listen on " + config_.listen_address + ":" +
                                             std::to_string(config_.listen_port) + ": " +
                                             e.displayText());
  }
  return {};
}

void HttpServer::stop() {
  if (server_) {
    server_->stopAll(true);
    server_.reset();
  }
  if (pool_) {
    pool_->joinAll();
    pool_.reset();
  }
}

}  // namespace pvs::service
