// Small pure helpers of the lifecycle (declared in core.h).
#include <openssl/evp.h>

#include <cctype>
#include <ctime>
#include <random>

#include "core.h"

namespace pvs::lifecycle {

std::int64_t now_unix() {
  return static_cast<std::int64_t>(std::time(nullptr));
}

Error pve_error(const Error& e, std::string_view what) {
  Error out = e;
  out.message = std::string(what) + ": proxmox " + pve::describe(e);
  return out;
}

std::mt19937_64& rng() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return gen;
}

std::string sha256_hex(std::string_view text) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), out, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[out[i] >> 4];
    hex += kHex[out[i] & 15];
  }
  return hex;
}

std::string random_hex(int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < digits; ++i) out += kHex[rng()() % 16];
  return out;
}

// The sandbox's MAC, derived from its address: 02:53:<the four address bytes>, locally
// administered and unicast. The controller chooses it so that it can BIND the port before the
// container starts, and deriving it (rather than drawing it) means an address always comes with
// the same MAC: the node's dnsmasq then hands a reused address to its new container even while
// the previous container's lease runs (it refuses an address leased to a different MAC), and
// neighbours' ARP caches are never stale.
MacAddress mac_for(Ipv4Address address) {
  auto a = address.to_uint();
  return MacAddress(MacAddress::Bytes{
      0x02, 0x53, static_cast<std::uint8_t>(a >> 24), static_cast<std::uint8_t>(a >> 16),
      static_cast<std::uint8_t>(a >> 8), static_cast<std::uint8_t>(a)});
}

bool valid_hostname(std::string_view h) {
  if (h.empty() || h.size() > 63) return false;
  if (h.front() == '-' || h.back() == '-') return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string port_name(int vmid, bool firewall) {
  return firewall ? "fwpr" + std::to_string(vmid) + "p0" : "veth" + std::to_string(vmid) + "i0";
}

// "name=eth0,bridge=vmbr1,hwaddr=..,ip=..": key -> value.
std::map<std::string, std::string> parse_property_string(std::string_view text) {
  std::map<std::string, std::string> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    auto comma = text.find(',', pos);
    auto part =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    auto eq = part.find('=');
    if (eq != std::string_view::npos)
      out[std::string(part.substr(0, eq))] = std::string(part.substr(eq + 1));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

int config_int(const pve::Config& c, const std::string& key, int fallback) {
  auto it = c.find(key);
  if (it == c.end()) return fallback;
  try {
    return std::stoi(it->second);
  } catch (...) {
    return fallback;
  }
}

// The size of a disk property string ("local-lvm:vm-100-disk-0,size=8G") in GiB; 0 if absent.
double size_gib(const std::string& rootfs) {
  auto props = parse_property_string(rootfs);
  auto it = props.find("size");
  if (it == props.end() || it->second.empty()) return 0;
  try {
    double v = std::stod(it->second);
    char unit = it->second.back();
    if (unit == 'T') v *= 1024;
    if (unit == 'M') v /= 1024;
    if (unit == 'K') v /= 1024 * 1024;
    return v;
  } catch (...) {
    return 0;
  }
}

int size_gb(const std::string& rootfs) {
  return static_cast<int>(size_gib(rootfs));
}

Status no_volumes(const SandboxMetadata& md) {
  if (md.volumes.empty()) return {};
  return fail(ErrorCode::kConflict, "sandbox " + md.id + " has volume " + md.volumes[0].volume +
                                        " mounted at " + md.volumes[0].path +
                                        "; a snapshot would include it (docs/api.md, Volumes)");
}

}  // namespace pvs::lifecycle
