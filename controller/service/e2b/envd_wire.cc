#include "e2b/envd_wire.h"

#include <algorithm>

#include "core/observability/audit.h"
#include "e2b/base64.h"
#include "e2b/proto_json.h"
#include "http/json.h"
#include "pvesandbox/ssh_session.h"

namespace pvs::service::e2b {

using ssh_detail::shell_quote;  // pvesandbox/ssh_session.h
namespace {

using Object = ProtoReader::Object;

template <typename T>
Parsed<T> done(const ProtoReader& r, T value) {
  if (!r.ok()) return {std::nullopt, r.error()};
  return {std::move(value), std::nullopt};
}

template <typename T>
Parsed<T> failed(const ProtoReader& r) {
  return {std::nullopt, r.error()};
}

std::optional<PtySize> read_pty(ProtoReader& r, const Object& in, const std::string& where) {
  auto pty = r.object(in, where, "pty");
  if (!pty) return std::nullopt;
  PtySize out;
  if (auto size = r.object(*pty, where + "pty.", "size")) {
    out.cols = r.uint32(*size, where + "pty.size.", "cols").value_or(0);
    out.rows = r.uint32(*size, where + "pty.size.", "rows").value_or(0);
  }
  if (r.ok() && (out.cols == 0 || out.rows == 0 || out.cols > 1000 || out.rows > 1000))
    r.fail(where + "pty.size", "cols and rows must be in [1, 1000]");
  return out;
}

Selector read_selector(ProtoReader& r, const Object& root) {
  Selector s;
  auto process = r.object(root, "", "process");
  if (!process) {
    r.fail("process", "required (a selector: pid or tag)");
    return s;
  }
  s.pid = r.uint32(*process, "process.", "pid");
  s.tag = r.string(*process, "process.", "tag", 256);
  if (r.ok() && s.pid.has_value() == s.tag.has_value()) r.fail("process", "give pid or tag");
  return s;
}

ProcessConfig read_config(ProtoReader& r, const Object& root) {
  ProcessConfig c;
  auto process = r.object(root, "", "process");
  if (!process) {
    r.fail("process", "required");
    return c;
  }
  c.cmd = r.string(*process, "process.", "cmd", kMaxEnvdPath).value_or("");
  if (r.ok() && c.cmd.empty()) r.fail("process.cmd", "required");
  c.args = r.strings(*process, "process.", "args", kMaxArgs, 64 << 10)
               .value_or(std::vector<std::string>{});
  auto envs = r.string_map(*process, "process.", "envs", kMaxEnvs, 8 << 10);
  if (envs) c.envs.assign(envs->begin(), envs->end());
  c.cwd = r.string(*process, "process.", "cwd", kMaxEnvdPath);
  if (c.cwd && c.cwd->empty()) c.cwd.reset();
  return c;
}

void write_config(JsonWriter& w, const ProcessConfig& c) {
  w.begin_object().key("cmd").value(c.cmd).key("args").begin_array();
  for (const auto& a : c.args) w.value(a);
  w.end_array().key("envs").begin_object();
  for (const auto& [k, v] : c.envs) w.key(k).value(v);
  w.end_object();
  if (c.cwd) w.key("cwd").value(*c.cwd);
  w.end_object();
}

std::string_view kind_name(FileKind k) {
  switch (k) {
    case FileKind::kFile: return "FILE_TYPE_FILE";
    case FileKind::kDirectory: return "FILE_TYPE_DIRECTORY";
    case FileKind::kSymlink: return "FILE_TYPE_SYMLINK";
    case FileKind::kUnspecified: break;
  }
  return "FILE_TYPE_UNSPECIFIED";
}

void write_entry(JsonWriter& w, const Entry& e) {
  w.begin_object()
      .key("name")
      .value(e.name)
      .key("type")
      .value(kind_name(e.kind))
      .key("path")
      .value(e.path)
      .key("size")
      .value(std::to_string(e.size))
      .key("mode")
      .value(static_cast<std::int64_t>(e.mode))
      .key("permissions")
      .value(permissions_string(e.kind, e.mode))
      .key("owner")
      .value(e.owner)
      .key("group")
      .value(e.group)
      .key("modifiedTime")
      .value(format_rfc3339_ms(e.mtime * 1000));
  if (e.symlink_target) w.key("symlinkTarget").value(*e.symlink_target);
  w.end_object();
}

std::string event(const std::string& inner_json) {
  return "{\"event\":" + inner_json + "}";
}

}  // namespace

Parsed<StartRequest> parse_start(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<StartRequest>(r);
  StartRequest s;
  s.process = read_config(r, r.root());
  s.pty = read_pty(r, r.root(), "");
  s.tag = r.string(r.root(), "", "tag", 256);
  s.stdin_open = r.boolean(r.root(), "", "stdin");
  return done(r, std::move(s));
}

Parsed<Selector> parse_selector_request(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<Selector>(r);
  Selector s = read_selector(r, r.root());
  return done(r, std::move(s));
}

Parsed<InputRequest> parse_send_input(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<InputRequest>(r);
  InputRequest in;
  in.process = read_selector(r, r.root());
  auto input = r.object(r.root(), "", "input");
  if (!input) {
    r.fail("input", "required (stdin or pty)");
    return failed<InputRequest>(r);
  }
  auto out = r.bytes(*input, "input.", "stdin", kMaxInputBytes);
  auto pty = r.bytes(*input, "input.", "pty", kMaxInputBytes);
  if (r.ok() && out.has_value() == pty.has_value()) r.fail("input", "give stdin or pty");
  in.pty = pty.has_value();
  in.data = pty ? *pty : out.value_or("");
  return done(r, std::move(in));
}

Parsed<SignalRequest> parse_send_signal(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<SignalRequest>(r);
  SignalRequest s;
  s.process = read_selector(r, r.root());
  auto sig =
      r.enumeration(r.root(), "", "signal",
                    {{"SIGNAL_UNSPECIFIED", 0}, {"SIGNAL_SIGTERM", 15}, {"SIGNAL_SIGKILL", 9}});
  if (r.ok() && sig.value_or(0) == 0)
    r.fail("signal", "required: SIGNAL_SIGTERM or SIGNAL_SIGKILL");
  s.signal = sig.value_or(0);
  return done(r, std::move(s));
}

Parsed<UpdateRequest> parse_update(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<UpdateRequest>(r);
  UpdateRequest u;
  u.process = read_selector(r, r.root());
  u.pty = read_pty(r, r.root(), "");
  return done(r, std::move(u));
}

Parsed<std::string> parse_path_request(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<std::string>(r);
  auto path = r.string(r.root(), "", "path", kMaxEnvdPath);
  if (r.ok() && (!path || path->empty())) r.fail("path", "required");
  return done(r, path.value_or(""));
}

Parsed<ListDirRequest> parse_list_dir(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<ListDirRequest>(r);
  ListDirRequest l;
  l.path = r.string(r.root(), "", "path", kMaxEnvdPath).value_or("");
  l.depth = r.uint32(r.root(), "", "depth").value_or(0);
  if (r.ok() && l.path.empty()) r.fail("path", "required");
  return done(r, std::move(l));
}

Parsed<MoveRequest> parse_move(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<MoveRequest>(r);
  MoveRequest m;
  m.source = r.string(r.root(), "", "source", kMaxEnvdPath).value_or("");
  m.destination = r.string(r.root(), "", "destination", kMaxEnvdPath).value_or("");
  if (r.ok() && (m.source.empty() || m.destination.empty()))
    r.fail(m.source.empty() ? "source" : "destination", "required");
  return done(r, std::move(m));
}

Parsed<WatchDirRequest> parse_watch_dir(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<WatchDirRequest>(r);
  WatchDirRequest w;
  w.path = r.string(r.root(), "", "path", kMaxEnvdPath).value_or("");
  w.recursive = r.boolean(r.root(), "", "recursive").value_or(false);
  w.include_entry = r.boolean(r.root(), "", "includeEntry", "include_entry").value_or(false);
  w.allow_network_mounts =
      r.boolean(r.root(), "", "allowNetworkMounts", "allow_network_mounts").value_or(false);
  if (r.ok() && w.path.empty()) r.fail("path", "required");
  return done(r, std::move(w));
}

std::string start_event(std::uint32_t pid) {
  return event("{\"start\":{\"pid\":" + std::to_string(pid) + "}}");
}

std::string data_event(Stream stream, std::string_view bytes) {
  const char* name = stream == Stream::kStdout   ? "stdout"
                     : stream == Stream::kStderr ? "stderr"
                                                 : "pty";
  return event("{\"data\":{\"" + std::string(name) + "\":\"" + base64_encode(bytes) + "\"}}");
}

std::string end_event(const EndInfo& end) {
  JsonWriter w;
  w.begin_object()
      .key("end")
      .begin_object()
      .key("exitCode")
      .value(end.exit_code)
      .key("exited")
      .value(end.exited)
      .key("status")
      .value(end.status);
  if (end.error) w.key("error").value(*end.error);
  w.end_object().end_object();
  return event(w.str());
}

namespace {
// A FilesystemEvent message, {"name", "type"}, into `w`.
void write_watch_event(JsonWriter& w, WatchEventType type, std::string_view name) {
  static constexpr const char* kEventTypes[] = {"EVENT_TYPE_UNSPECIFIED", "EVENT_TYPE_CREATE",
                                                "EVENT_TYPE_WRITE",       "EVENT_TYPE_REMOVE",
                                                "EVENT_TYPE_RENAME",      "EVENT_TYPE_CHMOD"};
  w.begin_object()
      .key("name")
      .value(std::string(name))
      .key("type")
      .value(kEventTypes[static_cast<int>(type)])
      .end_object();
}
}  // namespace

std::string watch_event(WatchEventType type, std::string_view name) {
  JsonWriter w;
  w.begin_object().key("filesystem");
  write_watch_event(w, type, name);
  w.end_object();
  return w.str();
}

Parsed<std::string> parse_watcher_id(std::string_view json) {
  ProtoReader r(json);
  if (!r.ok()) return failed<std::string>(r);
  std::string id = r.string(r.root(), "", "watcherId", kMaxWatcherId, "watcher_id").value_or("");
  if (r.ok() && id.empty()) r.fail("watcherId", "required");
  return done(r, std::move(id));
}

std::string watcher_created_reply(std::string_view watcher_id) {
  JsonWriter w;
  w.begin_object().key("watcherId").value(std::string(watcher_id)).end_object();
  return w.str();
}

std::string watcher_events_reply(const std::vector<WatchEvent>& events) {
  JsonWriter w;
  w.begin_object().key("events").begin_array();
  for (const auto& e : events) write_watch_event(w, e.type, e.name);
  w.end_array().end_object();
  return w.str();
}

std::string watch_keepalive_event() {
  return "{\"keepalive\":{}}";
}

std::string keepalive_event() {
  return event("{\"keepalive\":{}}");
}

EndInfo end_for_exit(int exit_code) {
  EndInfo e;
  e.exit_code = exit_code;
  e.exited = true;
  e.status = "exit status " + std::to_string(exit_code);
  if (exit_code != 0) e.error = e.status;  // Go's cmd.Wait() error text
  return e;
}

EndInfo end_for_signal(std::string_view signal_name) {
  static const std::pair<std::string_view, std::string_view> kText[] = {
      {"KILL", "killed"},  {"TERM", "terminated"},  {"INT", "interrupt"},
      {"HUP", "hangup"},   {"PIPE", "broken pipe"}, {"SEGV", "segmentation fault"},
      {"ABRT", "aborted"}, {"QUIT", "quit"}};
  std::string text = "signal " + std::string(signal_name);
  for (const auto& [name, t] : kText)
    if (name == signal_name) text = std::string(t);
  EndInfo e;
  e.exit_code = -1;
  e.exited = false;
  e.status = "signal: " + text;
  e.error = e.status;
  return e;
}

std::string list_reply(const std::vector<ProcessInfo>& processes) {
  JsonWriter w;
  w.begin_object().key("processes").begin_array();
  for (const auto& p : processes) {
    w.begin_object().key("config");
    write_config(w, p.config);
    w.key("pid").value(static_cast<std::int64_t>(p.pid));
    if (p.tag) w.key("tag").value(*p.tag);
    w.end_object();
  }
  w.end_array().end_object();
  return w.take();
}

std::string permissions_string(FileKind kind, std::uint32_t mode) {
  std::string out;
  out.push_back(kind == FileKind::kDirectory ? 'd' : kind == FileKind::kSymlink ? 'L' : '-');
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) out.push_back((mode >> (8 - i)) & 1 ? rwx[i] : '-');
  return out;
}

