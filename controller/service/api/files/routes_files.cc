// Files of a sandbox: download (streamed), directory listing, upload (streamed, atomic), edit.
#include <algorithm>
#include <optional>
#include <sstream>
#include <thread>

#include <Poco/Crypto/DigestEngine.h>
#include <Poco/DigestStream.h>

#include "api/files/file_routes.h"
#include "api/files/real_path.h"
#include "core/text/file_edit.h"
#include "http/chunk_frames.h"
#include "http/chunk_queue.h"
#include "http/json.h"
#include "http/requests.h"
#include "policy/canonical.h"
#include "policy/content_check.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {

namespace {

const char* file_type(const SftpAttributes& a) {
  if (a.is_dir()) return "dir";
  if (a.is_regular()) return "file";
  if (a.is_symlink()) return "symlink";
  return "other";
}

// A path denied as written is refused at once (403, audited), before the sandbox resolves it;
// the resolved path is judged again by the caller.
void deny_early(const Policy& policy, PolicyGate& gate, RequestContext& ctx, PolicyAction action,
                const std::string& path) {
  PolicyRequest literal;
  literal.action = action;
  literal.path = path;
  if (policy.decide(ctx.principal->name, literal).verdict == Verdict::kDeny)
    (void)gate.admit(ctx, literal);  // throws the 403
}

std::string octal(std::uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

// What reading a request body into a queue came to.
struct BodyRead {
  enum class State { kOk, kTooLarge, kShort, kBroken, kStopped };
  State state = State::kOk;
  std::uint64_t received = 0;
  std::string error;
};

// Reads a request body (at most `limit`, exactly `length` when known) into `queue` until its
// end, an error, or the consumer's cancel(); the queue ends failed unless the body was whole.
BodyRead pump_body(std::istream* in, std::uint64_t limit, std::optional<std::uint64_t> length,
                   ChunkQueue& queue) {
  constexpr std::size_t kChunk = 64 << 10;
  BodyRead r;
  while (in) {
    std::size_t want = kChunk;
    if (length)
      want = static_cast<std::size_t>(std::min<std::uint64_t>(want, *length - r.received));
    if (want == 0) break;
    std::string chunk(want, '\0');
    std::streamsize got = 0;
    try {
      in->read(chunk.data(), static_cast<std::streamsize>(want));
      got = in->gcount();
    } catch (const std::exception& e) {
      r.state = BodyRead::State::kBroken;
      r.error = e.what();
      break;
    }
    r.received += static_cast<std::uint64_t>(got);
    if (r.received > limit) {
      r.state = BodyRead::State::kTooLarge;
      break;
    }
    if (got == 0) {
      if (length && r.received < *length) r.state = BodyRead::State::kShort;
      break;
    }
    chunk.resize(static_cast<std::size_t>(got));
    if (!queue.push(std::move(chunk))) {
      r.state = BodyRead::State::kStopped;  // the upload ended first (it failed)
      break;
    }
  }
  queue.close(r.state != BodyRead::State::kOk);
  return r;
}

}  // namespace

void FileRoutes::download(RequestContext& ctx) {
  auto path = validate_path(ctx.query_value("path"));
  if (!path) throw path.error();
  std::string list = ctx.query_value("list");
  auto sandbox = sandboxes_.find(ctx);
  if (list == "true" || list == "1") {
    auto limit = parse_list_limit(ctx.query_value("limit"));
    if (!limit) throw limit.error();
    ListOptions options;
    options.max_entries = *limit;
    auto listing = sandbox->list_dir(*path, options);
    if (!listing) throw from_error(listing.error());
    JsonWriter w;
    w.begin_object().key("path").value(*path).key("truncated").value(listing->truncated);
    w.key("entries").begin_array();
    for (const auto& e : listing->entries) {
      w.begin_object().key("name").value(e.name).key("type").value(file_type(e.attrs));
      w.key("size").value(e.attrs.size).key("mode").value(octal(e.attrs.mode));
      w.key("mtime").value(e.attrs.mtime).end_object();
    }
    w.end_array().end_object();
    replies_.send_json(ctx, 200, w.take());
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
  ChunkQueue pump;
  Result<std::uint64_t> got = 0;
  std::thread downloader([&] {
    ChunkWriter writer(pump);
    std::ostream out(&writer);
    DownloadOptions o;
    o.max_size = config_.max_download_bytes;
    try {
      got = sandbox->download(*path, out, o);
    } catch (const std::exception& e) {
      got = fail(ErrorCode::kInternal, std::string("download: ") + e.what());
    }
    pump.close();
  });
  std::optional<ChunkFrames> client;  // each SFTP block one chunk (http/chunk_frames.h)
  bool client_gone = false;
  for (std::string chunk; pump.pop(&chunk);) {
    if (client_gone) continue;
    try {
      if (!client) {
        replies_.begin_reply(ctx, 200, "application/octet-stream");
        ctx.response->setChunkedTransferEncoding(true);
        client.emplace(ctx, ctx.response->send());
      }
      client_gone = !client->send(chunk);
    } catch (const Poco::Exception&) {
      client_gone = true;
    }
    if (client_gone) pump.cancel();
  }
  downloader.join();
  if (!client) {
    if (!got) throw from_error(got.error());
    replies_.send_bytes(ctx, 200, "application/octet-stream", "");  // an empty file
    return;
  }
  if (!got || client_gone) {
    log::warn(
        "request " + ctx.request_id + ": download of " + *path + " cut off after " +
        "the reply began: " + (got ? std::string("the client went away") : got.error().message));
    replies_.abort_reply(ctx);
  }
}

void FileRoutes::upload(RequestContext& ctx) {
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
  auto sandbox = sandboxes_.find(ctx);
  deny_early(config_.policy, gate_, ctx, PolicyAction::kFilesWrite, *path);
  // The policy judges the path the sandbox resolves (links in the parent followed), and the
  // upload goes to exactly that path.
  *path = real_write_path(*sandbox, *path);
  PolicyRequest asked;
  asked.action = PolicyAction::kFilesWrite;
  asked.path = *path;
  // The body's SHA-256 (Content-Digest, RFC 9530) is part of the call: an approved upload
  // writes exactly the content the person approved, checked before the rename.
  std::optional<std::string> want;
  if (std::string cd = req.get("Content-Digest", ""); !cd.empty()) {
    want = content_digest_sha256(cd);
    if (!want) throw bad_request("Content-Digest: expected sha-256=:<base64 of 32 bytes>:");
  }
  // Content rules judge the body's head, read now; the upload streams it on (content_check.h).
  std::optional<std::uint64_t> length;
  if (req.hasContentLength()) length = static_cast<std::uint64_t>(req.getContentLength64());
  bool has_body = length.has_value() || req.getChunkedTransferEncoding();
  BodyHead head(has_body ? &req.stream() : nullptr,
                config_.policy.content_bound(ctx.principal->name, asked.action, *path), length);
  head.describe(asked);
  if (!want) want = head.sha256();
  asked.canonical = canonical_write(*path, mode, want.value_or(""));
  if (!want && config_.policy.decide(ctx.principal->name, asked).verdict == Verdict::kApprove)
    throw bad_request(
        "this upload needs a person's approval (files.write): send the body's "
        "SHA-256 as Content-Digest: sha-256=:<base64>: so the approval covers "
        "the content");
  if (!gate_.admit(ctx, asked)) return;
  // The body streams from the socket to SFTP (64 KiB at a time, never held whole); the upload
  // is atomic, so a body that breaks off or exceeds the limit leaves the target untouched.
  ChunkQueue queue;
  UploadOptions options;
  options.mode = mode;
  options.create_parents = true;
  Poco::Crypto::DigestEngine engine("SHA256");
  bool mismatch = false;
  // The digest stream turns a body that broke off (the queue closed as failed) into a clean
  // end, so the queue itself says whether the body was whole before anything is renamed.
  options.before_rename = [&]() -> Status {
    if (queue.failed()) return fail(ErrorCode::kInvalidArgument, "the body broke off");
    if (!want || Poco::DigestEngine::digestToHex(engine.digest()) == *want) return {};
    mismatch = true;
    return fail(ErrorCode::kInvalidArgument, "the body does not match its Content-Digest");
  };
  Status st;
  BodyRead body;
  {
    ChunkReader reader(queue);
    std::istream raw(&reader);
    Poco::DigestInputStream in(engine, raw);
    std::thread uploader([&] {
      try {
        st = sandbox->upload(*path, in, options, length);
      } catch (const std::exception& e) {
        st = fail(ErrorCode::kInternal, std::string("upload: ") + e.what());
      }
      queue.cancel();
    });
    body = pump_body(head.stream(), config_.max_upload_bytes, length, queue);
    uploader.join();
  }
  ctx.body_read = body.state == BodyRead::State::kOk;
  JsonWriter p;
  p.begin_object().key("path").value(*path).key("mode").value(octal(mode));
  p.key("size").value(body.received).end_object();
  ctx.params_json = p.str();
  if (body.state == BodyRead::State::kTooLarge) {
    throw too_large("request body larger than " + std::to_string(config_.max_upload_bytes) +
                    " bytes");
  }
  if (body.state == BodyRead::State::kShort) {
    throw bad_request("request body shorter than its Content-Length");
  }
  if (body.state == BodyRead::State::kBroken) {
    throw bad_request("reading the request body failed: " + body.error);
  }
  if (mismatch)
    throw bad_request("the body does not match its Content-Digest (nothing was written)");
  if (!st) throw from_error(st.error());
  replies_.send_json(ctx, 200, p.take());
}

std::string edit_reply_json(const EditReply& r) {
  JsonWriter w;
  w.begin_object().key("path").value(r.path).key("replaced").value(std::uint64_t{r.replaced});
  w.key("size").value(r.size).key("crlf").value(r.crlf).key("diff").value(r.diff);
  return w.end_object().take();
}

void FileRoutes::edit(RequestContext& ctx) {
  auto req = parse_edit(replies_.json_body(ctx), config_);
  if (!req) throw req.error();
  {
    // The strings are the file's content: their sizes are recorded, not them.
    JsonWriter p;
    p.begin_object().key("path").value(req->path).key("replace_all").value(req->spec.replace_all);
    p.key("old_bytes").value(std::uint64_t{req->spec.old_string.size()});
    p.key("new_bytes").value(std::uint64_t{req->spec.new_string.size()}).end_object();
    ctx.params_json = p.take();
  }
  auto sandbox = sandboxes_.find(ctx);
  deny_early(config_.policy, gate_, ctx, PolicyAction::kFilesEdit, req->path);
  req->path = real_file_path(*sandbox, req->path);  // judged and edited: the link's target
  PolicyRequest asked;
  asked.action = PolicyAction::kFilesEdit;
  asked.path = req->path;
  asked.canonical = canonical_edit(*req);
  auto edited = edited_content(config_.policy, ctx.principal->name, *sandbox, *req);
  if (edited) asked.content = *edited;
  if (!gate_.admit(ctx, asked)) return;
  replies_.send_json(ctx, 200, edit_reply_json(edit_file(*sandbox, *req)));
}

namespace {

ApiError edit_api_error(const EditError& e) {
  switch (e.kind) {
    case EditError::Kind::kNotFound: return unprocessable("no_match", e.message);
    case EditError::Kind::kAmbiguous: return unprocessable("ambiguous_match", e.message);
    case EditError::Kind::kBinary: return unprocessable("binary_file", e.message);
    default: return bad_request(e.message);
  }
}

}  // namespace

EditReply FileRoutes::edit_file(Sandbox& sandbox, const EditRequest& req) {
  auto attrs = sandbox.stat(req.path);
  if (!attrs) throw from_error(attrs.error());
  if (attrs->is_dir()) throw bad_request(req.path + " is a directory");
  if (!attrs->is_regular()) throw bad_request(req.path + " is not a regular file");
  if (attrs->size > kMaxEditFileBytes) {
    throw too_large(req.path + " is larger than " + std::to_string(kMaxEditFileBytes) +
                    " bytes; edit it with a command (exec) instead");
  }
  auto content = sandbox.read_file(req.path, kMaxEditFileBytes);
  if (!content) throw from_error(content.error());
  auto edit = apply_edit(*content, req.spec);
  if (!edit) throw edit_api_error(edit.error());
  std::uint64_t limit = std::min<std::uint64_t>(2 * kMaxEditFileBytes, config_.max_upload_bytes);
  if (edit->content.size() > limit) {
    throw too_large("the edited file would be larger than " + std::to_string(limit) + " bytes");
  }
  std::istringstream in(edit->content);
  UploadOptions options;
  options.mode = attrs->mode & 07777;
  options.atomic = true;
  if (auto st = sandbox.upload(req.path, in, options, edit->content.size()); !st)
    throw from_error(st.error());
  EditReply reply;
  reply.path = req.path;
  reply.replaced = edit->replaced;
  reply.size = edit->content.size();
  reply.crlf = edit->crlf;
  reply.diff = unified_diff(req.path, *content, *edit);
  return reply;
}

}  // namespace pvs::service
