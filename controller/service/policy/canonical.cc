#include "policy/canonical.h"

#include <sstream>

#include <Poco/Base64Decoder.h>

#include "http/json.h"

namespace pvs::service {
namespace {

void write_egress(JsonWriter& w, const Egress& e) {
  w.begin_object().key("allow").begin_array();
  for (const auto& n : e.list.names) w.value(n);
  w.end_array().key("list").value(e.list_name).key("mode").value(to_string(e.mode));
  w.key("ports").begin_array();
  if (e.allowlist()) {
    for (auto p : e.list.ports) w.value(static_cast<int>(p));
  }
  w.end_array().end_object();
}

}  // namespace

std::string canonical_exec(const ExecRequest& r) {
  JsonWriter w;
  w.begin_object().key("command").value(r.command).key("cwd").value(r.cwd);
  w.key("env").begin_array();
  for (const auto& [k, v] : r.env) w.begin_array().value(k).value(v).end_array();
  w.end_array().key("stdin").value(r.stdin_data).key("timeout_seconds").value(r.timeout_seconds);
  return w.end_object().take();
}

std::string canonical_egress(const Egress& e) {
  JsonWriter w;
  write_egress(w, e);
  return w.take();
}

std::string canonical_create(const CreateRequest& r, const Egress& egress) {
  JsonWriter w;
  w.begin_object().key("cpus").value(r.cpus).key("disk_gb").value(r.disk_gb);
  w.key("hostname").value(r.hostname).key("internet");
  write_egress(w, egress);
  w.key("labels").value(r.labels).key("memory_mb").value(r.memory_mb);
  w.key("node").value(r.node).key("node_selector").value(r.node_selector);
  w.key("profile").value(r.profile);
  if (!r.template_name.empty()) w.key("template").value(r.template_name);  // older forms kept
  w.key("ttl_seconds").value(r.ttl_seconds);
  if (!r.volumes.empty()) {  // what an approval of a create binds: its mounts too
    w.key("volumes").begin_array();
    for (const auto& v : r.volumes)
      w.begin_object()
          .key("path")
          .value(v.path)
          .key("read_only")
          .value(v.read_only)
          .key("volume")
          .value(v.volume)
          .end_object();
    w.end_array();
  }
  if (r.pause_on_expiry) w.key("on_expiry").value("pause").key("auto_resume").value(r.auto_resume);
  return w.end_object().take();
}

std::string canonical_internet(const Egress& e) {
  JsonWriter w;
  w.begin_object().key("internet");
  write_egress(w, e);
  return w.end_object().take();
}

std::string canonical_write(const std::string& path, std::uint32_t mode,
                            const std::string& content_sha256) {
  char m[8];
  std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(mode));
  JsonWriter w;
  w.begin_object().key("content_sha256").value(content_sha256).key("mode").value(m);
  return w.key("path").value(path).end_object().take();
}

std::string canonical_edit(const EditRequest& r) {
  JsonWriter w;
  w.begin_object().key("new_string").value(r.spec.new_string);
  w.key("old_string").value(r.spec.old_string).key("path").value(r.path);
  return w.key("replace_all").value(r.spec.replace_all).end_object().take();
}

std::string canonical_terminal_open(const TerminalCreateRequest& r) {
  JsonWriter w;
  w.begin_object().key("cols").value(r.cols).key("command").value(r.command);
  w.key("cwd").value(r.cwd).key("env").begin_array();
  for (const auto& [k, v] : r.env) w.begin_array().value(k).value(v).end_array();
  return w.end_array().key("rows").value(r.rows).end_object().take();
}

std::string canonical_fork(const CreateRequest& r, const Egress& egress, const std::string& source,
                           int count) {
  JsonWriter w;
  w.begin_object().key("count").value(count).key("create").raw(canonical_create(r, egress));
  return w.key("fork_of").value(source).end_object().take();
}

std::string canonical_e2b_create(const CreateRequest& r, const Egress& egress,
                                 const std::string& template_id,
                                 const std::map<std::string, std::string>& env_vars) {
  JsonWriter w;
  w.begin_object().key("create").raw(canonical_create(r, egress)).key("env_vars").begin_array();
  for (const auto& [k, v] : env_vars) w.begin_array().value(k).value(v).end_array();
  return w.end_array().key("template_id").value(template_id).end_object().take();
}

std::string canonical_move(const std::string& source, const std::string& destination,
                           const FileIdentity& landing) {
  char m[8];
  std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(landing.mode & 07777));
  JsonWriter w;
  w.begin_object().key("destination").value(destination).key("source").value(source);
  w.key("source_file").begin_object().key("content_sha256").value(landing.content_sha256);
  w.key("kind").value(landing.kind).key("mode").value(m).key("mtime").value(landing.mtime);
  w.key("size").value(landing.size).end_object();
  return w.end_object().take();
}

std::string cut_for_display(std::string_view text, std::size_t max) {
  if (text.size() <= max) return std::string(text);
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;  // a continuation
  return std::string(text.substr(0, n)) + "…(cut, " + std::to_string(text.size() - n) +
         " bytes more)";
}

std::optional<std::string> content_digest_sha256(std::string_view header) {
  // A dictionary: members separated by commas, each `key=:base64:`.
  while (!header.empty()) {
    auto comma = header.find(',');
    std::string_view member = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!member.empty() && (member.front() == ' ' || member.front() == '\t'))
      member.remove_prefix(1);
    while (!member.empty() && (member.back() == ' ' || member.back() == '\t'))
      member.remove_suffix(1);
    if (!member.starts_with("sha-256=:") || member.size() < 11 || member.back() != ':') continue;
    std::string b64(member.substr(9, member.size() - 10));
    if (b64.size() != 44) return std::nullopt;  // 32 bytes
    std::istringstream in(b64);
    Poco::Base64Decoder dec(in);
    std::string raw;
    try {
      raw.assign(std::istreambuf_iterator<char>(dec), std::istreambuf_iterator<char>());
    } catch (...) {
      return std::nullopt;
    }
    if (raw.size() != 32) return std::nullopt;
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned char c : raw) {
      hex += kHex[c >> 4];
      hex += kHex[c & 15];
    }
    return hex;
  }
  return std::nullopt;
}

}  // namespace pvs::service
