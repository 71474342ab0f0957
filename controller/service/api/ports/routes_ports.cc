// The port proxy (port_routes.h): one request to a service in the sandbox, through a PortStream
// (an SSH direct-tcpip channel, or a TCP connection over a route), streamed both ways.
//
// The request head and body go first (the body as it is read from the client, re-chunked when
// the client chunked it), then the service's reply: its head (interim 1xx replies dropped), and
// its body as it arrives: with its Content-Length, or chunked to the client when the service
// chunked it or ends it by closing. The upstream connection is `Connection: close`, one request.
// A reply that breaks off after it began resets the client's connection (no partial body taken
// for a whole one). One audit record per request, at its end: port, method, path, status and
// the bytes each way.
#include <Poco/Exception.h>
#include <Poco/String.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "api/ports/listening.h"
#include "api/ports/port_audit.h"
#include "api/ports/port_policy.h"
#include "api/ports/port_proxy.h"
#include "api/ports/port_routes.h"
#include "http/chunk_frames.h"
#include "http/json.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {

namespace {

using ports::BodyFraming;
using ports::ResponseHead;

constexpr std::size_t kChunk = 64 << 10;      // the client's request body, read at a time
constexpr std::size_t kReadMost = 256 << 10;  // the service's bytes, read at a time
constexpr std::size_t kMaxHead = 64 << 10;

std::string where(std::uint16_t port, const std::string& id) {
  return "port " + std::to_string(port) + " in " + id;
}

ApiError tunnel_error(const Error& e, std::uint16_t port, const std::string& id) {
  if (e.is(SshErrc::kConnectRefused))
    return bad_gateway("nothing listens on " + where(port, id) +
                       " (127.0.0.1:" + std::to_string(port) + " as the sandbox sees it)");
  if (e.is(SshErrc::kChannelRefused)) return bad_gateway(e.message);
  if (e.is(SshErrc::kTimeout))
    return gateway_timeout("the service on " + where(port, id) + ": " + e.message);
  return from_error(e);
}

// The way to the service (port_stream.h). With ports.transport `route`, a TCP connection over a
// route; a service that refuses it (one on the sandbox's loopback only), or a node that cannot
// give the route (an agent or ruleset without routes), is reached over SSH instead.
std::unique_ptr<PortStream> open_stream(Sandbox& sandbox, std::uint16_t port, bool route,
                                        const RequestContext& ctx) {
  if (route) {
    RouteOptions options;
    options.port = port;
    auto stream = sandbox.open_route(options);
    if (stream) return std::move(*stream);
    if (!stream.error().is(SshErrc::kConnectRefused))
      log::warn("request " + ctx.request_id + ": no route to " + where(port, ctx.sandbox) + " (" +
                stream.error().message + "): over SSH");
  }
  TunnelOptions options;
  options.port = port;
  auto tunnel = sandbox.open_tunnel(options);
  if (!tunnel) throw tunnel_error(tunnel.error(), port, ctx.sandbox);
  return std::move(*tunnel);
}

// The service's side: what was read and not yet used, and the stream to read more from.
struct Upstream {
  PortStream& tunnel;
  const RequestContext& client;
  std::string pending;
  // Appends what comes next: the bytes read, 0 at the service's EOF. Waits at most kIdleTimeout,
  // looking once a second whether the client is still there: a client that hung up ends the
  // wait (the tunnel is closed next, so the service sees its connection end too: E2B's code
  // interpreter interrupts the cell).
  Result<std::size_t> more() {
    const auto deadline = std::chrono::steady_clock::now() + PortRoutes::kIdleTimeout;
    const std::size_t had = pending.size();
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pending.resize(had + kReadMost);  // read in place: no copy on the way
      auto n = tunnel.read(pending.data() + had, kReadMost,
                           std::clamp(left, std::chrono::milliseconds(1), kClientCheck));
      pending.resize(had + (n ? *n : 0));
      if (n || !n.error().is(SshErrc::kTimeout) || left <= kClientCheck) return n;
      if (client_hung_up(client)) return fail(ErrorCode::kUnavailable, "the client went away");
    }
  }
  static constexpr std::chrono::milliseconds kClientCheck{1000};
};

