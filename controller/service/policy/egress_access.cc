#include "policy/egress_access.h"

#include <algorithm>

#include "http/json.h"

namespace pvs::service {
namespace {

const TokenConfig* token_config(const ServiceConfig& c, std::string_view token) {
  for (const auto& t : c.tokens)
    if (t.name == token) return &t;
  return nullptr;
}

ApiError forbidden(std::string message) {
  return ApiError{403, "permission_denied", std::move(message)};
}

}  // namespace

bool egress_name_covered(std::string_view name, std::string_view allowed) {
  if (name == allowed) return true;
  if (!allowed.starts_with("*.")) return false;
  auto suffix = allowed.substr(1);  // ".example.com"
  return name.size() > suffix.size() && name.ends_with(suffix);
}

ApiResult<Egress> resolve_egress(const EgressRequest& r, const ServiceConfig& c,
                                 std::string_view token) {
  const TokenConfig* t = token_config(c, token);
  switch (r.kind) {
    case EgressRequest::Kind::kOff: return Egress::off();
    case EgressRequest::Kind::kOn: return Egress::on();
    case EgressRequest::Kind::kList: {
      auto it = c.egress.lists.find(r.list);
      if (it == c.egress.lists.end())
        return tl::unexpected(bad_request("internet.list: no egress list named " + r.list));
      if (t && t->egress.lists &&
          std::find(t->egress.lists->begin(), t->egress.lists->end(), r.list) ==
              t->egress.lists->end())
        return tl::unexpected(
            forbidden("token " + std::string(token) + " may not use the egress list " + r.list));
      return Egress::allow(it->second.names, it->second.ports, r.list);
    }
    case EgressRequest::Kind::kAllow: break;
  }
  Egress e = Egress::allow(r.names, r.ports);
  if (auto ok = validate_egress(e); !ok)
    return tl::unexpected(bad_request("internet.allow: " + ok.error().message));
  int max = t && t->egress.max_names > 0 ? t->egress.max_names : c.egress.max_names;
  if (e.list.names.size() > static_cast<std::size_t>(max))
    return tl::unexpected(forbidden("token " + std::string(token) + " may ask for at most " +
                                    std::to_string(max) + " egress names"));
  // Ports: the token's cap (default 80 and 443, what "internet on" opens).
  const std::vector<std::uint16_t> default_ports = TokenEgressCaps{}.ports;
  const auto& ports = t ? t->egress.ports : default_ports;
  for (auto p : e.list.ports) {
    if (std::find(ports.begin(), ports.end(), p) == ports.end()) {
      std::string allowed;
      for (auto q : ports) allowed += (allowed.empty() ? "" : ",") + std::to_string(q);
      return tl::unexpected(forbidden("token " + std::string(token) + " may not ask for port " +
                                      std::to_string(p) +
                                      " (auth.tokens[].egress.ports: " + allowed + ")"));
    }
  }
  if (t && t->egress.names) {
    for (const auto& n : e.list.names) {
      bool covered = false;
      for (const auto& a : *t->egress.names) covered = covered || egress_name_covered(n, a);
      if (!covered)
        return tl::unexpected(
            forbidden("token " + std::string(token) + " may not ask for egress to " + n));
    }
  }
  return e;
}

void set_policy_egress(PolicyRequest& r, const Egress& e) {
  r.internet = e.mode != Egress::Mode::kOff;
  r.egress = std::string(to_string(e.mode));
  r.egress_names = e.list.names;
  r.egress_list = e.list_name;
  r.egress_ports = e.allowlist() ? e.list.ports : std::vector<std::uint16_t>{};
}

std::string egress_json(const Egress& e) {
  if (e.mode == Egress::Mode::kOff) return "false";
  if (e.mode == Egress::Mode::kOn) return "true";
  JsonWriter w;
  w.begin_object().key("allow").begin_array();
  for (const auto& n : e.list.names) w.value(n);
  w.end_array().key("ports").begin_array();
  for (auto p : e.list.ports) w.value(static_cast<int>(p));
  w.end_array();
  if (!e.list_name.empty()) w.key("list").value(e.list_name);
  w.end_object();
  return w.take();
}

}  // namespace pvs::service
