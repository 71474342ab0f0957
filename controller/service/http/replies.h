// How a handler answers a request. The pipeline (Api, app/api.cc) implements it: each reply
// of a mutating call is audited before it leaves, an unread request body is settled, metrics
// count the status. Handler classes receive a Replies& instead of the whole Api.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "core/observability/audit.h"
#include "http/request_context.h"

namespace pvs::service {

class Replies {
 public:
  virtual ~Replies() = default;
  virtual void send_json(RequestContext& ctx, int status, const std::string& body) = 0;
  // Audits (mutating calls), settles an unread request body, then sends `body` whole.
  virtual void send_bytes(RequestContext& ctx, int status, const std::string& content_type,
                          std::string_view body) = 0;
  virtual void send_error(RequestContext& ctx, const ApiError& error) = 0;
  virtual void send_empty(RequestContext& ctx, int status) = 0;
  // Audits the reply and sets its status line and headers; the caller sends the body.
  virtual void begin_reply(RequestContext& ctx, int status, const std::string& content_type) = 0;
  // Ends a reply whose body broke off: resets the connection.
  virtual void abort_reply(RequestContext& ctx) = 0;
  // The request body, at most `limit` bytes (throws ApiError 413 beyond, 400 when cut short).
  virtual std::string read_body(RequestContext& ctx, std::uint64_t limit) = 0;
  // An application/json body of at most max_body_bytes; "" when there is none.
  virtual std::string json_body(RequestContext& ctx) = 0;
  // The audit record of a mutating call (ctx.action) now, for what is not one of the replies
  // above: a command's start, the end of a stream, a WebSocket's upgrade.
  virtual void audit(RequestContext& ctx, int status, const ApiError* error) = 0;
};

// The audit record of `ctx` as it stands, with `status`: its request id, token name, remote
// address, action, sandbox, params, the policy's decision and the time since it began (the
// record Replies::audit writes; an upgraded connection's is written when it ends, app/api.cc).
AuditRecord audit_record(const RequestContext& ctx, int status);

// Reads a small unread request body now; marks a large or chunked one for a drain after the
// reply (app/api.cc).
void settle_body(RequestContext& ctx);

// Starts a 200 application/x-ndjson reply in chunks (a streaming exec, a template build): the
// body settled and the status recorded on `ctx`; the stream the lines go to.
std::ostream& start_ndjson(RequestContext& ctx);
// One line on it, flushed; nothing once the client went away.
void emit_line(std::ostream& out, const std::string& line);

}  // namespace pvs::service
