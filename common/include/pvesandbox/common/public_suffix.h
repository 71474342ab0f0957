// Egress wildcards against the Public Suffix List (libpsl, its ICANN and private sections): a
// wildcard may reach the names of one owner, never every name under a public suffix.
//
//   egress_wildcard_problem("*.co.uk")      // "*.co.uk: co.uk is a public suffix ..."
//   egress_wildcard_problem("*.example.com") // ""
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pvs {

// "" when `pattern` is no wildcard, or "*.<base>" whose subdomains belong to one owner; else
// why not, in a sentence: <base> is a public suffix (co.uk; github.io, compute.amazonaws.com of
// the private section), or is under a wildcard DNS service that answers any address it spells
// (nip.io, sslip.io: not in the list). Without Public Suffix List data
// every wildcard is refused. `pattern` is a syntactically valid egress name (protocol.h).
std::string egress_wildcard_problem(std::string_view pattern);
// The first problem of any name in `names`, or "".
std::string egress_wildcards_problem(const std::vector<std::string>& names);

}  // namespace pvs