std::string entry_reply(const Entry& entry) {
  JsonWriter w;
  w.begin_object().key("entry");
  write_entry(w, entry);
  w.end_object();
  return w.take();
}

std::string entries_reply(const std::vector<Entry>& entries) {
  JsonWriter w;
  w.begin_object().key("entries").begin_array();
  for (const auto& e : entries) write_entry(w, e);
  w.end_array().end_object();
  return w.take();
}

std::string watch_start_event() {
  return "{\"start\":{}}";
}

std::string shell_line(const ProcessConfig& process) {
  std::string line = shell_quote(process.cmd);
  for (const auto& a : process.args) line += " " + shell_quote(a);
  return line;
}

std::string policy_text(const ProcessConfig& p) {
  static const std::string_view kShells[] = {"/bin/bash", "bash", "/bin/sh", "sh", "/usr/bin/bash"};
  bool shell = std::find(std::begin(kShells), std::end(kShells), p.cmd) != std::end(kShells);
  const auto& a = p.args;
  if (shell && a.size() == 3 && a[0] == "-l" && a[1] == "-c") return a[2];
  if (shell && a.size() == 2 && a[0] == "-c") return a[1];
  return shell_line(p);
}

std::string canonical_start(const StartRequest& req,
                            const std::map<std::string, std::string>& default_env) {
  JsonWriter w;
  w.begin_object().key("args").begin_array();
  for (const auto& a : req.process.args) w.value(a);
  w.end_array().key("cmd").value(req.process.cmd).key("cwd");
  if (req.process.cwd)
    w.value(*req.process.cwd);
  else
    w.null();
  w.key("default_envs").begin_array();
  for (const auto& [k, v] : default_env) w.begin_array().value(k).value(v).end_array();
  w.end_array().key("envs").begin_array();
  for (const auto& [k, v] : req.process.envs) w.begin_array().value(k).value(v).end_array();
  w.end_array().key("pty");
  if (req.pty) {
    w.begin_object().key("cols").value(static_cast<std::uint64_t>(req.pty->cols));
    w.key("rows").value(static_cast<std::uint64_t>(req.pty->rows)).end_object();
  } else {
    w.null();
  }
  w.key("stdin").value(req.stdin_open.value_or(true));
  return w.end_object().take();
}

}  // namespace pvs::service::e2b
