// E2B's volume content plane (docs/e2b.md "Volumes"): /volumecontent/{volumeID}/dir|path|file
// with the file path in ?path, authenticated by the volume token the control plane handed out
// (Authorization: Bearer, sealed {volume, owner}). The calls run as SFTP and small commands in
// the sandbox that mounts the volume (VolumeHelpers), inside the mount only: a path with ".."
// is 400 and one whose real path leaves the volume (a symbolic link) 403. Writes are judged by
// the policy as files.write at their real path, as every E2B write is. The root's lost+found
// (ext4's) is not listed. Errors are
// {"code": "<string>", "message"}: 404 is the SDK's VolumePathNotFoundError.
#include <sstream>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPServerRequest.h>

#include "core/observability/audit.h"
#include "e2b/e2b_routes.h"
#include "e2b/filesystem/fs_ops.h"
#include "e2b/volume_helpers.h"
#include "http/json.h"
#include "http/seal.h"
#include "policy/canonical.h"
#include "pvesandbox/ssh_session.h"

namespace pvs::service {
namespace {

using ssh_detail::shell_quote;

constexpr const char* kVolumeTokenPrefix = "vt1.";
constexpr std::size_t kMaxVolumeEntries = 10000;

// `path` in the volume ("/a/b", "a/b"; "" and "/" are its root) as a path under `root`.
std::string in_volume(const std::string& root, const std::string& path) {
  if (path.size() > 4096 || path.find('\0') != std::string::npos)
    throw bad_request("path: at most 4096 bytes, no NUL");
  std::string out = root;
  std::istringstream parts(path);
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty() || part == ".") continue;
    if (part == "..") throw bad_request("path: no \"..\" (paths are inside the volume)");
    out += "/" + part;
  }
  return out;
}

// The volume's path of `real` (under `root`): "/" and what follows the root.
std::string volume_path(const std::string& root, const std::string& real) {
  return real.size() > root.size() ? real.substr(root.size()) : "/";
}

std::string stat_json(const std::string& root, const std::string& real, const SftpAttributes& a) {
  const char* type = a.is_dir()       ? "directory"
                     : a.is_regular() ? "file"
                     : a.is_symlink() ? "symlink"
                                      : "unknown";
  const std::string path = volume_path(root, real);
  const std::string time = format_rfc3339_ms(a.mtime * 1000);  // SFTP v3 has mtime only
  JsonWriter w;
  w.begin_object().key("name").value(path == "/" ? "" : path.substr(path.rfind('/') + 1));
  w.key("path").value(path).key("type").value(type).key("size").value(a.size);
  w.key("mode").value(static_cast<std::int64_t>(a.mode & 07777));
  w.key("uid")
      .value(static_cast<std::int64_t>(a.uid))
      .key("gid")
      .value(static_cast<std::int64_t>(a.gid));
  w.key("atime").value(time).key("mtime").value(time).key("ctime").value(time);
  return w.end_object().take();
}

std::optional<std::uint32_t> query_number(RequestContext& ctx, const std::string& key,
                                          std::uint32_t max) {
  std::string v = ctx.query_value(key);
  if (v.empty()) return std::nullopt;
  if (v.size() > 10 || v.find_first_not_of("0123456789") != std::string::npos ||
      std::stoull(v) > max)
    throw bad_request(key + ": a number up to " + std::to_string(max));
  return static_cast<std::uint32_t>(std::stoull(v));
}

struct Ownership {
  std::optional<std::uint32_t> uid, gid, mode;
};

// chown/chmod of `real` as asked (nothing asked: nothing run).
void apply(Sandbox& sb, const std::string& real, const Ownership& o) {
  std::string cmd;
  if (o.uid || o.gid)
    cmd += "chown -h -- " + (o.uid ? std::to_string(*o.uid) : "") +
           (o.gid ? ":" + std::to_string(*o.gid) : "") + " " + shell_quote(real) + " && ";
  if (o.mode) {
    char m[8];
    std::snprintf(m, sizeof m, "%o", *o.mode & 07777);
    cmd += "chmod -- " + std::string(m) + " " + shell_quote(real) + " && ";
  }
  if (cmd.empty()) return;
  auto r = sb.exec(cmd + "true");
  if (!r) throw from_error(r.error());
  if (r->exit_code != 0) throw bad_request("chown/chmod: " + r->err.substr(0, 200));
}

}  // namespace

