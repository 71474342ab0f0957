#include "api/mcp/protocol.h"

#include <Poco/String.h>

namespace pvs::service::mcp {

namespace {

constexpr std::string_view kVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequal(std::string_view a, std::string_view b) {
  return Poco::icompare(std::string(a), std::string(b)) == 0;
}

// One media range of an Accept header: "text/*;q=0.5" -> {"text/*", false}.
bool refused_by_q(std::string_view params) {
  while (!params.empty()) {
    auto semi = params.find(';');
    std::string_view p = trim(params.substr(0, semi));
    if (p.size() > 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
      std::string_view v = trim(p.substr(2));
      return v.find_first_not_of("0.") == std::string_view::npos;  // q=0, q=0.0, q=0.000
    }
    if (semi == std::string_view::npos) break;
    params.remove_prefix(semi + 1);
  }
  return false;
}

}  // namespace

std::span<const std::string_view> protocol_versions() {
  return kVersions;
}

bool supported_version(std::string_view v) {
  for (auto known : kVersions)
    if (known == v) return true;
  return false;
}

std::string_view negotiate_version(std::string_view requested) {
  return supported_version(requested) ? requested : kVersions[0];
}

bool batches_allowed(std::string_view version) {
  return version == "2025-03-26";
}

bool accepts(std::string_view accept, std::string_view type) {
  if (trim(accept).empty()) return true;
  auto slash = type.find('/');
  std::string_view major = type.substr(0, slash);
  while (!accept.empty()) {
    auto comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    auto semi = range.find(';');
    std::string_view media = trim(range.substr(0, semi));
    std::string_view params = semi == std::string_view::npos ? "" : range.substr(semi + 1);
    bool match =
        media == "*/*" || iequal(media, type) ||
        (media.size() == major.size() + 2 && iequal(media.substr(0, major.size()), major) &&
         media.substr(major.size()) == "/*");
    if (match && !refused_by_q(params)) return true;
    if (comma == std::string_view::npos) break;
    accept.remove_prefix(comma + 1);
  }
  return false;
}

bool origin_allowed(std::string_view origin, const std::vector<std::string>& allowed) {
  if (origin.empty()) return true;
  for (const auto& a : allowed)
    if (a == "*" || a == origin) return true;
  std::string_view rest;
  if (origin.substr(0, 7) == "http://")
    rest = origin.substr(7);
  else if (origin.substr(0, 8) == "https://")
    rest = origin.substr(8);
  else
    return false;
  std::string_view host;
  if (!rest.empty() && rest[0] == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return false;
    host = rest.substr(0, close + 1);
    rest.remove_prefix(close + 1);
  } else {
    auto end = rest.find_first_of(":/");
    host = rest.substr(0, end);
    rest.remove_prefix(host.size());
  }
  if (!rest.empty() && rest[0] == ':') {
    rest.remove_prefix(1);
    auto digits = rest.find_first_not_of("0123456789");
    if (digits == 0) return false;
    rest.remove_prefix(digits == std::string_view::npos ? rest.size() : digits);
  }
  if (!rest.empty() && rest != "/") return false;
  return iequal(host, "localhost") || host == "127.0.0.1" || host == "[::1]";
}

}  // namespace pvs::service::mcp
