// Container backends of pvesim: what "running" means for a container.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pvesandbox/common/error.h"
#include "sim.h"

namespace pvesim {

struct LiveInterface {
  std::string name, hwaddr;
  std::vector<std::string> addresses;  // "addr/prefix", IPv4 and IPv6
};

// Thread-safe: start and stop run without the simulator's state lock, from several task
// threads at once.
class Backend {
 public:
  virtual ~Backend() = default;
  // ipv4 is "addr/prefix" from net0 (static ip= or a lease), or "". Returns "" or an error.
  virtual std::string start(int vmid, const std::map<std::string, std::string>& config,
                            const std::string& ipv4) = 0;
  virtual void stop(int vmid) = 0;
  // The container is deleted: what it kept between starts (its /etc/ssh) goes too.
  virtual void destroy(int /*vmid*/) {}
  virtual std::vector<LiveInterface> interfaces(int vmid) = 0;
  virtual void cleanup() {}
  // The template's SSH host key fingerprint ("SHA256:..."), which every clone starts with; ""
  // without sshd.
  virtual std::string host_key_fingerprint() const { return ""; }
  virtual std::string host_key_file() const { return ""; }  // the private key; .pub beside it
  // The CT lives on `node` (from its creation on; a cluster backend routes by it).
  virtual void place(int /*vmid*/, const std::string& /*node*/) {}
};

// The backend of options.backend: one node as today, or (netns, several nodes) a backend per
// node whose CTs all start with the first node's template host key.
pvs::Result<std::unique_ptr<Backend>> make_backend(const Options& options);

// The netns backend of one node. With `key_from`, its CTs get that backend's template host key
// (host_key_file) instead of a new one.
pvs::Result<std::unique_ptr<Backend>> make_netns_backend(const NetnsOptions& options,
                                                         const Backend* key_from = nullptr);

// Routes each CT to the backend of its node (see place(); unplaced CTs go to the first).
// The first backend is cleaned up last (the others may use its host key).
std::unique_ptr<Backend> make_cluster_backend(
    std::vector<std::pair<std::string, std::unique_ptr<Backend>>> nodes);

// Runs argv (no shell); returns the exit status (-1 if it could not run). Output in *out.
int run_command(const std::vector<std::string>& argv, std::string* out = nullptr);

}  // namespace pvesim