std::string E2bRoutes::volume_token(const VolumeInfo& v) {
  JsonWriter w;
  w.begin_object().key("v").value(v.id).key("o").value(v.owner);
  return seal(kVolumeTokenPrefix, w.end_object().take(), sessions_.volume_key());
}

void E2bRoutes::volume_content(RequestContext& ctx) {
  try {
    const std::string& id = ctx.params.at("id");
    std::string auth = ctx.request->get("Authorization", "");
    auto payload = auth.rfind("Bearer ", 0) == 0
                       ? unseal(kVolumeTokenPrefix, auth.substr(7), sessions_.volume_key())
                       : std::nullopt;
    if (!payload) throw unauthenticated("missing or unknown volume token (Authorization: Bearer)");
    auto o = Poco::JSON::Parser().parse(*payload).extract<Poco::JSON::Object::Ptr>();
    auto who = d_.tokens.find(o->getValue<std::string>("o"));
    if (!who || o->getValue<std::string>("v") != id)
      throw unauthenticated("the volume token is not this volume's");
    ctx.principal = *who;
    auto slot = take_slot(ctx, TokenLimits::Kind::kRequest);
    auto place = volume_helpers().open(*who, id);
    ctx.sandbox = place.sandbox->id();
    volume_call(ctx, *place.sandbox, place.root, ctx.params.at("path"));
  } catch (const ApiError& e) {
    if (ctx.responded) throw;
    ctx.error = e;
    JsonWriter w;
    w.begin_object().key("code").value(e.code).key("message").value(e.message);
    d_.replies.send_bytes(ctx, e.status, "application/json", w.end_object().take());
  }
}

// The real path of `path`: itself resolved when it exists (a symbolic link too); else, with
// `missing` parents allowed to be missing (0 for an existing path, 1 for a new entry, more for
// mkdir -p), its deepest existing ancestor resolved and the rest appended. Refused when it
// leaves the volume.
std::string E2bRoutes::volume_real(Sandbox& sb, const std::string& root, const std::string& path,
                                   int missing) {
  std::string at = path, rest;
  for (int left = missing;; --left) {
    // OpenSSH answers a path that is not there with an error or with nothing resolved.
    auto real = sb.realpath(at);
    if (real && !real->empty() && real->front() == '/') {
      if (*real != root && real->rfind(root + "/", 0) != 0)
        throw ApiError{403, "permission_denied",
                       "path " + volume_path(root, path) + " leaves the volume"};
      return *real + rest;
    }
    if (at.size() <= root.size()) {
      if (!real) throw from_error(real.error());
      throw unavailable("the sandbox did not resolve the volume's root " + root);
    }
    if (left <= 0) throw not_found("path " + volume_path(root, path) + " does not exist");
    rest = at.substr(at.rfind('/')) + rest;
    at.resize(at.rfind('/'));
  }
}

// GET .../dir: the entries under `real`, `depth` levels down (at most kMaxVolumeEntries).
std::string E2bRoutes::list_volume_dir(Sandbox& sb, const std::string& root,
                                       const std::string& real, std::uint32_t depth) {
  JsonWriter w;
  w.begin_array();
  std::size_t count = 0;
  std::vector<std::pair<std::string, std::uint32_t>> todo{{real, 1}};
  while (!todo.empty() && count < kMaxVolumeEntries) {
    auto [dir, level] = todo.back();
    todo.pop_back();
    ListOptions lo;
    lo.max_entries = kMaxVolumeEntries - count;
    auto listing = sb.list_dir(dir, lo);
    if (!listing && dir == real) throw from_error(listing.error());
    if (!listing) continue;  // a directory below it the user may not read: listed, not entered
    for (const auto& e : listing->entries) {
      if (dir == root && e.name == "lost+found") continue;  // ext4's, not the user's
      w.raw(stat_json(root, dir + "/" + e.name, e.attrs));
      ++count;
      if (e.attrs.is_dir() && level < depth) todo.emplace_back(dir + "/" + e.name, level + 1);
    }
  }
  return w.end_array().take();
}