BodyFraming framing_of(const Poco::Net::HTTPServerRequest& req) {
  if (req.getChunkedTransferEncoding()) return {BodyFraming::Kind::kChunked, 0};
  if (req.hasContentLength() && req.getContentLength64() > 0)
    return {BodyFraming::Kind::kLength, static_cast<std::uint64_t>(req.getContentLength64())};
  return {};
}

// Sends the request head and streams its body; the body bytes sent. A service that stops
// taking the body (it closed its side, maybe after an early reply) ends the sending: its reply
// is read next, and the rest of the body is drained after it (settle_body).
std::uint64_t send_request(RequestContext& ctx, PortStream& t, const std::string& head,
                           BodyFraming body, const std::string& what) {
  auto check = [&](const Status& st) {
    if (st) return true;
    if (st.error().is(SshErrc::kDisconnected)) return false;
    if (st.error().is(SshErrc::kTimeout))
      throw gateway_timeout("the service on " + what + " does not read the request");
    throw from_error(st.error());
  };
  if (!check(t.write(head, PortRoutes::kIdleTimeout))) return 0;
  if (body.kind == BodyFraming::Kind::kNone) {
    ctx.body_read = true;
    return 0;
  }
  std::istream& in = ctx.request->stream();
  std::string buf(kChunk, '\0');
  std::uint64_t total = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    total += got;
    std::string_view data(buf.data(), got);
    std::string frame;
    if (body.kind == BodyFraming::Kind::kChunked) {
      char size[24];
      int n = std::snprintf(size, sizeof size, "%zx\r\n", got);
      frame.assign(size, static_cast<std::size_t>(n)).append(data).append("\r\n");
      data = frame;
    }
    if (!check(t.write(data, PortRoutes::kIdleTimeout))) return total;
  }
  if (in.bad() || (body.kind == BodyFraming::Kind::kLength && total != body.length)) {
    ctx.response->setKeepAlive(false);
    throw bad_request(
        "the request body broke off (shorter than its Content-Length, or its "
        "chunked encoding is malformed)");
  }
  if (body.kind == BodyFraming::Kind::kChunked)
    check(t.write("0\r\n\r\n", PortRoutes::kIdleTimeout));
  ctx.body_read = true;
  return total;
}

// The service's final reply head (interim 1xx ones dropped; a 101 is final when `upgrading`).
ResponseHead read_head(Upstream& up, const std::string& method, bool upgrading,
                       const std::string& what) {
  for (;;) {
    if (auto end = ports::head_end(up.pending)) {
      auto head = ports::parse_response_head(std::string_view(up.pending).substr(0, *end), method);
      if (!head) throw bad_gateway("the service on " + what + ": " + head.error().message);
      up.pending.erase(0, *end);
      if (head->status == 101 && !upgrading)
        throw bad_gateway("the service on " + what + " switched protocols (101) unasked");
      if (head->status >= 200 || head->status == 101) return std::move(*head);
      continue;
    }
    if (up.pending.size() > kMaxHead)
      throw bad_gateway("the service on " + what + " sent a reply head larger than 64 KiB");
    auto n = up.more();
    if (!n && n.error().is(SshErrc::kTimeout))
      throw gateway_timeout("the service on " + what + " sent no reply within " +
                            std::to_string(PortRoutes::kIdleTimeout.count()) + " s");
    if (!n) throw bad_gateway("the service on " + what + ": " + n.error().message);
    if (*n == 0)
      throw bad_gateway("the service on " + what + " closed the connection without a reply");
  }
}

struct BodyResult {
  std::uint64_t bytes = 0;
  std::optional<std::string> failure;  // the reply broke off: why
};

// Waits for more of the service's body; a failure when it ended or failed instead.
std::optional<std::string> more_body(Upstream& up, bool eof_ends) {
  auto n = up.more();
  if (!n) return "the service's reply broke off: " + n.error().message;
  if (*n == 0 && !eof_ends) return std::string("the service closed the connection mid-reply");
  return std::nullopt;
}

BodyResult copy_length(RequestContext& ctx, Upstream& up, std::uint64_t length) {
  BodyResult r;
  ctx.response->setContentLength64(static_cast<Poco::Int64>(length));
  std::ostream& out = ctx.response->send();
  out.flush();  // Poco buffers the head of a Content-Length reply in the body's stream
  ChunkFrames body(ctx, out, false);  // each piece one send, not Poco's 4 KiB ones
  while (r.bytes < length) {
    if (up.pending.empty()) {
      if ((r.failure = more_body(up, false))) return r;
      continue;
    }
    auto take =
        static_cast<std::size_t>(std::min<std::uint64_t>(length - r.bytes, up.pending.size()));
    bool sent = body.send(std::string_view(up.pending).substr(0, take));
    up.pending.erase(0, take);
    r.bytes += take;
    if (!sent) {
      r.failure = "the client went away";
      return r;
    }
  }
  out.flush();
  return r;
}

