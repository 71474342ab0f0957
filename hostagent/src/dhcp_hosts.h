// dnsmasq static DHCP reservations derived from the agent's bindings (config key
// dhcp_hosts_dir; see docs/agent.md, "DHCP reservations").
//
// One file per bound bridge port, named by the port and holding one dhcp-host line:
//
//   <dir>/veth9100i0:   bc:24:11:2a:3b:4c,10.99.0.7
//
// dnsmasq reads the directory (dhcp-hostsdir=) through inotify: a new or changed file takes
// effect at once, without a signal. Files are written as ".<port>.tmp" (dnsmasq ignores names
// starting with '.') and renamed into place, so dnsmasq never reads half a line. The directory
// is derived state: the agent rewrites it from its bindings at start (mirror), never reads it.
#pragma once

#include <map>
#include <string>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/protocol.h"

namespace pvs::agent {

class DhcpHosts {
 public:
  explicit DhcpHosts(std::string dir) : dir_(std::move(dir)) {}

  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  // "<mac lowercase>,<ipv4>\n"
  static std::string line(const proto::Binding& binding);

  // Writes <dir>/<port> atomically (dot-temp file + rename), mode 0644 whatever the umask.
  Status write(const proto::Binding& binding) const;
  // Removes <dir>/<port>; a file that is not there is success.
  Status remove(const std::string& port) const;
  // Creates the directory (mode 0755) if it is missing; its parent must exist. Sets *created.
  Status ensure_dir(bool* created) const;
  // Makes the directory hold exactly one file per binding with its line: writes files that are
  // missing or differ, deletes every other regular file (and leftover dot-temp files). Stops at
  // the first error.
  Status mirror(const std::map<std::string, proto::Binding>& bindings) const;

 private:
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

}  // namespace pvs::agent