void E2bRoutes::volume_call(RequestContext& ctx, Sandbox& sb, const std::string& root,
                            const std::string& what) {
  const std::string path = in_volume(root, ctx.query_value("path"));
  const std::string& m = ctx.method;
  {
    JsonWriter p;  // what the audit records of a write
    p.begin_object()
        .key("call")
        .value(what.substr(0, 32))
        .key("path")
        .value(volume_path(root, path));
    ctx.params_json = p.end_object().take();
  }
  auto stat_reply = [&](const std::string& real) {
    auto a = sb.stat(real);
    if (!a) throw from_error(a.error());
    d_.replies.send_json(ctx, 200, stat_json(root, real, *a));
  };
  auto ownership = [&] {
    return Ownership{query_number(ctx, "uid", 0xffffffffu), query_number(ctx, "gid", 0xffffffffu),
                     query_number(ctx, "mode", 07777)};
  };
  auto judge_write = [&](const std::string& real, std::string_view content) {
    PolicyRequest asked;
    asked.action = PolicyAction::kFilesWrite;
    asked.path = real;
    asked.canonical = canonical_write(real, 0644, sha256_hex(content));
    asked.content = content;
    ctx.policy_json = admit(*ctx.principal, sb.id(), asked);
  };
  if (what == "dir" && m == "GET") {
    std::string real = volume_real(sb, root, path, 0);
    auto depth = std::max<std::uint32_t>(query_number(ctx, "depth", 64).value_or(1), 1);
    return d_.replies.send_json(ctx, 200, list_volume_dir(sb, root, real, depth));
  }
  if (what == "dir" && m == "POST") {
    std::string real = volume_real(sb, root, path, ctx.query_value("force") == "true" ? 64 : 1);
    judge_write(real, "");
    auto r =
        sb.exec(std::string(ctx.query_value("force") == "true" ? "mkdir -p -- " : "mkdir -- ") +
                shell_quote(real));
    if (!r) throw from_error(r.error());
    if (r->exit_code != 0)
      throw ApiError{409, "conflict",
                     "mkdir " + volume_path(root, real) + ": " + r->err.substr(0, 200)};
    apply(sb, real, ownership());
    return stat_reply(real);
  }
  if (what == "path" && m == "GET") return stat_reply(volume_real(sb, root, path, 0));
  if (what == "path" && m == "PATCH") {
    std::string real = volume_real(sb, root, path, 0);
    auto body = JsonBody::parse(d_.replies.json_body(ctx));
    if (!body) throw body.error();
    Ownership o;
    if (auto v = body->integer("uid", 0, 0xffffffffll)) o.uid = static_cast<std::uint32_t>(*v);
    if (auto v = body->integer("gid", 0, 0xffffffffll)) o.gid = static_cast<std::uint32_t>(*v);
    if (auto v = body->integer("mode", 0, 07777)) o.mode = static_cast<std::uint32_t>(*v);
    if (auto err = body->finish()) throw *err;
    judge_write(real, "");
    apply(sb, real, o);
    return stat_reply(real);
  }
  if (what == "path" && m == "DELETE") {
    std::string real = volume_real(sb, root, path, 0);
    if (real == root) throw bad_request("path: not the volume's root");
    judge_write(real, "");
    auto gone = e2b::remove(sb, real);
    if (gone.error) throw ApiError{404, "not_found", gone.error->message};
    return d_.replies.send_empty(ctx, 204);
  }
  if (what == "file" && m == "GET") {
    std::string real = volume_real(sb, root, path, 0);
    auto data = sb.read_file(real, d_.config.max_download_bytes);
    if (!data) throw from_error(data.error());
    return d_.replies.send_bytes(ctx, 200, "application/octet-stream", *data);
  }
  if (what == "file" && m == "PUT") {
    std::string real = volume_real(sb, root, path, 1);
    std::string data = d_.replies.read_body(ctx, d_.config.max_upload_bytes);
    if (ctx.query_value("force") != "true" && sb.stat(real))
      throw ApiError{409, "conflict", volume_path(root, real) + " exists (force to overwrite)"};
    judge_write(real, data);
    UploadOptions o;
    o.mode = query_number(ctx, "mode", 07777).value_or(0644);
    std::istringstream in(data);
    if (auto st = sb.upload(real, in, o, data.size()); !st) throw from_error(st.error());
    apply(sb, real,
          {query_number(ctx, "uid", 0xffffffffu), query_number(ctx, "gid", 0xffffffffu), {}});
    return stat_reply(real);
  }
  throw ApiError{404, "not_found",
                 m + " /volumecontent/{volumeID}/" + what.substr(0, 32) + ": no such call"};
}

}  // namespace pvs::service
