// GET /v1/sandboxes/{id}/terminals/{tid}/ws: a terminal over a WebSocket (Poco::Net::WebSocket).
// Binary frames carry raw pty bytes both ways; text frames carry JSON control messages: from the
// client {"type":"resize","cols":N,"rows":N}; from the server {"type":"exit","code":N,...} when
// the program ended (then a close frame) and {"type":"error","message":...}. ?mode=watch is
// read-only (input and resizes are refused with an error message). Each connection has a
// bounded buffer (terminals.watcher_buffer_bytes): a client that reads too slowly is dropped
// with close code 1008, never slowing the terminal. The terminal survives the connection.
//
// The upgrade is judged (terminal.attach), checked (Origin) and counted (WsSessions: per token
// and in all) on an HTTP worker; the connection then runs off the pool, on a thread of its own
// (http/ws_sessions.h). Two threads per connection: one reads frames, a writer sends
// output; every socket call happens under one mutex (TLS sockets are not safe for concurrent
// use), and reads only happen when data is there (poll), so the writer is never held up long.
#include <Poco/JSON/Parser.h>
#include <Poco/Net/NetException.h>
#include <Poco/Net/WebSocket.h>
#include <Poco/String.h>

#include <thread>

#include "api/mcp/protocol.h"
#include "api/terminals/terminal_routes.h"
#include "http/json.h"
#include "http/ws_sessions.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {

using Poco::Net::WebSocket;

struct WsConnection {
  WebSocket ws;
  std::mutex mu;  // every call on ws
  std::atomic<bool> done{false};

  explicit WsConnection(WebSocket w) : ws(std::move(w)) {}

  bool send(const std::string& data, int flags) {
    std::lock_guard lock(mu);
    try {
      ws.sendFrame(data.data(), static_cast<int>(data.size()), flags);
      return true;
    } catch (const Poco::Exception&) {
      done = true;
      return false;
    }
  }
  void close(std::uint16_t code, const std::string& reason) {
    std::lock_guard lock(mu);
    try {
      ws.shutdown(code, reason);
    } catch (const Poco::Exception&) {
    }
    done = true;
  }
  void send_error(const std::string& message) {
    JsonWriter w;
    w.begin_object().key("type").value("error").key("message").value(message).end_object();
    send(w.take(), WebSocket::FRAME_TEXT);
  }
};

namespace {

std::string exit_message(const PtyExit& e) {
  JsonWriter w;
  w.begin_object().key("type").value("exit");
  if (e.signal.empty() && e.error.empty()) {
    w.key("code").value(e.exit_code);
  } else {
    w.key("code").null();
  }
  if (!e.signal.empty()) w.key("signal").value(e.signal);
  if (!e.error.empty()) w.key("error").value(e.error);
  return w.end_object().take();
}

constexpr std::size_t kMaxFrame = 32 << 10;  // what a client with a small buffer can take

// The writer: output as binary frames, then the exit message, or a drop.
void write_loop(WsConnection& c, TerminalWatcher& watcher) {
  while (!c.done) {
    std::string bytes = watcher.next(std::chrono::milliseconds(200));
    bool sent = true;
    for (std::size_t off = 0; sent && off < bytes.size(); off += kMaxFrame) {
      sent = c.send(bytes.substr(off, kMaxFrame), WebSocket::FRAME_BINARY);
    }
    if (!sent) break;
    if (watcher.dropped()) {
      c.close(WebSocket::WS_POLICY_VIOLATION, "reader too slow: dropped (watcher buffer full)");
      break;
    }
    if (auto e = watcher.ended()) {
      c.send(exit_message(*e), WebSocket::FRAME_TEXT);
      c.close(WebSocket::WS_NORMAL_CLOSE, "terminal ended");
      break;
    }
    if (watcher.cancelled()) break;
  }
  c.done = true;
}

// A text frame from the client.
void control_message(WsConnection& c, TerminalEntry& entry, bool watch, const std::string& text) {
  try {
    auto o = Poco::JSON::Parser().parse(text).extract<Poco::JSON::Object::Ptr>();
    std::string type = o->optValue<std::string>("type", "");
    if (type == "resize") {
      if (watch) return c.send_error("read-only watcher: resize refused");
      int cols = o->getValue<int>("cols"), rows = o->getValue<int>("rows");
      if (auto st = entry.terminal->resize(cols, rows); !st) c.send_error(st.error().message);
    } else if (type != "ping") {
      c.send_error("unknown message type \"" + type.substr(0, 32) + "\"");
    }
  } catch (const Poco::Exception& e) {
    c.send_error("bad control message: " + e.displayText().substr(0, 200));
  }
}

// The reader: input, control messages, the client's close.
// `type` sends input through the policy (TerminalRoutes::type_into).
void read_loop(WsConnection& c, TerminalEntry& entry, bool watch,
               const std::function<void(std::string_view)>& type) {
  std::vector<char> buf(64 << 10);
  while (!c.done) {
    int n = 0, flags = 0;
    {
      // Poll without the lock, then read under it (data is there: the read does not wait).
      if (!c.ws.poll(Poco::Timespan(0, 100000),
                     Poco::Net::Socket::SELECT_READ | Poco::Net::Socket::SELECT_ERROR))
        continue;
      std::lock_guard lock(c.mu);
      try {
        n = c.ws.receiveFrame(buf.data(), static_cast<int>(buf.size()), flags);
      } catch (const Poco::TimeoutException&) {
        continue;
      } catch (const Poco::Exception&) {
        break;
      }
    }
    int op = flags & WebSocket::FRAME_OP_BITMASK;
    if ((n == 0 && flags == 0) || op == WebSocket::FRAME_OP_CLOSE) break;
    if (op == WebSocket::FRAME_OP_PING) {
      c.send(
          std::string(buf.data(), static_cast<std::size_t>(n)),
          static_cast<int>(WebSocket::FRAME_FLAG_FIN) | static_cast<int>(WebSocket::FRAME_OP_PONG));
    } else if (op == WebSocket::FRAME_OP_TEXT) {
      control_message(c, entry, watch, std::string(buf.data(), static_cast<std::size_t>(n)));
    } else if (op == WebSocket::FRAME_OP_BINARY || op == WebSocket::FRAME_OP_CONT) {
      if (watch) {
        c.send_error("read-only watcher: input refused");
      } else {
        type(std::string_view(buf.data(), static_cast<std::size_t>(n)));
      }
    }
  }
}

}  // namespace

