// The lxc backend: every started CT is an unprivileged LXC container (Debian 12's lxc), made
// from the CT's config as pve-container makes one, as far as the controller can tell.
//
// LXC runs in the node's network namespace (the calling thread's, or nsenter --net into
// `node_netns`; not `ip netns exec`, whose fresh /sys hides the cgroup mounts). LXC's own veth
// setup checks the bridge in /sys/class/net, which shows pvesim's mount namespace's view, so
// the veth pair is made here (host end named like Proxmox's port, on the bridge) and LXC moves
// the other end into the container as a physical interface.
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "backend.h"
#include "backend_util.h"
#include "lxc_config.h"
#include "lxc_disk.h"
#include "lxc_run.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/log.h"
#include "volumes.h"

namespace pvesim {

namespace {

using namespace detail;

using lxc::slurp;

std::string tail(const std::string& text, std::size_t n) {
  return text.size() <= n ? text : text.substr(text.size() - n);
}

// The first directory of `path` (or itself) that others cannot search, or "".
std::string untraversable(const std::string& path) {
  std::string at;
  std::istringstream parts(path);
  for (std::string part; std::getline(parts, part, '/');) {
    if (part.empty()) continue;
    at += "/" + part;
    struct stat st {};
    if (::stat(at.c_str(), &st) == 0 && !(st.st_mode & S_IXOTH)) return at;
  }
  return "";
}

class LxcBackend : public Backend {
 public:
  explicit LxcBackend(NetnsOptions options) : o_(std::move(options)) {}
  ~LxcBackend() override { cleanup(); }

  pvs::Status init() {
    if (::access(o_.authorized_keys.c_str(), R_OK) != 0)
      return pvs::fail(pvs::ErrorCode::kInvalidArgument,
                       "lxc backend: --authorized-keys file missing: " + o_.authorized_keys);
    if (::access((o_.lxc_rootfs + "/usr/sbin/sshd").c_str(), F_OK) != 0)
      return pvs::fail(pvs::ErrorCode::kNotFound, "lxc backend: no template root file system at '" +
                                                      o_.lxc_rootfs +
                                                      "' (build it with scripts/lxc-rootfs)");
    if (run_command({"lxc-start", "--version"}) != 0)
      return pvs::fail(pvs::ErrorCode::kNotFound, "lxc backend: lxc-start not found (apt lxc)");
    if (!o_.node_netns.empty() && ::access(("/run/netns/" + o_.node_netns).c_str(), F_OK) != 0)
      return pvs::fail(pvs::ErrorCode::kNotFound, "no network namespace " + o_.node_netns);
    // The containers' root (uid 100000) must reach its root file system.
    for (const auto& dir : {o_.lxc_dir, o_.lxc_rootfs})
      if (auto closed = untraversable(dir); !closed.empty())
        return pvs::fail(pvs::ErrorCode::kPermissionDenied,
                         "lxc backend: the containers cannot traverse " + closed +
                             " (needs o+x, e.g. chmod 711)");
    lxc_sweep(o_.lxc_dir);  // what killed runs left
    std::mt19937 rng{std::random_device{}()};
    char id[8];
    std::snprintf(id, sizeof id, "%06x", static_cast<unsigned>(rng() & 0xffffff));
    run_id_ = id;
    std::string base = o_.lxc_dir + "/pvesim-lxc";
    ::mkdir(base.c_str(), 0711);
    run_ = base + "/" + run_id_;
    if (::mkdir(run_.c_str(), 0711) != 0)
      return pvs::fail(pvs::errno_error("mkdir " + run_, errno));
    lxc::record_process(run_ + "/owner", ::getpid());
    host_key_ = run_ + "/ssh_host_ed25519_key";
    std::string listing;
    if (run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", host_key_}) !=
            0 ||
        run_command({"ssh-keygen", "-l", "-f", host_key_ + ".pub"}, &listing) != 0 ||
        listing.find("SHA256:") == std::string::npos)
      return pvs::fail(pvs::ErrorCode::kIo, "ssh-keygen failed: " + listing);
    host_key_fp_ = listing.substr(listing.find("SHA256:"), 50);
    return detail::make_bridge(o_, &created_bridge_);
  }

