// envd's plain HTTP side: GET /files (a file's bytes), POST /files (multipart/form-data parts
// named "file", or application/octet-stream with ?path), GET /health. Errors as envd gives
// them: {"code": <status>, "message": "..."}.
#include <sstream>

#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>

#include "api/files/real_path.h"
#include "e2b/control_wire.h"
#include "e2b/e2b_routes.h"
#include "e2b/filesystem/files_wire.h"
#include "e2b/filesystem/fs_ops.h"
#include "e2b/sessions.h"
#include "http/auth.h"
#include "http/json.h"
#include "policy/canonical.h"

namespace pvs::service {
namespace {

// Uploads are read whole (a multipart body must be split before its parts are written).
constexpr std::uint64_t kMaxEnvdUpload = 64ull << 20;

}  // namespace

void E2bRoutes::files_call(RequestContext& ctx, std::string_view operation,
                           const std::function<void(const Target&)>& work) {
  std::optional<ApiError> error;
  try {
    std::optional<Target> t;
    std::optional<TokenLimits::Slot> slot;  // the owner's request slot (#46 finding 2)
    envd(ctx, false, [&] {
      auto found = target(ctx, operation);
      slot.emplace(take_slot(ctx, TokenLimits::Kind::kRequest));
      t = std::move(found);
    });
    if (!t) return;  // e2b_envd answered (Connect's shape is what the SDK reads here too)
    work(*t);
    return;
  } catch (const ApiError& e) {
    error = e;
  }
  if (ctx.responded) return;
  ctx.error = *error;
  d_.replies.send_bytes(ctx, error->status, "application/json", e2b::e2b_error_body(*error));
}

void E2bRoutes::files_get(RequestContext& ctx) {
  files_call(ctx, "read", [&](const Target& t) {
    auto user = ctx.query_value("username");
    if (!e2b::is_user_name(user)) throw bad_request("username: not a user name");
    auto path = e2b::resolve_path(ctx.query_value("path"), home());
    if (!path) throw path.error();
    auto attrs = t.sandbox->stat(*path);
    if (!attrs) {
      auto e = e2b::connect_error_of(attrs.error());
      if (e.code == e2b::ConnectCode::kNotFound)
        throw not_found("path '" + *path + "' does not exist");
      throw from_error(attrs.error());
    }
    if (attrs->is_dir()) throw bad_request("path '" + *path + "' is a directory");
    if (attrs->size > d_.config.max_download_bytes)
      throw too_large("file is larger than " + std::to_string(d_.config.max_download_bytes) +
                      " bytes");
    auto data = t.sandbox->read_file(*path, d_.config.max_download_bytes);
    if (!data) throw from_error(data.error());
    d_.replies.send_bytes(ctx, 200, "application/octet-stream", *data);
  });
}

void E2bRoutes::files_post(RequestContext& ctx) {
  files_call(ctx, "write", [&](const Target& t) {
    auto user = ctx.query_value("username");
    if (!e2b::is_user_name(user)) throw bad_request("username: not a user name");
    std::string content_type = ctx.request->getContentType();
    std::string body = d_.replies.read_body(
        ctx, std::min<std::uint64_t>(kMaxEnvdUpload, d_.config.max_upload_bytes));
    std::vector<std::pair<std::string, std::string_view>> files;  // path, data
    if (auto boundary = e2b::multipart_boundary(content_type)) {
      auto parts = e2b::parse_multipart(body, *boundary);
      if (!parts) throw parts.error();
      for (const auto& p : *parts) {
        if (p.name != "file") continue;
        std::string where = ctx.query_value("path").empty() ? p.filename : ctx.query_value("path");
        files.emplace_back(where, p.data);
      }
    } else if (content_type.rfind("application/octet-stream", 0) == 0) {
      files.emplace_back(ctx.query_value("path"), body);
    } else {
      throw unsupported_media_type(
          "POST /files takes multipart/form-data or application/octet-stream");
    }
    if (files.empty()) throw bad_request("no part named \"file\"");
    std::vector<e2b::WrittenFile> written;
    JsonWriter p;
    p.begin_object().key("paths").begin_array();
    for (auto& [where, data] : files) {
      auto path = e2b::resolve_path(where, home());
      if (!path) throw path.error();
      std::string real = real_write_path(*t.sandbox, *path);  // #32 finding 7
      p.value(real);
      written.push_back({real});
    }
    ctx.params_json = p.end_array()
                          .key("bytes")
                          .value(static_cast<std::uint64_t>(body.size()))
                          .end_object()
                          .take();
    UploadOptions o;
    o.create_parents = true;
    for (std::size_t i = 0; i < files.size(); ++i) {
      PolicyRequest asked;
      asked.action = PolicyAction::kFilesWrite;
      asked.path = written[i].path;
      asked.canonical = canonical_write(asked.path, o.mode, sha256_hex(files[i].second));
      asked.content = files[i].second;
      ctx.policy_json = admit(*ctx.principal, t.sandbox->id(), asked);
    }
    for (std::size_t i = 0; i < files.size(); ++i) {
      std::istringstream in{std::string(files[i].second)};
      if (auto st = t.sandbox->upload(written[i].path, in, o, files[i].second.size()); !st)
        throw from_error(st.error());
    }
    d_.replies.send_json(ctx, 200, e2b::upload_reply(written));
  });
}

void E2bRoutes::health(RequestContext& ctx) {
  d_.replies.send_empty(ctx, 204);
}

}  // namespace pvs::service