// A chunked reply to the client: the service's chunked body decoded, or its body up to its EOF.
BodyResult copy_chunked(RequestContext& ctx, Upstream& up, bool decode) {
  BodyResult r;
  ctx.response->setChunkedTransferEncoding(true);
  ChunkFrames frames(ctx, ctx.response->send());
  ports::ChunkedDecoder decoder;
  std::string data;
  for (;;) {
    if (decode) {
      auto used = decoder.feed(up.pending, &data);
      if (!used) {
        r.failure = used.error().message;
        return r;
      }
      up.pending.erase(0, *used);
    } else {
      data.swap(up.pending);
    }
    if (!data.empty()) {
      if (!frames.send(data)) {
        r.failure = "the client went away";
        return r;
      }
      r.bytes += data.size();
      data.clear();
    }
    if (decode && decoder.done()) return r;
    auto before = up.pending.size();
    if ((r.failure = more_body(up, !decode))) return r;
    if (!decode && up.pending.size() == before) return r;  // the service's EOF: the end
  }
}

BodyResult copy_body(RequestContext& ctx, Upstream& up, const ResponseHead& head) {
  try {
    switch (head.framing) {
      case ResponseHead::Framing::kNone:
        if (ctx.method == "HEAD" && head.length > 0)
          ctx.response->setContentLength64(static_cast<Poco::Int64>(head.length));
        ctx.response->send();
        return {};
      case ResponseHead::Framing::kLength: return copy_length(ctx, up, head.length);
      case ResponseHead::Framing::kChunked: return copy_chunked(ctx, up, true);
      case ResponseHead::Framing::kUntilClose: return copy_chunked(ctx, up, false);
    }
  } catch (const Poco::Exception&) {
    return {0, std::string("the client went away")};
  }
  return {};
}

// The service's headers on the reply (Date and Server replace the controller's own), and the
// sandboxing CSP every proxied reply carries (port_proxy.h).
void copy_headers(RequestContext& ctx, const ResponseHead& head, bool opaque_origin) {
  auto& resp = *ctx.response;
  if (!head.reason.empty()) resp.setReason(head.reason);
  for (const auto& [name, value] : head.headers) {
    if (Poco::icompare(name, "content-type") == 0 || Poco::icompare(name, "x-request-id") == 0)
      continue;
    if (Poco::icompare(name, "date") == 0 || Poco::icompare(name, "server") == 0)
      resp.set(name, value);
    else
      resp.add(name, value);
  }
  if (opaque_origin) resp.add("Content-Security-Policy", std::string(ports::kSandboxCsp));
}

}  // namespace

void PortRoutes::proxy(RequestContext& ctx) {
  const std::string& port_text = ctx.params.at("port");
  auto port = ports::parse_port(port_text);
  if (!port) throw port.error();
  auto sandbox = d_.sandboxes.find(ctx);
  auto path = ports::upstream_target(ctx.request->getURI(), ctx.sandbox, port_text);
  if (!path) throw path.error();
  forward(ctx, *sandbox,
          {*port, *path, "/v1/sandboxes/" + ctx.sandbox + "/ports/" + port_text, "", true, false});
}

bool PortRoutes::admit(RequestContext& ctx, const Target& to, const std::string& upgrade) {
  if (!ctx.principal || !d_.gate.judges(ctx.principal->name, PolicyAction::kPorts)) return true;
  PolicyRequest asked = ports::policy_request(to.port, ctx.method, to.path, upgrade);
  if (!to.e2b) return d_.gate.admit(ctx, asked);
  try {  // E2B: as its other calls, waits for a person, then an error if still undecided
    auto a = d_.gate.admission(*ctx.principal, ctx.sandbox, asked, "", false);
    ctx.policy_json = a.policy_json;
    if (a.pending) throw PolicyGate::still_pending(*a.pending);
    return true;
  } catch (const PolicyRefusal& refused) {
    ctx.policy_json = refused.policy_json;
    throw refused.error;
  }
}