  std::string host_key_fingerprint() const override { return host_key_fp_; }
  std::string host_key_file() const override { return host_key_; }
  std::string run_dir() const override { return run_; }

  std::string clone(int src, int dst, bool full, const std::string& snapname,
                    const std::map<std::string, std::string>& config) override {
    auto s = find(src);
    auto d = get(dst);
    std::scoped_lock lock(d->op);
    d->disk.dir = run_ + "/" + name(dst);
    std::unique_lock<std::mutex> source_lock;
    if (s) source_lock = std::unique_lock(s->op);
    // The source's layers as they are now (a template: its own upper, then what it is over).
    std::vector<std::string> layers{o_.lxc_rootfs};
    if (s) {
      if (!s->disk.mounted && ::access((s->disk.dir + "/disk.img").c_str(), F_OK) == 0)
        if (auto e = lxc::mount_disk(s->disk, 0); !e.empty()) return e;
      if (s->disk.mounted) {
        layers = s->disk.layers();
      } else if (!s->disk.lowers.empty()) {
        layers = s->disk.lowers;  // never written: only what it is over
      }
    }
    if (!full) {
      d->disk.lowers = layers;  // the disk itself is made at the first start, at its size
      return "";
    }
    d->disk.lowers.clear();
    if (auto e = lxc::mount_disk(d->disk, disk_bytes(config)); !e.empty()) return e;
    // A running source's tree as its container sees it (its overlay, or the bind of its root).
    if (s && s->disk.mounted && snapname.empty())
      return lxc::copy_tree(s->disk.rootfs(), d->disk.top());
    // Else the tree its layers show: the snapshot's (pve-container copies the snapshot's volume),
    // or, never started, what it is over.
    if (s && !snapname.empty()) layers = lxc::snapshot_layers(s->disk, snapname);
    std::string view = (s ? s->disk.dir : d->disk.dir) + "/snapview-" + std::to_string(dst);
    return lxc::copy_layers(layers, view, d->disk.top());
  }

  std::string start(int vmid, const std::map<std::string, std::string>& config,
                    const std::string& ipv4) override {
    auto c = get(vmid);
    std::scoped_lock lock(c->op);
    {
      std::scoped_lock state(mutex_);
      if (c->running) return "";
    }
    if (c->disk.dir.empty()) {  // not cloned here (e.g. present at start): over the template
      c->disk.dir = run_ + "/" + name(vmid);
      c->disk.lowers = {o_.lxc_rootfs};
    }
    if (auto e = lxc::mount_disk(c->disk, disk_bytes(config)); !e.empty()) return "disk: " + e;
    auto net0 = net0_of(config);
    lxc::CtSpec spec;
    spec.name = name(vmid);
    spec.dir = c->disk.dir;
    spec.rootfs = c->disk.rootfs();
    spec.hostname = config.count("hostname") ? config.at("hostname") : "CT" + std::to_string(vmid);
    spec.ifname = net0.count("name") ? net0["name"] : "eth0";
    spec.port = port_name(vmid, net0);
    spec.peer = "lx" + std::to_string(vmid) + "c";
    std::string gw = net0["gw"];
    if (gw.empty() && net0["ip"] == "dhcp")
      gw = o_.gateway.empty() ? o_.bridge_cidr.substr(0, o_.bridge_cidr.find('/')) : o_.gateway;
    bool real_dhcp = net0["ip"] == "dhcp" && !o_.dhcp_client.empty();
    if (!real_dhcp) {
      spec.ipv4 = ipv4;
      spec.gateway = ipv4.empty() ? "" : gw;
    }
    spec.memory_mb = number(config, "memory", 512);
    spec.swap_mb = number(config, "swap", 512);
    spec.cores = number(config, "cores", 0);
    spec.first_cpu = vmid;
    spec.cpu_units = number(config, "cpuunits", 0);
    if (auto e = seed(*c, gw.empty() ? o_.bridge_cidr.substr(0, o_.bridge_cidr.find('/')) : gw);
        !e.empty())
      return "rootfs: " + e;
    if (auto e = mount_volumes(*c, config); !e.empty()) return e;
    std::string error = bring_up(*c, spec, lower(net0["hwaddr"]));
    if (!error.empty()) {
      unmount_volumes(*c);
      return error;
    }
    std::string ip = ipv4.substr(0, ipv4.find('/'));
    if (real_dhcp) {
      std::string out;
      ip.clear();
      if (run_command(in_ct(*c, {o_.dhcp_client, "run", spec.ifname}), &out) == 0)
        ip = ct_ipv4(*c, spec.ifname);
      if (ip.empty()) pvs::log::warn("CT " + std::to_string(vmid) + ": no DHCP lease: " + out);
    }
    // Ready when its sshd answers, as the netns backend (a real CT's start task ends earlier).
    if (!ip.empty() && !wait_port(ip, o_.ssh_port, 10000, o_.node_netns)) {
      halt(*c);
      return "sshd did not start in " + spec.name + ": " + tail(slurp(spec.dir + "/log"), 600);
    }
    return "";
  }

