// What listens in a sandbox (GET /v1/sandboxes/{id}/ports, docs/api.md): the TCP sockets in
// state LISTEN of its network namespace, as the kernel lists them in /proc/net/tcp and
// /proc/net/tcp6. Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pvs::service::ports {

struct ListeningPort {
  std::uint16_t port = 0;
  std::vector<std::string> addresses;  // "0.0.0.0", "127.0.0.1", "::", ...: sorted, unique
};

// The two files' text (either may be empty: no IPv6), ports ascending. A line that does not
// parse is skipped (the header, or the last line of a read cut short). Addresses are read as
// the kernel prints them on a little-endian machine (x86-64 and arm64, where Proxmox runs).
std::vector<ListeningPort> parse_listening(std::string_view tcp4, std::string_view tcp6);

// {"ports":[{"port":8080,"addresses":["0.0.0.0"],"url":"/v1/sandboxes/<id>/ports/8080/"}]}
std::string listening_json(const std::string& sandbox_id, const std::vector<ListeningPort>& ports);

}  // namespace pvs::service::ports
