// The Egress value and its validation (egress.h): one place for the library, the service's
// configuration and its API.
#include <algorithm>

#include "pvesandbox/common/public_suffix.h"
#include "pvesandbox/common/text.h"
#include "pvesandbox/egress.h"

namespace pvs {
namespace {

tl::unexpected<Error> invalid(std::string message) {
  return fail(ErrorCode::kInvalidArgument, std::move(message));
}

bool ldh(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

// A DNS name of at least two LDH labels (no wildcard); the reason it is not, or "".
std::string name_problem(std::string_view name) {
  if (name.empty()) return "empty";
  if (name.size() > kMaxEgressName) return "longer than 253 bytes";
  std::size_t labels = 0;
  std::size_t start = 0;
  while (start <= name.size()) {
    auto dot = name.find('.', start);
    auto label = name.substr(start, dot == std::string_view::npos ? name.npos : dot - start);
    if (label.empty()) return "has an empty label";
    if (label.size() > 63) return "has a label longer than 63 bytes";
    for (char c : label)
      if (!ldh(c)) return "may hold only a-z 0-9 - and dots (lower case)";
    if (label.front() == '-' || label.back() == '-') return "has a label that starts or ends in -";
    ++labels;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (labels < 2) return "needs at least two labels";
  return "";
}

// The syntax of one name (of a wildcard: of its base).
Status check_syntax(std::string_view name) {
  auto problem = name_problem(name.starts_with("*.") ? name.substr(2) : name);
  if (problem.empty()) return {};
  return invalid("egress name " + pvs::quoted(name) + " " + problem +
                 " (a lower-case DNS name, or *. and one for its subdomains)");
}

Status address_refused(std::string_view name) {
  return invalid("egress name " + pvs::quoted(name) +
                 " is an address: egress allowlists are by DNS name (the node's resolver "
                 "answers the names listed and lets through the addresses it answered); give a "
                 "domain such as \"pypi.org\" or \"*.github.com\"");
}

}  // namespace

bool egress_entry_is_address(std::string_view entry) {
  if (entry.find_first_of(":/") != std::string_view::npos) return true;
  if (entry.ends_with('.')) entry.remove_suffix(1);  // "203.0.113.11." is one too
  auto top = entry.substr(entry.rfind('.') + 1);     // no dot: the whole entry
  auto all_of = [](std::string_view s, std::string_view set) {
    return !s.empty() && s.find_first_not_of(set) == std::string_view::npos;
  };
  if (all_of(top, "0123456789")) return true;
  return top.size() >= 2 && top[0] == '0' && (top[1] == 'x' || top[1] == 'X') &&
         (top.size() == 2 || all_of(top.substr(2), "0123456789abcdefABCDEF"));
}

Egress Egress::allow(std::vector<std::string> names, std::vector<std::uint16_t> ports,
                     std::string list_name) {
  Egress e{Mode::kAllowlist, EgressList{std::move(names), std::move(ports)}, std::move(list_name)};
  normalize_egress_list(e.list);
  return e;
}

bool valid_egress_list_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] == '.' || name[0] == '_' || name[0] == '-')
    return false;
  for (char c : name)
    if (!ldh(c) && c != '.' && c != '_') return false;
  return true;
}

std::string_view to_string(Egress::Mode mode) {
  switch (mode) {
    case Egress::Mode::kOff: return "off";
    case Egress::Mode::kOn: return "on";
    case Egress::Mode::kAllowlist: return "allowlist";
  }
  return "off";
}

Status validate_egress_name(std::string_view name) {
  if (egress_entry_is_address(name)) return address_refused(name);
  // First the Public Suffix List: "*.com" is refused as a public suffix, not for its one label.
  if (auto why = egress_wildcard_problem(name); !why.empty()) return invalid(why);
  return check_syntax(name);
}

void normalize_egress_list(EgressList& list) {
  std::sort(list.names.begin(), list.names.end());
  list.names.erase(std::unique(list.names.begin(), list.names.end()), list.names.end());
  if (list.ports.empty()) list.ports = kDefaultEgressPorts;
  std::sort(list.ports.begin(), list.ports.end());
  list.ports.erase(std::unique(list.ports.begin(), list.ports.end()), list.ports.end());
}

Status validate_egress_list(const EgressList& list) {
  if (auto ok = validate_stored_egress_list(list); !ok) return ok;
  // Not in the stored check: a list recorded before addresses were refused still reads back.
  for (const auto& n : list.names)
    if (egress_entry_is_address(n)) return address_refused(n);
  if (auto why = egress_wildcards_problem(list.names); !why.empty()) return invalid(why);
  return {};
}

Status validate_stored_egress_list(const EgressList& list) {
  if (list.names.empty()) return invalid("an egress allowlist needs a name");
  if (list.names.size() > kMaxEgressNames)
    return invalid("an egress allowlist holds at most " + std::to_string(kMaxEgressNames) +
                   " names");
  if (list.ports.size() > kMaxEgressPorts)
    return invalid("an egress allowlist holds at most " + std::to_string(kMaxEgressPorts) +
                   " ports");
  std::size_t bytes = 0;
  for (const auto& n : list.names) {
    if (auto ok = check_syntax(n); !ok) return ok;
    bytes += n.size() + 1;
  }
  if (bytes - 1 > kMaxEgressNamesBytes)
    return invalid("the names of an egress allowlist take at most " +
                   std::to_string(kMaxEgressNamesBytes) + " bytes");
  for (auto p : list.ports)
    if (p == 0) return invalid("egress port 0: ports are 1-65535");
  return {};
}

Status validate_egress(const Egress& egress) {
  if (egress.mode != Egress::Mode::kAllowlist) {
    if (!egress.list.names.empty() || !egress.list.ports.empty())
      return invalid("only an allowlist has names and ports");
    return {};
  }
  return validate_egress_list(egress.list);
}

}  // namespace pvs