  void stop(int vmid) override {
    auto c = find(vmid);
    if (!c) return;
    std::scoped_lock lock(c->op);
    halt(*c);
  }

  void destroy(int vmid) override {
    auto c = find(vmid);
    if (!c) return;
    {
      std::scoped_lock lock(c->op);
      halt(*c);
      lxc::unmount_disk(c->disk);
      if (!c->disk.dir.empty()) run_command({"rm", "-rf", "--one-file-system", c->disk.dir});
    }
    std::scoped_lock state(mutex_);
    cts_.erase(vmid);
  }

  std::vector<LiveInterface> interfaces(int vmid) override {
    auto c = find(vmid);
    std::string out;
    if (!c || run_command(in_ct(*c, {"ip", "-j", "addr", "show"}), &out) != 0) return {};
    return parse_addr_json(out);
  }

  bool alive(int vmid) override {
    auto c = find(vmid);
    if (!c) return true;
    std::scoped_lock state(mutex_);
    if (!c->running || c->pidfd < 0) return true;
    pollfd p{c->pidfd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;  // readable: the init exited
  }

  long long memory_used(int vmid) override {
    pid_t pid = running_init(vmid);
    return pid > 0 ? lxc::cgroup_memory(pid) : -1;
  }

  // As pve-container's hotplug does: the value into the running container's cgroup file.
  std::string set_cpu_units(int vmid, long long units) override {
    pid_t pid = running_init(vmid);
    auto [file, value] = lxc::cpu_weight(units);
    if (pid <= 0 || file.empty()) return "";
    std::string path = lxc::cgroup_file(pid, "cpu", "cpu.shares", "cpu.weight");
    if (path.empty()) return "no " + file + " in the container's cgroup";
    std::ofstream out(path);
    if (!(out << value << std::flush)) return "cannot write " + path;
    return "";
  }

  std::string snapshot(int vmid, const std::string& snap) override {
    auto c = find(vmid);
    if (!c) return "";
    std::scoped_lock lock(c->op);
    return lxc::snapshot(c->disk, snap);
  }
  std::string rollback(int vmid, const std::string& snap) override {
    auto c = find(vmid);
    if (!c) return "";
    std::scoped_lock lock(c->op);
    return lxc::rollback(c->disk, snap);
  }
  void delete_snapshot(int vmid, const std::string& snap) override {
    auto c = find(vmid);
    if (!c) return;
    std::scoped_lock lock(c->op);
    lxc::delete_snapshot(c->disk, snap);
  }

  std::string allocate_volume(int, const std::string& volid, std::uint64_t bytes) override {
    ::mkdir((run_ + "/volumes").c_str(), 0700);
    return lxc::make_volume(image_of(volid), bytes);
  }
  std::string free_volume(int, const std::string& volid) override {
    if (auto e = in_use(volid); !e.empty()) return e;
    ::unlink(image_of(volid).c_str());
    return "";
  }
  std::string resize_volume(int, const std::string& volid, std::uint64_t bytes) override {
    if (auto e = in_use(volid); !e.empty()) return e;
    return lxc::grow_volume(image_of(volid), bytes);
  }

  void cleanup() override {
    std::map<int, std::shared_ptr<Ct>> all;
    {
      std::scoped_lock state(mutex_);
      all.swap(cts_);
    }
    for (auto& [vmid, c] : all) {
      std::scoped_lock lock(c->op);
      halt(*c);
      lxc::unmount_disk(c->disk);
    }
    if (!run_.empty()) lxc::sweep_run(run_);  // also what a failed start left
    run_.clear();
    if (created_bridge_) run_command(host_ip({"link", "del", o_.bridge}));
    created_bridge_ = false;
  }

 private:
  struct Ct {
    int vmid = 0;
    std::mutex op;  // one operation at a time
    lxc::Disk disk;
    // Under the backend's mutex_:
    bool running = false;
    pid_t init = -1;
    int pidfd = -1;
    std::string port, peer;
  };

  // The pid of a running CT's init, else -1.
  pid_t running_init(int vmid) {
    auto c = find(vmid);
    if (!c) return -1;
    std::scoped_lock state(mutex_);
    return c->running ? c->init : -1;
  }
  std::shared_ptr<Ct> find(int vmid) {
    std::scoped_lock state(mutex_);
    auto it = cts_.find(vmid);
    return it == cts_.end() ? nullptr : it->second;
  }
  std::shared_ptr<Ct> get(int vmid) {
    std::scoped_lock state(mutex_);
    auto& slot = cts_[vmid];
    if (!slot) slot = std::make_shared<Ct>();
    slot->vmid = vmid;
    return slot;
  }

  std::string name(int vmid) const { return "pvesim-" + run_id_ + "-" + std::to_string(vmid); }

  static long long number(const std::map<std::string, std::string>& config, const std::string& key,
                          long long fallback) {
    auto it = config.find(key);
    try {
      return it == config.end() ? fallback : std::stoll(it->second);
    } catch (const std::exception&) {
      return fallback;
    }
  }

  static std::uint64_t disk_bytes(const std::map<std::string, std::string>& config) {
    auto it = config.find("rootfs");
    std::string rootfs = it == config.end() ? "" : it->second;
    auto at = rootfs.find("size=");
    if (at == std::string::npos) return 8ull << 30;
    auto end = rootfs.find(',', at);
    auto bytes =
        lxc::parse_size(rootfs.substr(at + 5, end == std::string::npos ? end : end - at - 5));
    return bytes ? bytes : 8ull << 30;
  }

  // argv run in the node's network namespace.
  std::vector<std::string> in_node(std::vector<std::string> argv) const {
    if (!o_.node_netns.empty())
      argv.insert(argv.begin(), {"nsenter", "--net=/run/netns/" + o_.node_netns});
    return argv;
  }
  std::vector<std::string> host_ip(const std::vector<std::string>& args) const {
    return node_ip(o_, args);
  }
  // argv (a program of the node) run in the running CT's network namespace.
  std::vector<std::string> in_ct(const Ct& c, std::vector<std::string> argv) {
    pid_t pid;
    {
      std::scoped_lock state(mutex_);
      pid = c.running ? c.init : -1;
    }
    if (pid <= 0) return {"false"};
    argv.insert(argv.begin(), {"nsenter", "-t", std::to_string(pid), "-n"});
    return argv;
  }

  std::string ct_ipv4(const Ct& c, const std::string& ifname) {
    std::string out;
    if (run_command(in_ct(c, {"ip", "-4", "-o", "addr", "show", "dev", ifname}), &out) != 0)
      return "";
    auto at = out.find(" inet ");
    if (at == std::string::npos) return "";
    at += 6;
    auto ip = out.substr(at, out.find_first_of("/ ", at) - at);
    return pvs::Ipv4Address::parse(ip) ? ip : "";
  }

  // A fresh clone gets the template's host key and the template's authorized_keys for root,
  // as the template's rootfs would have them; and the node's resolver.
  std::string seed(const Ct& c, const std::string& nameserver) {
    const std::string root = c.disk.rootfs();
    if (::access((root + "/etc/ssh/ssh_host_ed25519_key").c_str(), F_OK) == 0) return "";
    std::string err =
        lxc::write_inside(root, "etc/ssh/ssh_host_ed25519_key", slurp(host_key_), 0600);
    if (err.empty())
      err = lxc::write_inside(root, "etc/ssh/ssh_host_ed25519_key.pub", slurp(host_key_ + ".pub"),
                              0644);
    if (err.empty())
      err = lxc::write_inside(root, "root/.ssh/authorized_keys", slurp(o_.authorized_keys), 0600);
    if (err.empty())
      err = lxc::write_inside(root, "etc/resolv.conf", "nameserver " + nameserver + "\n", 0644);
    return err;
  }

  // The bridge port and lxc-start; on failure everything of it is undone.
  std::string bring_up(Ct& c, const lxc::CtSpec& spec, const std::string& hwaddr) {
    std::string out;
    run_command(host_ip({"link", "del", spec.peer}));  // a stale one
    std::ofstream(spec.dir + "/port") << spec.port << " " << spec.peer << " "
                                      << (o_.node_netns.empty() ? "-" : o_.node_netns) << "\n";
    auto fail = [&](const std::string& what) {
      run_command(host_ip({"link", "del", spec.port}));
      return what + ": " + out;
    };
    if (run_command(host_ip({"link", "add", spec.port, "type", "veth", "peer", "name", spec.peer}),
                    &out) != 0)
      return fail("veth");
    if (!hwaddr.empty() &&
        run_command(host_ip({"link", "set", spec.peer, "address", hwaddr}), &out) != 0)
      return fail("hwaddr");
    if (run_command(host_ip({"link", "set", spec.port, "master", o_.bridge, "up"}), &out) != 0)
      return fail("attach to bridge " + o_.bridge);
    std::ofstream(spec.dir + "/config") << lxc::config_text(spec);
    ::unlink((spec.dir + "/log").c_str());
    if (run_command(in_node({"lxc-start", "-P", run_, "-n", spec.name}), &out) != 0) {
      out += tail(slurp(spec.dir + "/log"), 800);
      lxc::remove_cgroups(spec.name);
      return fail("lxc-start");
    }
    std::string pid_text;
    run_command(in_node({"lxc-info", "-P", run_, "-n", spec.name, "-p", "-H"}), &pid_text);
    pid_t pid = std::atoi(pid_text.c_str());
    int pidfd = pid > 0 ? static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)) : -1;
    if (pidfd < 0) {
      run_command(in_node({"lxc-stop", "-P", run_, "-n", spec.name, "-k"}));
      return fail("the container's init is gone (" + pid_text + ")");
    }
    lxc::record_process(spec.dir + "/init", pid);
    std::scoped_lock state(mutex_);
    c.running = true;
    c.init = pid;
    c.pidfd = pidfd;
    c.port = spec.port;
    c.peer = spec.peer;
    return "";
  }

