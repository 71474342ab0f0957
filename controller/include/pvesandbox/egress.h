// A sandbox's egress (issue #20): off, on (all HTTP/HTTPS, the agent's ALLOW set), or an
// allowlist of DNS names and ports enforced on the node (the agent's EGRESS verb, its resolver
// and the ruleset's pair set; docs/architecture.md, "Egress by domain").
//
//   pvs::Egress e = pvs::Egress::allow({"pypi.org", "*.github.com"});    // ports 80, 443
//   if (auto ok = pvs::validate_egress(e); !ok) ...                       // kInvalidArgument
//
// The name rules are the agent's (docs/protocol.md, EGRESS), checked here once for the library,
// the service's configuration and its API: lower-case DNS names of LDH labels (1-63 bytes each,
// at least two labels, 253 bytes in all), or "*." and such a name (its subdomains, not the
// name itself). At most kMaxEgressNames names and kMaxEgressPorts ports (1-65535). The names of
// one list take at most kMaxEgressNamesBytes bytes (commas included): the list is recorded in
// the container's description, which Proxmox limits to 8192 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs {

inline constexpr std::size_t kMaxEgressNames = 64;
inline constexpr std::size_t kMaxEgressPorts = 16;
inline constexpr std::size_t kMaxEgressNamesBytes = 2048;
inline constexpr std::size_t kMaxEgressName = 253;

// The ports a list without ports gets: HTTP and HTTPS.
inline const std::vector<std::uint16_t> kDefaultEgressPorts{80, 443};

// Names and ports as the agent's EGRESS takes them; normalised (normalize_egress_list):
// names sorted and unique, ports sorted and unique.
struct EgressList {
  std::vector<std::string> names;
  std::vector<std::uint16_t> ports;
  bool operator==(const EgressList&) const = default;
};

struct Egress {
  enum class Mode { kOff, kOn, kAllowlist };
  Mode mode = Mode::kOff;
  EgressList list;        // kAllowlist only
  std::string list_name;  // kAllowlist: the operator's named list it came from ("" if none)

  static Egress off() { return {}; }
  static Egress on() { return Egress{Mode::kOn, {}, {}}; }
  // A list of names; no ports: kDefaultEgressPorts. Normalised.
  static Egress allow(std::vector<std::string> names, std::vector<std::uint16_t> ports = {},
                      std::string list_name = {});

  bool allowlist() const { return mode == Mode::kAllowlist; }
  bool operator==(const Egress&) const = default;
};

// The name of an operator's named list: 1-64 of [a-z0-9._-], starting with a letter or digit.
bool valid_egress_list_name(std::string_view name);

// "off", "on" or "allowlist".
std::string_view to_string(Egress::Mode mode);

// True for an address rather than a DNS name: an IPv6 address or a CIDR block (a ':' or a '/'),
// or a dotted entry whose last label is a number (all digits, or 0x and hex digits, as URL
// parsers and inet_aton read "203.0.113.11", "10.1" or "1.0x7f"): no top-level domain is
// numeric. Egress allowlists are by name; every way in refuses these with one message.
bool egress_entry_is_address(std::string_view entry);

// One name: lower-case LDH labels, or "*." + such a name whose subdomains belong to one owner
// (not at a public suffix: egress_wildcard_problem, common/public_suffix.h), and no address
// (egress_entry_is_address); kInvalidArgument says why not.
Status validate_egress_name(std::string_view name);
// Sorts and deduplicates names and ports; empty ports become kDefaultEgressPorts.
void normalize_egress_list(EgressList& list);
// Every name (validate_egress_name) and port, and the limits (at least one name): a list to set.
Status validate_egress_list(const EgressList& list);
// The same but for the Public Suffix List: a list read back (a sandbox's metadata, the agent's
// EGRESSES), which may have been set before wildcards at public suffixes were refused.
Status validate_stored_egress_list(const EgressList& list);
// kOff/kOn: an empty list; kAllowlist: validate_egress_list.
Status validate_egress(const Egress& egress);

}  // namespace pvs
