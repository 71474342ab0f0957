#include "pvesandbox/common/public_suffix.h"

#include <libpsl.h>

#include <array>

namespace pvs {
namespace {

// Wildcard DNS services: every name under them answers the address it spells
// (10.0.0.1.nip.io -> 10.0.0.1), so a wildcard under them is "any address". They are not in the
// Public Suffix List.
constexpr std::array<std::string_view, 4> kAnyAddress{"nip.io", "sslip.io", "xip.io", "traefik.me"};

// The list libpsl holds: the newer of its built-in copy and the system's (Debian: the
// publicsuffix package); null when there is none. Loaded once, kept for the process's life.
const psl_ctx_t* suffixes() {
  static const psl_ctx_t* const psl = [] {
    const psl_ctx_t* latest = psl_latest(nullptr);
    return latest ? latest : psl_builtin();
  }();
  return psl;
}

bool under(std::string_view name, std::string_view domain) {
  return name == domain || (name.size() > domain.size() && name.ends_with(domain) &&
                            name[name.size() - domain.size() - 1] == '.');
}

}  // namespace

std::string egress_wildcard_problem(std::string_view pattern) {
  if (!pattern.starts_with("*.")) return "";
  std::string base(pattern.substr(2));
  std::string head = std::string(pattern) + ": ";
  std::string tail = "; list the hosts, or a wildcard under one owner's domain (*.example.com)";
  for (auto domain : kAnyAddress) {
    if (under(base, domain)) {
      return head + std::string(domain) +
             " is a wildcard DNS service whose names resolve to any address they spell" + tail;
    }
  }
  const psl_ctx_t* psl = suffixes();
  if (!psl) return head + "no Public Suffix List to check wildcards against" + tail;
  if (psl_is_public_suffix2(psl, base.c_str(), PSL_TYPE_ANY)) {
    bool icann = psl_is_public_suffix2(psl, base.c_str(), PSL_TYPE_ICANN);
    return head + base + " is a public suffix (Public Suffix List, " +
           (icann ? "ICANN" : "private") + " section): its subdomains belong to different owners" +
           tail;
  }
  return "";
}

std::string egress_wildcards_problem(const std::vector<std::string>& names) {
  for (const auto& n : names) {
    if (auto why = egress_wildcard_problem(n); !why.empty()) return why;
  }
  return "";
}

}  // namespace pvs