  // Stops the container (a hard stop: init and everything in it are killed) and frees its port.
  void halt(Ct& c) {
    int pidfd;
    std::string port, peer;
    {
      std::scoped_lock state(mutex_);
      if (!c.running) return;
      c.running = false;
      pidfd = c.pidfd;
      c.pidfd = -1;
      c.init = -1;
      port.swap(c.port);
      peer.swap(c.peer);
    }
    std::string ct_name = c.disk.dir.substr(c.disk.dir.rfind('/') + 1);
    // sshd (init) exits on the halt signal at once; -t bounds a stuck one.
    run_command(in_node({"lxc-stop", "-P", run_, "-n", ct_name, "-t", "5"}));
    pollfd p{pidfd, POLLIN, 0};
    ::poll(&p, 1, 5000);
    ::close(pidfd);
    run_command(host_ip({"link", "del", port}));
    run_command(host_ip({"link", "del", peer}));
    ::unlink((c.disk.dir + "/init").c_str());
    lxc::remove_cgroups(ct_name);  // if the monitor has not yet
    unmount_volumes(c);
  }

  // Mount point volumes: <run>/volumes/<storage>_<name>.img, loop-mounted on the mp path inside
  // the CT's root file system before LXC starts (as pve-container's pre-start hook mounts
  // them), read-only with ro=1; one running CT at a time mounts a volume (ext4 is no cluster
  // file system).
  std::string image_of(const std::string& volid) const {
    std::string name = volid;
    std::replace(name.begin(), name.end(), ':', '_');
    std::replace(name.begin(), name.end(), '/', '_');
    return run_ + "/volumes/" + name + ".img";
  }
  std::string in_use(const std::string& volid) {
    std::scoped_lock state(mutex_);
    auto it = mounted_.find(volid);
    if (it == mounted_.end()) return "";
    return "volume '" + volid + "' is in use (mounted by CT " + std::to_string(it->second) + ")";
  }
  std::string mount_volumes(Ct& c, const std::map<std::string, std::string>& config) {
    std::string error;
    for (const auto& [key, mp] : mount_points(config, true)) {
      if (mp.type() != "volume") {
        error = key + ": pvesim: bind and device mount points are not modelled";
        break;
      }
      std::string image = image_of(mp.volume);
      if (::access(image.c_str(), F_OK) != 0) {
        error = "volume '" + mp.volume + "' does not exist";
        break;
      }
      {
        std::scoped_lock state(mutex_);
        auto [it, fresh] = mounted_.emplace(mp.volume, c.vmid);
        if (!fresh && it->second != c.vmid) {
          error = "volume '" + mp.volume + "' is already mounted by CT " +
                  std::to_string(it->second) + " (an ext4 volume is mounted once)";
          break;
        }
      }
      const std::string& path = mp.options.at("mp");
      // `mount -o loop` reuses a loop device still attached to the image (even a read-only
      // one, mounting read-only then): none may be left from an earlier mount.
      error = lxc::release_loops(image, std::chrono::seconds(1));
      if (!error.empty()) {  // not this CT's mount: unmount_volumes must not wait for it again
        std::scoped_lock state(mutex_);
        mounted_.erase(mp.volume);
        break;
      }
      error = lxc::make_dir_inside(c.disk.rootfs(), path);
      std::string out;
      if (error.empty() && run_command({"mount", "-o", mp.read_only() ? "loop,ro" : "loop", image,
                                        c.disk.rootfs() + "/" + path},
                                       &out) != 0)
        error = "mount " + key + " (" + mp.volume + "): " + out;
      if (!error.empty()) break;
    }
    if (!error.empty()) unmount_volumes(c);
    return error;
  }
  // What mount_volumes mounted (everything under the root file system on the node).
  // A volume counts as unmounted once its loop device is gone too: a resize or the next CT's
  // mount would otherwise meet the old device (a CT that mounted the volume after a resize saw
  // its old size: an lxc_volume_test run under the sanitizers' load).
  void unmount_volumes(Ct& c) {
    for (const auto& p : lxc::mounts_under(c.disk.rootfs()))
      if (run_command({"umount", p}) != 0) run_command({"umount", "-l", p});
    std::vector<std::string> volumes;
    {
      std::scoped_lock state(mutex_);
      for (const auto& [volid, vmid] : mounted_)
        if (vmid == c.vmid) volumes.push_back(volid);
    }
    for (const auto& volid : volumes)
      if (auto e = lxc::release_loops(image_of(volid), std::chrono::seconds(10)); !e.empty())
        pvs::log::warn("CT " + std::to_string(c.vmid) + ": " + e);
    std::scoped_lock state(mutex_);
    for (auto it = mounted_.begin(); it != mounted_.end();)
      it = it->second == c.vmid ? mounted_.erase(it) : std::next(it);
  }

  // The bridge port Proxmox would create (see the netns backend).
  static std::string port_name(int vmid, const std::map<std::string, std::string>& net0) {
    auto fw = net0.find("firewall");
    bool firewall = fw != net0.end() && fw->second == "1";
    return (firewall ? "fwpr" : "veth") + std::to_string(vmid) + (firewall ? "p0" : "i0");
  }

  NetnsOptions o_;
  std::string run_id_, run_, host_key_, host_key_fp_;
  bool created_bridge_ = false;
  std::mutex mutex_;
  std::map<int, std::shared_ptr<Ct>> cts_;
  std::map<std::string, int> mounted_;  // volume ID -> the CT mounting it (under mutex_)
};

}  // namespace

pvs::Result<std::unique_ptr<Backend>> make_lxc_backend(const NetnsOptions& options) {
  auto backend = std::make_unique<LxcBackend>(options);
  if (auto ok = backend->init(); !ok) return pvs::fail(ok.error());
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace pvesim
