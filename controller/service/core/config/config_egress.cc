// controller.yaml's `egress:` section (named allowlists, the default cap) and the per-token
// caps (auth.tokens[].egress). Names and ports follow pvs::validate_egress_list (egress.h),
// the same rules the API and the agent apply.
#include <sstream>

#include "core/config/config_parts.h"

namespace pvs::service {
namespace {

// A list of names, each checked where it is written.
void names_at(yaml::Map& s, std::string_view key, std::vector<std::string>* out) {
  s.string_list(key, out);
  if (!s.ok()) return;
  for (const auto& n : *out) {
    if (auto ok = validate_egress_name(n); !ok) return s.fail(key, ok.error().message);
  }
}

}  // namespace

void parse_egress(yaml::Map s, ServiceConfig& c) {
  s.integer("max_names", &c.egress.max_names, 1, static_cast<long long>(kMaxEgressNames));
  yaml::Map lists = s.map("lists");
  for (const auto& name : lists.keys()) {
    if (!valid_egress_list_name(name)) {
      lists.fail(name, "a list name is 1-64 of [a-z0-9._-], starting with a letter or digit");
      break;
    }
    yaml::Map l = lists.map(name);
    EgressList list;
    names_at(l, "names", &list.names);
    if (l.ok() && list.names.empty()) l.fail("names", "is required (at least one name)");
    std::vector<long long> ports;
    l.integer_list("ports", &ports, 1, 65535);
    for (auto p : ports) list.ports.push_back(static_cast<std::uint16_t>(p));
    normalize_egress_list(list);
    if (auto ok = validate_egress_list(list); l.ok() && !ok) l.fail("names", ok.error().message);
    (void)l.finish();
    c.egress.lists[name] = std::move(list);
  }
  (void)lists.finish();
  (void)s.finish();
}

void parse_token_egress(yaml::Map s, const ServiceConfig& c, TokenEgressCaps* caps) {
  if (s.has("lists")) {
    caps->lists.emplace();
    s.string_list("lists", &*caps->lists);
    for (const auto& l : *caps->lists) {
      if (s.ok() && !c.egress.lists.count(l))
        s.fail("lists", "no list named " + yaml::quoted_value(l) + " in egress.lists");
    }
  }
  if (s.has("names")) {
    caps->names.emplace();
    names_at(s, "names", &*caps->names);
  }
  s.integer("max_names", &caps->max_names, 0, static_cast<long long>(kMaxEgressNames));
  if (s.has("ports")) {
    std::vector<long long> ports;
    s.integer_list("ports", &ports, 1, 65535);
    caps->ports.clear();
    for (auto p : ports) caps->ports.push_back(static_cast<std::uint16_t>(p));
  }
  (void)s.finish();
}

std::string describe_egress(const ServiceConfig& c) {
  std::ostringstream o;
  for (const auto& [name, list] : c.egress.lists) {
    o << "  egress list " << name << ":";
    for (const auto& n : list.names) o << " " << n;
    o << " ports";
    for (auto p : list.ports) o << " " << p;
    o << "\n";
  }
  for (const auto& t : c.tokens) {
    const auto& e = t.egress;
    if (!e.lists && !e.names && e.max_names == 0) continue;
    o << "  egress caps " << t.name << ":";
    if (e.lists) o << " lists=" << e.lists->size();
    if (e.names) o << " names=" << e.names->size();
    o << " max_names=" << (e.max_names > 0 ? e.max_names : c.egress.max_names) << "\n";
  }
  return o.str();
}

}  // namespace pvs::service