// "bearer.<token>" among the offered WebSocket subprotocols (browsers cannot set headers on a
// WebSocket): the Authorization header it stands for, or "".
std::string websocket_bearer(const Poco::Net::HTTPServerRequest& request) {
  std::string protocols = request.get("Sec-WebSocket-Protocol", "");
  std::size_t start = 0;
  while (start < protocols.size()) {
    std::size_t end = protocols.find(',', start);
    if (end == std::string::npos) end = protocols.size();
    std::string p = protocols.substr(start, end - start);
    p.erase(0, p.find_first_not_of(' '));
    p.erase(p.find_last_not_of(' ') + 1);
    if (p.rfind("bearer.", 0) == 0) return "Bearer " + p.substr(7);
    start = end + 1;
  }
  return "";
}

void TerminalRoutes::websocket(RequestContext& ctx) {
  const std::string mode = ctx.query_value("mode");
  if (!mode.empty() && mode != "watch" && mode != "interactive") {
    throw bad_request("mode: \"watch\" (read-only) or \"interactive\" (the default)");
  }
  const bool watch = mode == "watch";
  auto entry = find_terminal(ctx);
  ctx.params_json =
      "{\"terminal\":\"" + entry->id + "\",\"mode\":\"" + (watch ? "watch" : "interactive") + "\"}";
  if (Poco::icompare(ctx.request->get("Upgrade", ""), "websocket") != 0) {
    throw bad_request("this endpoint speaks WebSocket only (Upgrade: websocket)");
  }
  PolicyRequest attach;  // terminal.attach: an operator may say "no terminals" here too
  attach.action = PolicyAction::kTerminalAttach;
  attach.text = watch ? "watch" : "interactive";
  if (!d_.gate.admit(ctx, attach)) return;
  // Cross-site WebSocket hijacking: a browser's Origin must be this server's own (the console),
  // loopback or listed in mcp.allowed_origins, as for /mcp.
  const std::string origin = ctx.request->get("Origin", "");
  const std::string host = ctx.request->get("Host", "");
  if (!mcp::origin_allowed(origin, d_.config.mcp.allowed_origins) && origin != "http://" + host &&
      origin != "https://" + host)
    throw from_error(
        Error{ErrorCode::kPermissionDenied, "Origin " + origin.substr(0, 100) +
                                                " is not allowed (this server's own, loopback or "
                                                "mcp.allowed_origins)"});
  // The first offered subprotocol that is not "bearer.<token>" (a token never goes back in the
  // reply, where logs and proxies would keep it); none: no Sec-WebSocket-Protocol.
  std::string protocols = ctx.request->get("Sec-WebSocket-Protocol", "");
  for (std::size_t start = 0; start < protocols.size();) {
    std::size_t end = std::min(protocols.find(',', start), protocols.size());
    std::string p = Poco::trim(protocols.substr(start, end - start));
    if (!p.empty() && p.rfind("bearer.", 0) != 0) {
      ctx.response->set("Sec-WebSocket-Protocol", p);
      break;
    }
    start = end + 1;
  }
  // A place among the WebSocket caps before anything is switched: beyond them, a plain 429.
  std::string why;
  auto ticket = ws_sessions_.reserve(ctx.principal->name, &why);
  if (!ticket) {
    ctx.response->set("Retry-After", "1");
    throw limit_exceeded(why);
  }
  auto watcher = entry->terminal->watch(d_.config.terminal_watcher_buffer_bytes);
  d_.replies.audit(ctx, 101, nullptr);
  ctx.responded = true;
  ctx.status = 101;
  std::shared_ptr<WsConnection> conn;
  try {
    conn = std::make_shared<WsConnection>(WebSocket(*ctx.request, *ctx.response));
  } catch (const Poco::Exception& e) {
    watcher->cancel();
    log::warn("request " + ctx.request_id + ": WebSocket handshake failed: " + e.displayText());
    return;
  }
  conn->ws.setSendTimeout(Poco::Timespan(10, 0));
  conn->ws.setReceiveTimeout(Poco::Timespan(10, 0));
  // The socket is the WebSocket's now (detached from the HTTP session): the session runs on a
  // thread of its own and this worker goes back to the pool.
  AuditRecord refusal{};  // a line the policy refused, audited as terminal.input
  refusal.request_id = ctx.request_id;
  refusal.token = ctx.principal->name;
  refusal.remote = ctx.request->clientAddress().host().toString();
  refusal.action = "terminal.input";
  refusal.sandbox = entry->sandbox;
  refusal.params_json = "{\"terminal\":\"" + entry->id + "\",\"via\":\"websocket\"}";
  ws_sessions_.start(
      std::move(*ticket),
      [this, conn, watcher, entry, watch, who = *ctx.principal, refusal]() {
        ws_session(*conn, *watcher, *entry, watch, who, refusal);
      },
      [conn, watcher] {
        watcher->cancel();
        conn->close(WebSocket::WS_ENDPOINT_GOING_AWAY, "the controller is stopping");
      });
}