void PortRoutes::forward(RequestContext& ctx, Sandbox& sandbox, const Target& to) {
  ctx.params_json = ports::audit_params(to.port, ctx.method, to.path, std::nullopt);
  const std::string what = where(to.port, ctx.sandbox);

  ports::UpstreamRequest request;
  request.method = ctx.method;
  request.target = to.path;
  request.port = to.port;
  request.host = to.host;
  for (const auto& [name, value] : *ctx.request) request.headers.emplace_back(name, value);
  request.body = framing_of(*ctx.request);
  request.forwarded_host = ctx.request->getHost();
  request.forwarded_prefix = to.prefix;
  request.upgrade = ports::requested_upgrade(request.headers);
  if (!request.upgrade.empty() &&
      (ctx.method != "GET" || request.body.kind != BodyFraming::Kind::kNone))
    throw bad_request("an upgrade (Upgrade: " + request.upgrade.substr(0, 32) +
                      ") is a GET without a body");
  // The policy before anything reaches the sandbox; the Approval header a repeat names is the
  // controller's, not the service's.
  if (!admit(ctx, to, request.upgrade)) return;
  if (!ctx.policy_json.empty())
    std::erase_if(request.headers,
                  [](const ports::Header& h) { return Poco::icompare(h.first, "approval") == 0; });
  // An upgrade takes a place among the caps first: beyond them a plain 429, nothing switched.
  std::string why;
  std::optional<WsSessions::Ticket> ticket =
      request.upgrade.empty() ? std::nullopt
                              : upgrades_.reserve(ctx.principal ? ctx.principal->name : "", &why);
  if (!request.upgrade.empty()) {
    if (!ticket) {
      ctx.response->set("Retry-After", "1");
      throw limit_exceeded(why + " (ports.max_upgrades_per_token, ports.max_upgrades)");
    }
  }

  std::unique_ptr<PortStream> stream = open_stream(sandbox, to.port, d_.route, ctx);
  Upstream up{*stream, ctx, {}};
  std::uint64_t sent = send_request(ctx, *stream, ports::request_head(request), request.body, what);
  ResponseHead head = read_head(up, ctx.method, ticket.has_value(), what);
  if (head.status == 101)
    return splice(ctx, to, std::move(stream), std::move(up.pending), head, std::move(*ticket),
                  sent);

  // One audit record at the end, with the bytes: the reply's beginning is not audited.
  std::string action = std::move(ctx.action);
  ctx.action.clear();
  d_.replies.begin_reply(ctx, head.status, head.content_type);
  copy_headers(ctx, head, to.opaque_origin);
  BodyResult body = copy_body(ctx, up, head);
  stream->close();
  ctx.action = std::move(action);
  ctx.params_json =
      ports::audit_params(to.port, ctx.method, to.path, std::make_pair(sent, body.bytes));
  ports::count(d_.metrics, "http", sent, body.bytes);
  std::optional<ApiError> cut;
  if (body.failure) {
    cut = bad_gateway("the reply from the service on " + what + " broke off after " +
                      std::to_string(body.bytes) + " bytes: " + *body.failure);
    log::warn("request " + ctx.request_id + ": " + cut->message);
    d_.replies.abort_reply(ctx);
  }
  d_.replies.audit(ctx, head.status, cut ? &*cut : nullptr);
}

// The kernel's own lists of the sandbox's sockets, read over SFTP (no command runs: nothing for
// the policy to judge, nothing in the sandbox's process list).
std::vector<ports::ListeningPort> read_listening(Sandbox& sandbox) {
  auto read = [&](const char* path) -> std::string {
    auto r = sandbox.read_file(path, 4 << 20);
    if (r) return std::move(*r);
    if (r.error().code == ErrorCode::kNotFound) return "";  // no IPv6 in the sandbox
    throw from_error(r.error());
  };
  std::string tcp4 = read("/proc/net/tcp");
  return ports::parse_listening(tcp4, read("/proc/net/tcp6"));
}

void PortRoutes::list(RequestContext& ctx) {
  auto sandbox = d_.sandboxes.find(ctx);
  d_.replies.send_json(ctx, 200, ports::listening_json(ctx.sandbox, read_listening(*sandbox)));
}

}  // namespace pvs::service
