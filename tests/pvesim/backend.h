// Container backends of pvesim: what "running" means for a container.
#pragma once

#include <cstdint>
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
  // The lxc backend: the directory of this run's containers (lxc_run.h); "" for the others.
  virtual std::string run_dir() const { return ""; }
  // The CT lives on `node` (from its creation on; a cluster backend routes by it).
  virtual void place(int /*vmid*/, const std::string& /*node*/) {}
  // The storage part of a clone task (no state lock held): `dst` gets a root file system of its
  // own, a copy-on-write layer over `src`'s (linked) or a copy (full). A full clone with
  // `snapname` (a snapshot of src the simulator knows; "" = none) copies src as it was at that
  // snapshot. `config` is dst's. Returns "" or an error.
  virtual std::string clone(int /*src*/, int /*dst*/, bool /*full*/,
                            const std::string& /*snapname*/,
                            const std::map<std::string, std::string>& /*config*/) {
    return "";
  }
  // Whether a CT started here still runs (false: its init died; the simulator then shows it
  // stopped, as pvestatd does).
  virtual bool alive(int /*vmid*/) { return true; }
  // Memory the running CT uses now, in bytes (its memory cgroup); -1 = not measured.
  virtual long long memory_used(int /*vmid*/) { return -1; }
  // A running CT's `cpuunits` changed (0: deleted, the default again): "" or an error.
  virtual std::string set_cpu_units(int /*vmid*/, long long /*units*/) { return ""; }
  // The storage part of snapshot tasks ("" or an error); the CT is stopped for a rollback.
  virtual std::string snapshot(int /*vmid*/, const std::string& /*name*/) { return ""; }
  virtual std::string rollback(int /*vmid*/, const std::string& /*name*/) { return ""; }
  virtual void delete_snapshot(int /*vmid*/, const std::string& /*name*/) {}
  // Mount point volumes (volumes.h), for CT `vmid` (the one whose config names it). Allocation
  // (at the config write, under the state lock) makes the volume at once, formatted for the
  // CTs' root (pve-container's alloc_disk + mkfs); free (destroy, delete=unusedN; state lock)
  // deletes it; resize (the task's work, no lock) grows it and its file system. Free and resize
  // fail while a running CT mounts it. Each returns "" or an error; the lxc backend makes them
  // ext4 images, the others nothing.
  virtual std::string allocate_volume(int /*vmid*/, const std::string& /*volid*/,
                                      std::uint64_t /*bytes*/) {
    return "";
  }
  virtual std::string free_volume(int /*vmid*/, const std::string& /*volid*/) { return ""; }
  virtual std::string resize_volume(int /*vmid*/, const std::string& /*volid*/,
                                    std::uint64_t /*bytes*/) {
    return "";
  }
};

// The backend of options.backend: one node as today, or (netns, several nodes) a backend per
// node whose CTs all start with the first node's template host key.
pvs::Result<std::unique_ptr<Backend>> make_backend(const Options& options);

// The netns backend of one node. With `key_from`, its CTs get that backend's template host key
// (host_key_file) instead of a new one.
pvs::Result<std::unique_ptr<Backend>> make_netns_backend(const NetnsOptions& options,
                                                         const Backend* key_from = nullptr);

// The lxc backend of one node: every started CT is an unprivileged LXC container (lxc_backend.cc).
pvs::Result<std::unique_ptr<Backend>> make_lxc_backend(const NetnsOptions& options);

// Removes what lxc backends of processes that no longer run left under `dir` (NetnsOptions::
// lxc_dir): their containers, cgroups, mounts, bridge ports and files. Returns how many runs.
int lxc_sweep(const std::string& dir);

// Routes each CT to the backend of its node (see place(); unplaced CTs go to the first).
// The first backend is cleaned up last (the others may use its host key).
std::unique_ptr<Backend> make_cluster_backend(
    std::vector<std::pair<std::string, std::unique_ptr<Backend>>> nodes);

// Runs argv (no shell) with stdin in_fd (-1: /dev/null); returns the exit status (-1 if it
// could not run). Output in *out.
int run_command(const std::vector<std::string>& argv, std::string* out = nullptr, int in_fd = -1);

}  // namespace pvesim
