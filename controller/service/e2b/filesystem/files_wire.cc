#include "e2b/filesystem/files_wire.h"

#include <algorithm>

#include "e2b/base64.h"
#include "http/auth.h"
#include "http/json.h"
#include "pvesandbox/common/text.h"

namespace pvs::service::e2b {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The value of `param` in a header value's "; a=b; c="d"" list.
std::optional<std::string> header_param(std::string_view value, std::string_view param) {
  constexpr auto npos = std::string_view::npos;
  auto semi = value.find(';');
  if (semi == npos) return std::nullopt;
  std::size_t i = semi + 1;
  while (i < value.size()) {
    while (i < value.size() && (value[i] == ' ' || value[i] == '\t' || value[i] == ';')) ++i;
    if (i >= value.size()) break;
    auto eq = value.find('=', i);
    if (eq == npos) return std::nullopt;
    std::string key = ascii_lower(trim(value.substr(i, eq - i)));
    i = eq + 1;
    while (i < value.size() && value[i] == ' ') ++i;
    std::string out;
    if (i < value.size() && value[i] == '"') {
      for (++i; i < value.size() && value[i] != '"'; ++i) {
        if (value[i] == '\\' && i + 1 < value.size()) ++i;
        out.push_back(value[i]);
      }
      if (i >= value.size()) return std::nullopt;
      ++i;  // the closing quote
    } else {
      auto end = value.find(';', i);
      out = std::string(trim(value.substr(i, end == npos ? npos : end - i)));
      i = end == npos ? value.size() : end;
    }
    if (key == param) return out;
  }
  return std::nullopt;
}

// One part's headers and data, from `block` (the bytes between two boundary lines).
ApiResult<Part> read_part(std::string_view block) {
  auto end = block.find("\r\n\r\n");
  if (end == std::string_view::npos)
    return tl::unexpected(bad_request("multipart: a part without the end of its headers"));
  std::string_view headers = block.substr(0, end);
  Part part;
  part.data = block.substr(end + 4);
  bool disposition = false;
  while (!headers.empty()) {
    auto eol = headers.find("\r\n");
    std::string_view line = headers.substr(0, eol);
    headers = eol == std::string_view::npos ? std::string_view{} : headers.substr(eol + 2);
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    if (ascii_lower(trim(line.substr(0, colon))) != "content-disposition") continue;
    std::string_view value = trim(line.substr(colon + 1));
    if (ascii_lower(value.substr(0, value.find(';'))) != "form-data")
      return tl::unexpected(bad_request("multipart: a part that is not form-data"));
    disposition = true;
    part.name = header_param(value, "name").value_or("");
    part.filename = header_param(value, "filename").value_or("");
  }
  if (!disposition)
    return tl::unexpected(bad_request("multipart: a part without Content-Disposition"));
  return part;
}

}  // namespace

std::optional<std::string> multipart_boundary(std::string_view content_type) {
  std::string type = ascii_lower(trim(content_type.substr(0, content_type.find(';'))));
  if (type != "multipart/form-data") return std::nullopt;
  auto b = header_param(content_type, "boundary");
  if (!b || b->empty() || b->size() > 70) return std::nullopt;
  if (b->find_first_of("\r\n") != std::string::npos) return std::nullopt;
  return b;
}

ApiResult<std::vector<Part>> parse_multipart(std::string_view body, std::string_view boundary) {
  const std::string delimiter = "--" + std::string(boundary);
  if (body.substr(0, delimiter.size()) != delimiter)
    return tl::unexpected(bad_request("multipart: the body does not start with its boundary"));
  std::vector<Part> parts;
  std::size_t pos = delimiter.size();
  const std::string separator = "\r\n" + delimiter;
  while (true) {
    if (body.substr(pos, 2) == "--") return parts;  // the closing boundary
    if (body.substr(pos, 2) != "\r\n")
      return tl::unexpected(bad_request("multipart: a boundary line with trailing bytes"));
    pos += 2;
    auto next = body.find(separator, pos);
    if (next == std::string_view::npos)
      return tl::unexpected(bad_request("multipart: no closing boundary"));
    if (parts.size() == kMaxMultipartParts)
      return tl::unexpected(
          bad_request("multipart: more than " + std::to_string(kMaxMultipartParts) + " parts"));
    auto part = read_part(body.substr(pos, next - pos));
    if (!part) return tl::unexpected(part.error());
    parts.push_back(*part);
    pos = next + separator.size();
  }
}

ApiResult<std::string> resolve_path(std::string_view path, std::string_view home) {
  if (path.empty()) return tl::unexpected(bad_request("path: required"));
  if (path.size() > 4096 || path.find('\0') != std::string_view::npos)
    return tl::unexpected(bad_request("path: longer than 4096 bytes or holds NUL"));
  std::string full;
  if (path == "~")
    full = std::string(home);
  else if (path.substr(0, 2) == "~/")
    full = std::string(home) + std::string(path.substr(1));
  else if (path.front() != '/')
    full = std::string(home) + "/" + std::string(path);
  else
    full = std::string(path);
  std::vector<std::string_view> segments;
  std::string_view rest = full;
  while (!rest.empty()) {
    auto slash = rest.find('/');
    std::string_view seg = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (seg.empty() || seg == ".") continue;
    if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
      continue;
    }
    segments.push_back(seg);
  }
  std::string out;
  for (auto seg : segments) out += "/" + std::string(seg);
  return out.empty() ? std::string("/") : out;
}

bool is_user_name(std::string_view name) {
  if (name.empty()) return true;
  if (name.size() > 32 || name.front() == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::string file_signature(std::string_view path, std::string_view operation,
                           std::string_view username, std::string_view access_token,
                           std::optional<std::int64_t> expiration) {
  std::string raw = std::string(path) + ':' + std::string(operation) + ':' + std::string(username) +
                    ':' + std::string(access_token);
  if (expiration) raw += ':' + std::to_string(*expiration);
  std::string b64 = base64_encode(sha256_bytes(raw));
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "v1_" + b64;
}

std::string upload_reply(const std::vector<WrittenFile>& files) {
  JsonWriter w;
  w.begin_array();
  for (const auto& f : files) {
    auto slash = f.path.rfind('/');
    std::string name = slash == std::string::npos ? f.path : f.path.substr(slash + 1);
    w.begin_object()
        .key("path")
        .value(f.path)
        .key("name")
        .value(name)
        .key("type")
        .value("file")
        .end_object();
  }
  w.end_array();
  return w.take();
}

}  // namespace pvs::service::e2b
