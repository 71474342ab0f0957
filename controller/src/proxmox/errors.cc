// Error classification, secrets and UPID parsing for the Proxmox client.
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <string>

#include "pvesandbox/proxmox_client.h"

namespace pvs::pve {

std::string_view to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kLocked: return "locked";
    case ErrorKind::kAlreadyExists: return "already_exists";
    case ErrorKind::kAlreadyRunning: return "already_running";
    case ErrorKind::kNotRunning: return "not_running";
    case ErrorKind::kPermissionDenied: return "permission_denied";
    case ErrorKind::kAuthentication: return "authentication";
    case ErrorKind::kInvalidParameters: return "invalid_parameters";
    case ErrorKind::kTransport: return "transport";
    case ErrorKind::kTls: return "tls";
    case ErrorKind::kTaskFailed: return "task_failed";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kNotImplemented: return "not_implemented";
    case ErrorKind::kProtocol: return "protocol";
    case ErrorKind::kServer: return "server";
  }
  return "server";
}

namespace {
ErrorCode code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNotFound: return ErrorCode::kNotFound;
    case ErrorKind::kAlreadyExists: return ErrorCode::kAlreadyExists;
    case ErrorKind::kLocked:
    case ErrorKind::kAlreadyRunning:
    case ErrorKind::kNotRunning: return ErrorCode::kConflict;
    case ErrorKind::kPermissionDenied: return ErrorCode::kPermissionDenied;
    case ErrorKind::kAuthentication: return ErrorCode::kUnauthenticated;
    case ErrorKind::kInvalidParameters: return ErrorCode::kInvalidArgument;
    case ErrorKind::kTransport:
    case ErrorKind::kTls: return ErrorCode::kUnavailable;
    case ErrorKind::kTimeout: return ErrorCode::kTimeout;
    case ErrorKind::kTaskFailed:
    case ErrorKind::kNotImplemented:
    case ErrorKind::kProtocol:
    case ErrorKind::kServer: return ErrorCode::kInternal;
  }
  return ErrorCode::kInternal;
}
}  // namespace

Error make_error(ErrorKind kind, int http_status, std::string message) {
  Error e(code_for(kind), std::move(message));
  e.proxmox = ProxmoxDetail{};
  e.proxmox->kind = kind;
  e.proxmox->http_status = http_status;
  return e;
}

void set_kind(Error& error, ErrorKind kind) {
  if (!error.proxmox) error.proxmox = ProxmoxDetail{};
  error.proxmox->kind = kind;
  error.code = code_for(kind);
}

std::string describe(const Error& error) {
  if (!error.proxmox) return error.to_string();
  const ProxmoxDetail& d = *error.proxmox;
  std::string out(pve::to_string(d.kind));
  out += ": ";
  if (d.http_status > 0) out += std::to_string(d.http_status) + " ";
  out += error.message;
  for (const auto& [param, msg] : d.param_errors) out += " [" + param + ": " + msg + "]";
  if (!d.upid.empty()) out += " (task " + d.upid + ")";
  return out;
}

namespace {
bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}
}  // namespace

ErrorKind classify(int http_status, std::string_view message) {
  if (http_status == 401) return ErrorKind::kAuthentication;
  if (http_status == 403) return ErrorKind::kPermissionDenied;
  if (http_status == 501) return ErrorKind::kNotImplemented;
  if (http_status == 595 || http_status == 596) return ErrorKind::kTransport;
  if (http_status == 400) {
    // Handlers reuse 400 for some state errors (nextid "VM 105 already exists").
    if (contains(message, "already exists")) return ErrorKind::kAlreadyExists;
    return ErrorKind::kInvalidParameters;
  }
  // 500 and task exit statuses: Proxmox's die messages.
  if (contains(message, "is locked") || contains(message, "can't lock file"))
    return ErrorKind::kLocked;
  if (contains(message, "already running")) return ErrorKind::kAlreadyRunning;
  if (contains(message, "not running")) return ErrorKind::kNotRunning;
  if (contains(message, "already exists")) return ErrorKind::kAlreadyExists;
  if (contains(message, "does not exist") || contains(message, "no such"))
    return ErrorKind::kNotFound;
  return ErrorKind::kServer;
}

bool TaskStatus::succeeded() const {
  return status == "stopped" && (exitstatus == "OK" || exitstatus.rfind("WARNINGS: ", 0) == 0);
}

namespace {
pvs::Result<std::string> clean_secret(std::string text, std::string_view where) {
  auto nl = text.find_first_of("\r\n");
  if (nl != std::string::npos) text.resize(nl);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::size_t lead = 0;
  while (lead < text.size() && std::isspace(static_cast<unsigned char>(text[lead]))) ++lead;
  text.erase(0, lead);
  if (text.empty()) return pvs::fail(ErrorCode::kInvalidArgument, std::string(where) + " is empty");
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e)
      return pvs::fail(ErrorCode::kInvalidArgument,
                       std::string(where) + " holds a non-printable character");
  }
  return text;
}
}  // namespace

pvs::Result<std::string> read_secret_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return pvs::fail(ErrorCode::kNotFound, "cannot read token secret file " + path);
  std::string line;
  std::getline(in, line);
  return clean_secret(std::move(line), "token secret file " + path);
}

pvs::Result<std::string> read_secret_env(const std::string& variable) {
  const char* value = std::getenv(variable.c_str());
  if (value == nullptr)
    return pvs::fail(ErrorCode::kNotFound, "environment variable " + variable + " is not set");
  return clean_secret(value, "environment variable " + variable);
}

namespace {
bool parse_hex(std::string_view text, std::size_t min_len, std::size_t max_len, uint64_t* out) {
  if (text.size() < min_len || text.size() > max_len) return false;
  uint64_t value = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      digit = c - 'A' + 10;
    else
      return false;
    value = value * 16 + static_cast<uint64_t>(digit);
  }
  *out = value;
  return true;
}

bool valid_node_name(std::string_view s) {
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s.front())) ||
      !std::isalnum(static_cast<unsigned char>(s.back())))
    return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
  return true;
}

bool valid_field(std::string_view s, bool may_be_empty) {
  if (s.empty()) return may_be_empty;
  for (char c : s)
    if (c == ':' || c == '/' || std::isspace(static_cast<unsigned char>(c))) return false;
  return true;
}
}  // namespace

pvs::Result<Upid> Upid::parse(std::string_view text) {
  auto bad = [&] { return pvs::fail(ErrorCode::kInvalidArgument, "unable to parse worker upid"); };
  if (text.substr(0, 5) != "UPID:" || text.back() != ':') return bad();
  std::vector<std::string_view> parts;
  std::string_view rest = text.substr(5, text.size() - 6);
  while (true) {
    auto colon = rest.find(':');
    parts.push_back(rest.substr(0, colon));
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  if (parts.size() != 7) return bad();
  Upid upid;
  uint64_t pid = 0, pstart = 0, starttime = 0;
  if (!valid_node_name(parts[0]) || !parse_hex(parts[1], 8, 8, &pid) ||
      !parse_hex(parts[2], 8, 9, &pstart) || !parse_hex(parts[3], 8, 8, &starttime) ||
      !valid_field(parts[4], false) || !valid_field(parts[5], true) ||
      !valid_field(parts[6], false))
    return bad();
  upid.node = parts[0];
  upid.pid = static_cast<uint32_t>(pid);
  upid.pstart = pstart;
  upid.starttime = static_cast<uint32_t>(starttime);
  upid.type = parts[4];
  upid.id = parts[5];
  upid.user = parts[6];
  return upid;
}

}  // namespace pvs::pve
