// The pure parts of the port proxy (port_proxy.h).
#include "api/ports/port_proxy.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace pvs::service::ports {

namespace {

constexpr std::size_t kMaxTarget = 8192;
constexpr std::size_t kMaxHeaders = 200;
constexpr std::size_t kMaxReason = 128;
constexpr std::size_t kMaxChunkLine = 4096;
constexpr std::size_t kMaxTrailer = 16 << 10;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether the comma-separated `list` (a Connection header's) names `token`, case-insensitively.
bool names_token(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = trim(list.substr(0, comma));
    if (!item.empty() && iequals(item, token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// RFC 9110 token characters (header names, methods).
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return std::isalnum(u) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

Error malformed(std::string what) {
  return Error{ErrorCode::kInvalidArgument, "malformed response from the service: " + what};
}

std::optional<std::uint64_t> parse_length(std::string_view v) {
  v = trim(v);
  if (v.empty() || v.size() > 18) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

}  // namespace

ApiResult<std::uint16_t> parse_port(std::string_view text) {
  auto bad = [&] {
    return tl::unexpected<ApiError>(bad_request("port: not a port number 1-65535: \"" +
                                                std::string(text.substr(0, 16)) + "\""));
  };
  if (text.empty() || text.size() > 5 || text[0] == '0') return bad();
  std::uint32_t n = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return bad();
    n = n * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (n > 65535) return bad();
  return static_cast<std::uint16_t>(n);
}

ApiResult<std::string> upstream_target(std::string_view raw, std::string_view id,
                                       std::string_view port) {
  return upstream_target_after(raw,
                               "/v1/sandboxes/" + std::string(id) + "/ports/" + std::string(port));
}

ApiResult<std::string> upstream_target_after(std::string_view raw, std::string_view prefix) {
  if (raw.size() > kMaxTarget)
    return tl::unexpected<ApiError>(
        bad_request("request-target longer than " + std::to_string(kMaxTarget) + " bytes"));
  if (raw.empty() || raw[0] != '/')
    return tl::unexpected<ApiError>(
        bad_request("request-target must be a path (origin form), not an absolute URL"));
  for (char c : raw) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '#')
      return tl::unexpected<ApiError>(
          bad_request("request-target: bytes outside visible ASCII must be percent-encoded"));
  }
  std::string_view path = raw.substr(0, raw.find('?'));
  std::string_view query = path.size() < raw.size() ? raw.substr(path.size()) : "";
  if (path.substr(0, prefix.size()) != prefix ||
      (path.size() > prefix.size() && path[prefix.size()] != '/'))
    return tl::unexpected<ApiError>(
        bad_request("the path up to the port must be written as is, without percent-encoding "
                    "(" +
                    std::string(prefix) + "/...)"));
  std::string target(path.substr(prefix.size()));
  if (target.empty()) target = "/";
  target += query;
  return target;
}

bool is_proxied_method(std::string_view method) {
  static constexpr std::array<std::string_view, 7> kMethods = {"GET",   "HEAD",   "POST",   "PUT",
                                                               "PATCH", "DELETE", "OPTIONS"};
  return std::find(kMethods.begin(), kMethods.end(), method) != kMethods.end();
}

bool is_hop_by_hop(std::string_view name, std::string_view connection) {
  static constexpr std::array<std::string_view, 9> kHop = {"connection",
                                                           "keep-alive",
                                                           "proxy-connection",
                                                           "proxy-authenticate",
                                                           "proxy-authorization",
                                                           "te",
                                                           "trailer",
                                                           "transfer-encoding",
                                                           "upgrade"};
  for (auto h : kHop)
    if (iequals(name, h)) return true;
  return names_token(connection, name);
}

std::string requested_upgrade(const std::vector<Header>& headers) {
  bool asked = false;
  std::string upgrade;
  for (const auto& [name, value] : headers) {
    if (iequals(name, "upgrade")) upgrade = std::string(trim(value));
    if (iequals(name, "connection") && names_token(value, "upgrade")) asked = true;
  }
  return asked ? upgrade : std::string();
}

Status check_host_mask(std::string_view mask) {
  auto bad = [&](const std::string& why) {
    return fail(Error{ErrorCode::kInvalidArgument,
                      "maskRequestHost \"" + std::string(mask.substr(0, 64)) + "\": " + why});
  };
  if (mask.empty() || mask.size() > 255) return bad("1 to 255 bytes");
  std::string host(mask);
  for (std::size_t at; (at = host.find("${PORT}")) != std::string::npos;) host.replace(at, 7, "1");
  std::string_view rest = host;
  std::string_view name;
  if (rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("an IPv6 literal without its ']'");
    name = rest.substr(1, close - 1);
    rest.remove_prefix(close + 1);
    if (name.empty() || name.find_first_not_of("0123456789abcdefABCDEF:.") != std::string::npos)
      return bad("not an IPv6 literal");
  } else {
    name = rest.substr(0, rest.find(':'));
    rest.remove_prefix(name.size());
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
        }))
      return bad("a host name has letters, digits, '.', '-' and '_' only");
  }
  if (rest.empty()) return {};
  rest.remove_prefix(1);  // ':'
  if (rest.empty() || rest.size() > 5 ||
      !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return bad("the port after ':' is digits or ${PORT}");
  return {};
}

std::string expand_host_mask(std::string_view mask, std::uint16_t port) {
  std::string host(mask);
  const std::string p = std::to_string(port);
  for (std::size_t at = 0; (at = host.find("${PORT}", at)) != std::string::npos; at += p.size())
    host.replace(at, 7, p);
  return host;
}

namespace {

// `list` (items separated by `sep`, blanks around them ignored) without the items that start
// with `drop`, joined by `join`; "" when none is left.
std::string without_items(std::string_view list, char sep, std::string_view join,
                          std::string_view drop) {
  std::string kept;
  while (!list.empty()) {
    auto end = list.find(sep);
    auto item = trim(list.substr(0, end));
    if (!item.empty() && item.substr(0, drop.size()) != drop)
      kept += (kept.empty() ? "" : std::string(join)) + std::string(item);
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return kept;
}

}  // namespace

std::string request_head(const UpstreamRequest& r) {
  std::string connection;
  for (const auto& [name, value] : r.headers)
    if (iequals(name, "connection")) connection += value + ",";
  std::string head = r.method + " " + r.target + " HTTP/1.1\r\n";
  for (const auto& [name, value] : r.headers) {
    if (is_hop_by_hop(name, connection) || iequals(name, "host") ||
        iequals(name, "authorization") || iequals(name, "expect") ||
        iequals(name, "content-length") || iequals(name, "x-forwarded-host") ||
        iequals(name, "x-forwarded-prefix") || iequals(name, "e2b-traffic-access-token"))
      continue;
    std::string v = value;
    // The console's token as a subprotocol ("bearer.<token>"), the preview link's cookie.
    if (iequals(name, "sec-websocket-protocol")) v = without_items(value, ',', ", ", "bearer.");
    if (iequals(name, "cookie")) v = without_items(value, ';', "; ", "pvs_preview=");
    if (v.empty() && !value.empty()) continue;
    head += name + ": " + v + "\r\n";
  }
  head += "Host: " + (r.host.empty() ? "localhost:" + std::to_string(r.port) : r.host) + "\r\n";
  if (r.body.kind == BodyFraming::Kind::kLength)
    head += "Content-Length: " + std::to_string(r.body.length) + "\r\n";
  else if (r.body.kind == BodyFraming::Kind::kChunked)
    head += "Transfer-Encoding: chunked\r\n";
  if (!r.forwarded_host.empty()) head += "X-Forwarded-Host: " + r.forwarded_host + "\r\n";
  if (!r.forwarded_prefix.empty()) head += "X-Forwarded-Prefix: " + r.forwarded_prefix + "\r\n";
  if (!r.upgrade.empty())
    head += "Upgrade: " + r.upgrade + "\r\nConnection: Upgrade\r\n\r\n";
  else
    head += "Connection: close\r\n\r\n";
  return head;
}

std::optional<std::size_t> head_end(std::string_view buffer) {
  auto at = buffer.find("\r\n\r\n");
  if (at == std::string_view::npos) return std::nullopt;
  return at + 4;
}

namespace {

// "HTTP/1.x NNN reason" into *out.
Status parse_status_line(std::string_view line, ResponseHead* out) {
  if (line.size() < 12 || (line.substr(0, 9) != "HTTP/1.1 " && line.substr(0, 9) != "HTTP/1.0 "))
    return fail(malformed("not an HTTP/1.x status line"));
  auto code = line.substr(9, 3);
  if (!std::all_of(code.begin(), code.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      (line.size() > 12 && line[12] != ' '))
    return fail(malformed("bad status code"));
  out->status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  if (out->status < 100 || out->status > 599) return fail(malformed("bad status code"));
  if (line.size() > 13) {
    for (char c : line.substr(13)) {
      auto u = static_cast<unsigned char>(c);
      if (u == 0x7f || (u < 0x20 && c != '\t')) return fail(malformed("control bytes in reason"));
    }
    out->reason = std::string(line.substr(13, kMaxReason));
  }
  return {};
}

}  // namespace

Result<ResponseHead> parse_response_head(std::string_view head, std::string_view method) {
  if (head.size() >= 4 && head.substr(head.size() - 4) == "\r\n\r\n") head.remove_suffix(2);
  if (head.find('\0') != std::string_view::npos) return fail(malformed("NUL in the head"));
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    auto crlf = head.find("\r\n");
    auto line = head.substr(0, crlf);
    if (line.find_first_of("\r\n") != std::string_view::npos)
      return fail(malformed("bare CR or LF in the head"));
    lines.push_back(line);
    if (crlf == std::string_view::npos) break;
    head.remove_prefix(crlf + 2);
  }
  if (lines.empty()) return fail(malformed("empty head"));
  if (lines.size() > kMaxHeaders + 1) return fail(malformed("too many headers"));
  ResponseHead r;
  if (auto st = parse_status_line(lines[0], &r); !st) return tl::unexpected<Error>(st.error());
  std::vector<Header> all;
  std::string connection;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    auto line = lines[i];
    if (line.empty()) continue;  // the head's own blank line
    if (line[0] == ' ' || line[0] == '\t') return fail(malformed("obsolete line folding"));
    auto colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      return fail(malformed("bad header line"));
    all.emplace_back(std::string(line.substr(0, colon)), std::string(trim(line.substr(colon + 1))));
    if (iequals(all.back().first, "connection")) connection += all.back().second + ",";
  }
  std::optional<std::uint64_t> length;
  bool chunked = false;
  for (auto& [name, value] : all) {
    if (iequals(name, "content-length")) {
      auto n = parse_length(value);
      if (!n || (length && *length != *n)) return fail(malformed("bad Content-Length"));
      length = n;
    } else if (iequals(name, "transfer-encoding")) {
      if (!iequals(value, "chunked") || chunked)
        return fail(malformed("Transfer-Encoding other than chunked: " + value.substr(0, 64)));
      chunked = true;
    } else if (iequals(name, "upgrade")) {
      r.upgrade = value;
    } else if (!is_hop_by_hop(name, connection)) {
      if (iequals(name, "content-type")) r.content_type = value;
      r.headers.emplace_back(std::move(name), std::move(value));
    }
  }
  if (chunked && length) return fail(malformed("both Content-Length and Transfer-Encoding"));
  bool bodiless = method == "HEAD" || r.status < 200 || r.status == 204 || r.status == 304;
  if (bodiless) {
    r.framing = ResponseHead::Framing::kNone;
  } else if (chunked) {
    r.framing = ResponseHead::Framing::kChunked;
  } else if (length) {
    r.framing = ResponseHead::Framing::kLength;
    r.length = *length;
  } else {
    r.framing = ResponseHead::Framing::kUntilClose;
  }
  if (method == "HEAD" && length) r.length = *length;
  return r;
}

Result<std::size_t> ChunkedDecoder::feed(std::string_view in, std::string* out) {
  std::size_t i = 0;
  auto bad = [](const char* what) -> Result<std::size_t> {
    return fail(malformed(std::string("chunked body: ") + what));
  };
  while (i < in.size() && state_ != State::kDone) {
    char c = in[i];
    switch (state_) {
      case State::kSize: {
        if (++line_ > kMaxChunkLine) return bad("chunk size line too long");
        if (c == '\r') {
          if (!size_digits_) return bad("no chunk size");
          state_ = State::kSizeLf;
        } else if (in_extension_) {
          // chunk extensions are ignored
        } else if (c == ';' || c == ' ' || c == '\t') {
          if (!size_digits_) return bad("no chunk size");
          in_extension_ = true;
        } else if (std::isxdigit(static_cast<unsigned char>(c))) {
          if (remaining_ >> 56) return bad("chunk size too large");
          int d = std::isdigit(static_cast<unsigned char>(c))
                      ? c - '0'
                      : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
          remaining_ = remaining_ * 16 + static_cast<std::uint64_t>(d);
          size_digits_ = true;
        } else {
          return bad("bad chunk size");
        }
        ++i;
        break;
      }
      case State::kSizeLf:
        if (c != '\n') return bad("chunk size line not ended by CRLF");
        ++i;
        line_ = 0;
        size_digits_ = false;
        in_extension_ = false;
        state_ = remaining_ == 0 ? State::kTrailer : State::kData;
        break;
      case State::kData: {
        auto n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, in.size() - i));
        out->append(in.data() + i, n);
        i += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        if (c != '\r') return bad("chunk data not followed by CRLF");
        ++i;
        state_ = State::kDataLf;
        break;
      case State::kDataLf:
        if (c != '\n') return bad("chunk data not followed by CRLF");
        ++i;
        state_ = State::kSize;
        break;
      case State::kTrailer:
        if (++trailer_bytes_ > kMaxTrailer) return bad("trailer too long");
        if (c == '\n') return bad("bare LF in the trailer");
        if (c == '\r') {
          final_ = line_ == 0;
          state_ = State::kTrailerLf;
        } else {
          ++line_;
        }
        ++i;
        break;
      case State::kTrailerLf:
        if (c != '\n') return bad("trailer line not ended by CRLF");
        ++i;
        line_ = 0;
        state_ = final_ ? State::kDone : State::kTrailer;
        break;
      case State::kDone: break;
    }
  }
  return i;
}

}  // namespace pvs::service::ports
