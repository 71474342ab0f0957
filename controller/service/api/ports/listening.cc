#include "api/ports/listening.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

#include "http/json.h"

namespace pvs::service::ports {
namespace {

constexpr std::string_view kListen = "0A";  // TCP_LISTEN in the kernel's st column

std::optional<std::uint32_t> hex32(std::string_view s) {
  if (s.empty() || s.size() > 8) return std::nullopt;
  std::uint32_t v = 0;
  for (char c : s) {
    int d = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                     : -1;
    if (d < 0) return std::nullopt;
    v = (v << 4) | static_cast<std::uint32_t>(d);
  }
  return v;
}

// "0100007F" (tcp) or four such words (tcp6): each word is the address's bytes as the kernel
// holds them, printed as a host-order integer.
std::optional<std::string> address(std::string_view hex) {
  if (hex.size() != 8 && hex.size() != 32) return std::nullopt;
  std::array<unsigned char, 16> bytes{};
  for (std::size_t w = 0; w < hex.size() / 8; ++w) {
    auto v = hex32(hex.substr(w * 8, 8));
    if (!v) return std::nullopt;
    for (int b = 0; b < 4; ++b) bytes[w * 4 + b] = static_cast<unsigned char>(*v >> (8 * b));
  }
  char text[INET6_ADDRSTRLEN];
  int family = hex.size() == 8 ? AF_INET : AF_INET6;
  if (::inet_ntop(family, bytes.data(), text, sizeof text) == nullptr) return std::nullopt;
  return std::string(text);
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size() && out.size() < 4) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

void scan(std::string_view text, std::map<std::uint16_t, std::set<std::string>>& found) {
  while (!text.empty()) {
    auto nl = text.find('\n');
    auto line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    auto f = fields(line);  // "sl:", local "ADDR:PORT", remote, st
    if (f.size() < 4 || f[3] != kListen) continue;
    auto colon = f[1].find(':');
    if (colon == std::string_view::npos) continue;
    auto port = hex32(f[1].substr(colon + 1));
    auto addr = address(f[1].substr(0, colon));
    if (!port || *port == 0 || *port > 65535 || f[1].size() - colon - 1 != 4 || !addr) continue;
    found[static_cast<std::uint16_t>(*port)].insert(*addr);
  }
}

}  // namespace

std::vector<ListeningPort> parse_listening(std::string_view tcp4, std::string_view tcp6) {
  std::map<std::uint16_t, std::set<std::string>> found;
  scan(tcp4, found);
  scan(tcp6, found);
  std::vector<ListeningPort> out;
  for (auto& [port, addrs] : found) out.push_back({port, {addrs.begin(), addrs.end()}});
  return out;
}

std::string listening_json(const std::string& id, const std::vector<ListeningPort>& ports) {
  JsonWriter w;
  w.begin_object().key("ports").begin_array();
  for (const auto& p : ports) {
    w.begin_object().key("port").value(static_cast<int>(p.port)).key("addresses").begin_array();
    for (const auto& a : p.addresses) w.value(a);
    w.end_array().key("url").value("/v1/sandboxes/" + id + "/ports/" + std::to_string(p.port) +
                                   "/");
    w.end_object();
  }
  return w.end_array().end_object().take();
}

}  // namespace pvs::service::ports
