// Helpers the container backends share (backend.cc, lxc_backend.cc).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "backend.h"
#include "pvesandbox/common/error.h"
#include "sim.h"

namespace pvesim::detail {

// net0's property string as key -> value ("" map without net0).
std::map<std::string, std::string> net0_of(const std::map<std::string, std::string>& config);
std::string lower(std::string s);
// The first IPv4 address of `ifname` in namespace `ns` ("" if none).
std::string first_ipv4(const std::string& ns, const std::string& ifname);
// Starts argv (no shell) with stdin in_fd (-1: /dev/null) and stdout+stderr on out_fd (-1:
// /dev/null).
pid_t spawn(const std::vector<std::string>& argv, int out_fd, int in_fd = -1);
// `ip -j addr show` output as interfaces.
std::vector<LiveInterface> parse_addr_json(const std::string& json);
// Polls until something accepts TCP connections on ip:port, seen from network namespace
// `netns` (/run/netns/<netns>; "": the calling thread's).
bool wait_port(const std::string& ip, int port, int timeout_ms, const std::string& netns);
// `ip ARGS` acting on the node's namespace (o.node_netns), or on ours when that is "".
std::vector<std::string> node_ip(const NetnsOptions& o, const std::vector<std::string>& args);
// The node's bridge o.bridge unless it exists (created: with o.bridge_cidr and a fixed MAC,
// *created set; or kNotFound without o.create_bridge).
pvs::Status make_bridge(const NetnsOptions& o, bool* created);

}  // namespace pvesim::detail
