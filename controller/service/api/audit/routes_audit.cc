#include <charconv>

#include "api/audit/audit_routes.h"
#include "api/audit/audit_tail.h"
#include "http/api_error.h"
#include "http/json.h"

namespace pvs::service {
namespace {

constexpr std::size_t kDefaultAuditLimit = 100;
constexpr std::size_t kMaxAuditLimit = 1000;

std::size_t parse_audit_limit(std::string_view text) {
  if (text.empty()) return kDefaultAuditLimit;
  std::size_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > kMaxAuditLimit)
    throw bad_request("limit: an integer in [1, " + std::to_string(kMaxAuditLimit) + "]");
  return n;
}

// A filter value: printable ASCII without quotes or backslashes, at most 128 bytes.
std::string parse_filter(const std::string& name, const std::string& value) {
  if (value.size() > 128) throw bad_request(name + ": at most 128 bytes");
  for (unsigned char c : value) {
    if (c < 0x21 || c > 0x7e || c == '"' || c == '\\')
      throw bad_request(name + ": printable ASCII without quotes or backslashes");
  }
  return value;
}

}  // namespace

void AuditRoutes::tail(RequestContext& ctx) {
  AuditTailOptions o;
  o.limit = parse_audit_limit(ctx.query_value("limit"));
  o.action = parse_filter("action", ctx.query_value("action"));
  o.sandbox = parse_filter("sandbox", ctx.query_value("sandbox"));
  if (audit_file_.empty())
    throw not_found("no audit log: this controller has no audit file configured (audit.file)");
  auto tail = read_audit_tail(audit_file_, o);
  if (!tail) {
    if (tail.error().code == ErrorCode::kNotFound)
      throw not_found("no audit log at " + audit_file_ + " (yet)");
    throw from_error(tail.error());
  }
  JsonWriter w;
  w.begin_object().key("records").begin_array();
  for (const std::string& line : tail->records) w.raw(line);
  w.end_array();
  w.key("truncated").value(tail->truncated);
  w.end_object();
  replies_.send_json(ctx, 200, w.take());
}

}  // namespace pvs::service
