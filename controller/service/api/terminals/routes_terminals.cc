// Terminals in a sandbox (pvs::Terminal): open, list, show, resize, close, input, screen, wait.
// The WebSocket of a terminal is in routes_terminal_ws.cc.
#include "api/terminals/terminal_routes.h"
#include "http/json.h"
#include "http/terminal_requests.h"

namespace pvs::service {

std::shared_ptr<TerminalEntry> TerminalRoutes::find_terminal(RequestContext& ctx) {
  d_.sandboxes.find(ctx);  // 400 for a malformed id
  return terminal_for(*ctx.principal, ctx.sandbox, ctx.params.at("tid"));
}

void TerminalRoutes::create(RequestContext& ctx) {
  auto req = parse_terminal_create(d_.replies.json_body(ctx));
  if (!req) throw req.error();
  {
    JsonWriter p;  // env values may hold secrets: only the names
    p.begin_object().key("command").value(req->command.substr(0, 4096));
    p.key("cols").value(req->cols).key("rows").value(req->rows).key("cwd").value(req->cwd);
    p.key("env_names").begin_array();
    for (const auto& [k, v] : req->env) p.value(k);
    ctx.params_json = p.end_array().end_object().take();
  }
  auto sandbox = d_.sandboxes.find(ctx);
  // The request judged and the decision (not a structured binding: the lambda uses them).
  const std::pair<PolicyRequest, PolicyDecision> judged = judge_terminal_open(*ctx.principal, *req);
  if (!d_.gate.admit_with(ctx, [&](const std::string& approval_id, bool async) {
        return d_.gate.admission(*ctx.principal, sandbox->id(), judged.first, judged.second,
                                 approval_id, async);
      }))
    return;
  std::shared_ptr<TerminalEntry> entry;
  try {
    entry = open_terminal(*ctx.principal, *sandbox, *req);
  } catch (const ApiError& e) {
    if (e.status == 429) ctx.response->set("Retry-After", "1");
    throw;
  }
  ctx.params_json.insert(1, "\"terminal\":\"" + entry->id + "\",");
  ctx.response->set("Location", ctx.path + "/" + entry->id);
  d_.replies.send_json(ctx, 201, terminal_json(*entry));
}

void TerminalRoutes::list(RequestContext& ctx) {
  auto sandbox = d_.sandboxes.find(ctx);
  std::string out = "{\"terminals\":[";
  bool first = true;
  for (const auto& e : d_.terminals.list(sandbox->id())) {
    if (!first) out += ",";
    first = false;
    out += terminal_json(*e);
  }
  d_.replies.send_json(ctx, 200, out + "]}");
}

void TerminalRoutes::show(RequestContext& ctx) {
  d_.replies.send_json(ctx, 200, terminal_json(*find_terminal(ctx)));
}

void TerminalRoutes::close(RequestContext& ctx) {
  auto entry = find_terminal(ctx);
  ctx.params_json = "{\"terminal\":\"" + entry->id + "\"}";
  d_.terminals.close(entry->sandbox, entry->id);
  d_.replies.send_empty(ctx, 204);
}

void TerminalRoutes::resize(RequestContext& ctx) {
  auto size = parse_terminal_resize(d_.replies.json_body(ctx));
  if (!size) throw size.error();
  auto entry = find_terminal(ctx);
  ctx.params_json = "{\"terminal\":\"" + entry->id + "\",\"cols\":" + std::to_string(size->first) +
                    ",\"rows\":" + std::to_string(size->second) + "}";
  if (auto st = entry->terminal->resize(size->first, size->second); !st) {
    throw st.error().code == ErrorCode::kInvalidArgument ? from_error(st.error())
                                                         : conflict_ended(*entry);
  }
  d_.replies.send_json(ctx, 200, terminal_json(*entry));
}

ApiError TerminalRoutes::conflict_ended(const TerminalEntry& entry) {
  return from_error(Error{ErrorCode::kConflict,
                          "terminal " + entry.id + " has ended; its screen can still be read"});
}

void TerminalRoutes::input(RequestContext& ctx) {
  auto body = d_.replies.read_body(ctx, d_.config.terminal_max_input_bytes * 8 + 4096);
  auto items = parse_terminal_input(body, d_.config.terminal_max_input_bytes);
  auto entry = find_terminal(ctx);
  JsonWriter p;
  p.begin_object().key("terminal").value(entry->id);
  if (items) {
    std::uint64_t bytes = 0;
    for (const auto& i : *items) bytes += i.value.size();
    p.key("items").value(static_cast<std::uint64_t>(items->size())).key("bytes").value(bytes);
    if (d_.config.audit_log_terminal_input) {  // forensics: what was typed, as sent
      p.key("input").begin_array();
      for (const auto& i : *items) {
        p.begin_object().key(i.kind == InputItem::Kind::kKey ? "key" : "text").value(i.value);
        p.end_object();
      }
      p.end_array();
    }
  }
  ctx.params_json = p.end_object().take();
  if (!items) throw items.error();
  std::string typed;
  for (const auto& i : *items)
    typed += i.kind == InputItem::Kind::kKey ? *encode_key(i.value) : i.value;
  if (!d_.gate.admit_with(ctx, [&](const std::string& approval_id, bool async) {
        return type_into(
            *ctx.principal, *entry, typed, [&] { return entry->terminal->send(*items); },
            approval_id, async);
      }))
    return;
  d_.replies.send_json(ctx, 200, terminal_json(*entry));
}

void TerminalRoutes::screen(RequestContext& ctx) {
  auto lines = parse_scrollback(ctx.query_value("scrollback"));
  if (!lines) throw lines.error();
  auto entry = find_terminal(ctx);
  d_.replies.send_json(ctx, 200,
                       screen_json(entry->terminal->screen(static_cast<std::size_t>(*lines))));
}

void TerminalRoutes::wait(RequestContext& ctx) {
  auto req = parse_terminal_wait(d_.replies.json_body(ctx), d_.config.terminal_max_wait_seconds);
  if (!req) throw req.error();
  auto entry = find_terminal(ctx);
  d_.replies.send_json(ctx, 200, wait_terminal(*entry, *req));
}

}  // namespace pvs::service