// One WebSocket's life, on its own thread (WsSessions): a writer thread sends output while
// this one reads input, control messages and the client's close.
void TerminalRoutes::ws_session(WsConnection& conn, TerminalWatcher& watcher, TerminalEntry& entry,
                                bool watch, const Principal& who, AuditRecord refusal) {
  entry.readers.fetch_add(1);
  if (!watch && entry.interactive.fetch_add(1) == 0) entry.terminal->set_answer_queries(false);
  std::thread writer([&] { write_loop(conn, watcher); });
  auto type = [&](std::string_view bytes) {
    try {
      auto a = type_into(
          who, entry, bytes, [&] { return entry.terminal->write(bytes); }, "", false);
      if (!a.pending) return;
      {
        std::lock_guard lock(entry.input_mu);
        entry.typed.clear();
      }
      (void)entry.terminal->write("\x15");
      conn.send_error("approval " + a.pending->id + " is pending: a person must approve " +
                      a.pending->request.summary + "; type the line again once it is approved");
      refusal.policy_json = a.policy_json;
      refusal.status = 202;
    } catch (const PolicyRefusal& r) {
      conn.send_error(r.error.message);
      refusal.policy_json = r.policy_json;
      refusal.status = r.error.status;
      refusal.error_code = r.error.code;
      refusal.error_message = r.error.message;
    } catch (const ApiError& e) {
      conn.send_error(e.message);
      return;
    }
    d_.audit(refusal);
  };
  try {
    read_loop(conn, entry, watch, type);
  } catch (const std::exception& e) {  // Poco::Exception is one too
    log::warn("request " + refusal.request_id + ": terminal WebSocket: " + e.what());
  }
  watcher.cancel();
  if (!conn.done) conn.close(WebSocket::WS_NORMAL_CLOSE, "closed by the client");
  writer.join();
  if (!watch && entry.interactive.fetch_sub(1) == 1) entry.terminal->set_answer_queries(true);
  entry.readers.fetch_sub(1);
}

void TerminalRoutes::stop_websockets() {
  ws_sessions_.stop();
}

}  // namespace pvs::service
