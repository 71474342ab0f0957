// Terminals in a sandbox (pvs::Terminal): open, list, show, resize, close, input, screen, wait.
// The WebSocket of a terminal is in routes_terminal_ws.cc.
#include <Poco/String.h>

#include "api/terminals/terminal_requests.h"
#include "http/json.h"
#include "http/server.h"

namespace pvs::service {

std::shared_ptr<TerminalEntry> Api::find_terminal(RequestContext& ctx) {
  find_sandbox(ctx);  // 400 for a malformed id
  return terminal_for(*ctx.principal, ctx.sandbox, ctx.params.at("tid"));
}

void Api::terminal_create(RequestContext& ctx) {
  auto req = parse_terminal_create(json_body(ctx));
  if (!req) throw req.error();
  {
    JsonWriter p;  // env values may hold secrets: only the names
    p.begin_object().key("command").value(req->command.substr(0, 4096));
    p.key("cols").value(req->cols).key("rows").value(req->rows).key("cwd").value(req->cwd);
    p.key("env_names").begin_array();
    for (const auto& [k, v] : req->env) p.value(k);
    ctx.params_json = p.end_array().end_object().take();
  }
  auto sandbox = find_sandbox(ctx);
  auto [asked, decision] = judge_terminal_open(*ctx.principal, *req);
  PolicyGate::Admission a;
  try {
    a = gate_.admission(*ctx.principal, sandbox->id(), asked, decision,
                        ctx.request->get("Approval", ""),
                        Poco::icompare(ctx.request->get("Prefer", ""), "respond-async") == 0);
  } catch (const PolicyRefusal& refused) {
    ctx.policy_json = refused.policy_json;
    throw refused.error;
  }
  ctx.policy_json = a.policy_json;
  if (a.pending) return gate_.send_pending(ctx, *a.pending);
  std::shared_ptr<TerminalEntry> entry;
  try {
    entry = open_terminal(*ctx.principal, *sandbox, *req);
  } catch (const ApiError& e) {
    if (e.status == 429) ctx.response->set("Retry-After", "1");
    throw;
  }
  ctx.params_json.insert(1, "\"terminal\":\"" + entry->id + "\",");
  ctx.response->set("Location", ctx.path + "/" + entry->id);
  send_json(ctx, 201, terminal_json(*entry));
}

void Api::terminal_list(RequestContext& ctx) {
  auto sandbox = find_sandbox(ctx);
  std::string out = "{\"terminals\":[";
  bool first = true;
  for (const auto& e : terminals_->list(sandbox->id())) {
    if (!first) out += ",";
    first = false;
    out += terminal_json(*e);
  }
  send_json(ctx, 200, out + "]}");
}

void Api::terminal_show(RequestContext& ctx) {
  send_json(ctx, 200, terminal_json(*find_terminal(ctx)));
}

void Api::terminal_delete(RequestContext& ctx) {
  auto entry = find_terminal(ctx);
  ctx.params_json = "{\"terminal\":\"" + entry->id + "\"}";
  terminals_->close(entry->sandbox, entry->id);
  send_empty(ctx, 204);
}

void Api::terminal_resize(RequestContext& ctx) {
  auto size = parse_terminal_resize(json_body(ctx));
  if (!size) throw size.error();
  auto entry = find_terminal(ctx);
  ctx.params_json = "{\"terminal\":\"" + entry->id + "\",\"cols\":" + std::to_string(size->first) +
                    ",\"rows\":" + std::to_string(size->second) + "}";
  if (auto st = entry->terminal->resize(size->first, size->second); !st) {
    throw st.error().code == ErrorCode::kInvalidArgument ? from_error(st.error())
                                                         : conflict_ended(*entry);
  }
  send_json(ctx, 200, terminal_json(*entry));
}

ApiError Api::conflict_ended(const TerminalEntry& entry) {
  return from_error(Error{ErrorCode::kConflict,
                          "terminal " + entry.id + " has ended; its screen can still be read"});
}

void Api::terminal_input(RequestContext& ctx) {
  auto body = read_body(ctx, config_.terminal_max_input_bytes * 8 + 4096);
  auto items = parse_terminal_input(body, config_.terminal_max_input_bytes);
  auto entry = find_terminal(ctx);
  JsonWriter p;
  p.begin_object().key("terminal").value(entry->id);
  if (items) {
    std::uint64_t bytes = 0;
    for (const auto& i : *items) bytes += i.value.size();
    p.key("items").value(static_cast<std::uint64_t>(items->size())).key("bytes").value(bytes);
    if (config_.audit_log_terminal_input) {  // forensics: what was typed, as sent
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
  Admission a;
  try {
    a = type_into(
        *ctx.principal, *entry, typed, [&] { return entry->terminal->send(*items); },
        ctx.request->get("Approval", ""),
        Poco::icompare(ctx.request->get("Prefer", ""), "respond-async") == 0);
  } catch (const PolicyRefusal& refused) {
    ctx.policy_json = refused.policy_json;
    throw refused.error;
  }
  ctx.policy_json = a.policy_json;
  if (a.pending) return gate_.send_pending(ctx, *a.pending);
  send_json(ctx, 200, terminal_json(*entry));
}

void Api::terminal_screen(RequestContext& ctx) {
  auto lines = parse_scrollback(ctx.query_value("scrollback"));
  if (!lines) throw lines.error();
  auto entry = find_terminal(ctx);
  send_json(ctx, 200, screen_json(entry->terminal->screen(static_cast<std::size_t>(*lines))));
}

void Api::terminal_wait(RequestContext& ctx) {
  auto req = parse_terminal_wait(json_body(ctx), config_.terminal_max_wait_seconds);
  if (!req) throw req.error();
  auto entry = find_terminal(ctx);
  send_json(ctx, 200, wait_terminal(*entry, *req));
}

}  // namespace pvs::service
