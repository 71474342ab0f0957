// envd's plain HTTP side (packages/envd/spec/envd.yaml): GET/POST /files and the pieces their
// handlers need. Pure functions.
//
//   GET  /files?path=P[&username=U]   the file's bytes (application/octet-stream)
//   POST /files?path=P                multipart/form-data, one or more parts named "file"
//                                     (the part's filename is its path when ?path is absent),
//                                     or application/octet-stream with ?path
//        -> 200 [{"path","name","type":"file"}]
//   errors: {"code": <status>, "message": "..."} (as the control plane's, e2b_error_body)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_error.h"

namespace pvs::service::e2b {

inline constexpr std::size_t kMaxMultipartParts = 64;

// The boundary of a "multipart/form-data; boundary=..." Content-Type (quoted or not, 1-70
// characters as RFC 2046 allows), or nullopt.
std::optional<std::string> multipart_boundary(std::string_view content_type);

struct Part {
  std::string name;       // the form field
  std::string filename;   // empty when the part has none
  std::string_view data;  // into the body
};
// The parts of a complete multipart body. 400 for a body that does not follow RFC 7578
// (no opening boundary, a part without headers' end, no closing boundary), more than
// kMaxMultipartParts parts, or a part whose Content-Disposition is not form-data.
ApiResult<std::vector<Part>> parse_multipart(std::string_view body, std::string_view boundary);

// A path as envd takes it: absolute, or relative to `home` ("file.txt" -> home/file.txt);
// "~" and "~/x" too. Empty, NUL, over 4096 bytes: 400. "." and ".." segments are resolved
// lexically; the result is never above "/".
ApiResult<std::string> resolve_path(std::string_view path, std::string_view home);
// A `username` query value: empty or a POSIX user name (1-32 of [a-z0-9_-], not starting
// with '-'); which user is a known limit (see docs/e2b.md).
bool is_user_name(std::string_view name);

// E2B's signed file URL (the SDK's downloadUrl/uploadUrl, envd's validateSigning): a `signature`
// query value of "v1_" + base64 (standard alphabet, no padding) of
// SHA-256("<path>:<operation>:<username>:<envd access token>[:<signature_expiration>]"), where
// path and username are the query's own values ("" when absent), operation "read" (GET) or
// "write" (POST), and signature_expiration (when the URL has one) Unix seconds.
std::string file_signature(std::string_view path, std::string_view operation,
                           std::string_view username, std::string_view access_token,
                           std::optional<std::int64_t> expiration);

struct WrittenFile {
  std::string path;
};
// [{"path": ..., "name": <last segment>, "type": "file"}, ...]
std::string upload_reply(const std::vector<WrittenFile>& files);

}  // namespace pvs::service::e2b
