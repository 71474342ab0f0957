#include "api/ports/port_policy.h"

#include <vector>

#include "http/json.h"

namespace pvs::service::ports {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decoded(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    int hi = 0, lo = 0;
    if (text[i] == '%' && i + 2 < text.size() && (hi = hex_digit(text[i + 1])) >= 0 &&
        (lo = hex_digit(text[i + 2])) >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

std::string judged_path(std::string_view target) {
  const std::string decoded = percent_decoded(target.substr(0, target.find('?')));
  // Its segments after the first "/", "." and ".." resolved (never above the root); empty ones
  // ("//", a trailing "/") are kept, as the service sees them.
  std::vector<std::string_view> kept;
  bool directory = false;  // it ended in "." or "..": the path is a directory's
  std::string_view rest = std::string_view(decoded).substr(decoded.empty() ? 0 : 1);
  for (bool more = true; more;) {
    const std::size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    more = slash != std::string_view::npos;
    rest = more ? rest.substr(slash + 1) : std::string_view();
    directory = segment == "." || segment == "..";
    if (segment == ".." && !kept.empty()) kept.pop_back();
    if (!directory) kept.push_back(segment);
  }
  std::string path;
  for (auto segment : kept) path.append("/").append(segment);
  if (path.empty() || (directory && path.back() != '/')) path += "/";
  return path;
}

PolicyRequest policy_request(std::uint16_t port, std::string_view method, std::string_view target,
                             std::string_view upgrade) {
  PolicyRequest r;
  r.action = PolicyAction::kPorts;
  r.port = port;
  r.path = judged_path(target);
  r.text = std::string(method) + " " + r.path;
  JsonWriter w;
  w.begin_object().key("method").value(method).key("port").value(static_cast<int>(port));
  w.key("target").value(target).key("upgrade").value(upgrade);
  r.canonical = w.end_object().take();
  return r;
}

}  // namespace pvs::service::ports
