// The model backend (state only) and the netns backend (a namespace + veth + sshd per CT).
#include "backend.h"
#include "backend_util.h"
#include "key_reload.h"
#include "netns_exec.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/common/log.h"
#include "schema.h"

extern char** environ;

namespace pvesim {

namespace detail {

std::map<std::string, std::string> net0_of(const std::map<std::string, std::string>& config) {
  std::map<std::string, std::string> parts;
  auto it = config.find("net0");
  if (it == config.end()) return parts;
  std::string error;
  parse_property_string(it->second, "", &parts, &error);
  return parts;
}

// fe80::/64 address from a MAC (modified EUI-64), as the kernel derives it.
std::string link_local(const std::string& mac) {
  unsigned int b[6] = {};
  if (std::sscanf(mac.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
    return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "fe80::%x:%x:%x:%x/64", ((b[0] ^ 2) << 8) | b[1],
                (b[2] << 8) | 0xff, 0xfe00 | b[3], (b[4] << 8) | b[5]);
  return buf;
}

// The first IPv4 address of `ifname` in namespace `ns` ("" if none).
std::string first_ipv4(const std::string& ns, const std::string& ifname) {
  std::string out;
  if (run_command({"ip", "-n", ns, "-4", "-o", "addr", "show", "dev", ifname}, &out) != 0)
    return "";
  auto at = out.find(" inet ");
  if (at == std::string::npos) return "";
  at += 6;
  auto end = out.find_first_of("/ ", at);
  auto ip = out.substr(at, end == std::string::npos ? std::string::npos : end - at);
  return pvs::Ipv4Address::parse(ip) ? ip : "";
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

pid_t spawn(const std::vector<std::string>& argv, int out_fd, int in_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  posix_spawn_file_actions_adddup2(&actions, in_fd >= 0 ? in_fd : devnull, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd >= 0 ? out_fd : devnull, 1);
  posix_spawn_file_actions_adddup2(&actions, out_fd >= 0 ? out_fd : devnull, 2);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(devnull);
  return rc == 0 ? pid : -1;
}

// A non-blocking TCP socket in network namespace `netns` (/run/netns/<netns>; "": ours). A
// socket stays in the namespace it was made in, so a short-lived thread enters it to make one.
int tcp_socket(const std::string& netns) {
  const int type = SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK;
  if (netns.empty()) return ::socket(AF_INET, type, 0);
  int fd = -1;
  std::thread([&] {
    int ns = ::open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) return;
    if (::setns(ns, CLONE_NEWNET) == 0) fd = ::socket(AF_INET, type, 0);
    ::close(ns);
  }).join();
  return fd;
}

// Polls until something accepts TCP connections on ip:port, seen from namespace `netns`. Every
// attempt is bounded: a SYN that gets no answer (e.g. the bridge's L2 guard drops the CT's
// replies because its port is not bound) must not block for the kernel's SYN retry time.
bool wait_port(const std::string& ip, int port, int timeout_ms, const std::string& netns) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, ip.c_str(), &sa.sin_addr) != 1) return false;
  while (Clock::now() < deadline) {
    int fd = tcp_socket(netns);
    if (fd < 0) return false;
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    if (!ok && errno == EINPROGRESS) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{fd, POLLOUT, 0};
      int wait_ms = static_cast<int>(std::clamp<long long>(left.count(), 1, 250));
      if (::poll(&p, 1, wait_ms) == 1) {
        int err = 0;
        socklen_t len = sizeof err;
        ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      }
    }
    ::close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::vector<LiveInterface> parse_addr_json(const std::string& out) {
  std::vector<LiveInterface> list;
  try {
    Poco::JSON::Parser parser;
    auto array = parser.parse(out).extract<Poco::JSON::Array::Ptr>();
    for (const auto& item : *array) {
      auto o = item.extract<Poco::JSON::Object::Ptr>();
      LiveInterface iface;
      iface.name = o->getValue<std::string>("ifname");
      iface.hwaddr = o->has("address") ? o->getValue<std::string>("address") : "";
      if (auto infos = o->getArray("addr_info")) {
        for (const auto& ai : *infos) {
          auto a = ai.extract<Poco::JSON::Object::Ptr>();
          iface.addresses.push_back(a->getValue<std::string>("local") + "/" +
                                    std::to_string(a->getValue<int>("prefixlen")));
        }
      }
      list.push_back(std::move(iface));
    }
  } catch (const std::exception&) {
  }
  return list;
}

std::vector<std::string> node_ip(const NetnsOptions& o, const std::vector<std::string>& args) {
  std::vector<std::string> argv{"ip"};
  if (!o.node_netns.empty()) argv.insert(argv.end(), {"-n", o.node_netns});
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

pvs::Status make_bridge(const NetnsOptions& o, bool* created) {
  if (run_command(node_ip(o, {"link", "show", "dev", o.bridge})) == 0) return {};
  if (!o.create_bridge)
    return pvs::fail(pvs::ErrorCode::kNotFound, "bridge " + o.bridge + " does not exist");
  std::string out;
  // A fixed MAC, as udev gives a Proxmox bridge: else it follows its ports' lowest MAC and
  // the containers' ARP entries for the gateway go stale whenever that changes.
  if (run_command(
          node_ip(o, {"link", "add", o.bridge, "address", "02:00:00:00:00:01", "type", "bridge"}),
          &out) != 0 ||
      run_command(node_ip(o, {"addr", "add", o.bridge_cidr, "dev", o.bridge}), &out) != 0 ||
      run_command(node_ip(o, {"link", "set", o.bridge, "up"}), &out) != 0) {
    run_command(node_ip(o, {"link", "del", o.bridge}));
    return pvs::fail(pvs::ErrorCode::kIo, "cannot create bridge " + o.bridge + ": " + out);
  }
  *created = true;
  return {};
}

}  // namespace detail

namespace {

using namespace detail;

class ModelBackend : public Backend {
 public:
  std::string start(int vmid, const std::map<std::string, std::string>& config,
                    const std::string& ipv4) override {
    auto net0 = net0_of(config);
    std::vector<LiveInterface> list;
    list.push_back({"lo", "00:00:00:00:00:00", {"127.0.0.1/8", "::1/128"}});
    if (!net0.empty()) {
      LiveInterface eth{net0.count("name") ? net0["name"] : "eth0", lower(net0["hwaddr"]), {}};
      if (!ipv4.empty()) eth.addresses.push_back(ipv4);
      eth.addresses.push_back(link_local(net0["hwaddr"]));
      list.push_back(eth);
    }
    std::lock_guard lock(mutex_);
    live_[vmid] = std::move(list);
    return "";
  }
  void stop(int vmid) override {
    std::lock_guard lock(mutex_);
    live_.erase(vmid);
  }
  std::vector<LiveInterface> interfaces(int vmid) override {
    std::lock_guard lock(mutex_);
    auto it = live_.find(vmid);
    return it == live_.end() ? std::vector<LiveInterface>{} : it->second;
  }

 private:
  std::mutex mutex_;
  std::map<int, std::vector<LiveInterface>> live_;
};

// Runs "$@" with a fresh tmpfs on /tmp and the directory $1 still visible at its path.
class NetnsBackend : public Backend {
 public:
  explicit NetnsBackend(NetnsOptions options) : o_(std::move(options)) {}

  // With key_from, the CTs start with its host key (owned and deleted by key_from).
  pvs::Status init(const Backend* key_from) {
    if (o_.authorized_keys.empty() || ::access(o_.authorized_keys.c_str(), R_OK) != 0)
      return pvs::fail(pvs::ErrorCode::kInvalidArgument,
                       "netns backend: --authorized-keys file missing: " + o_.authorized_keys);
    if (::access(o_.sshd_path.c_str(), X_OK) != 0)
      return pvs::fail(pvs::ErrorCode::kNotFound, "netns backend: no sshd at " + o_.sshd_path);
    if (o_.bridge.size() > 15)
      return pvs::fail(pvs::ErrorCode::kInvalidArgument, "bridge name longer than 15 bytes");
    if (!o_.node_netns.empty() && ::access(("/run/netns/" + o_.node_netns).c_str(), F_OK) != 0)
      return pvs::fail(pvs::ErrorCode::kNotFound, "no network namespace " + o_.node_netns);
    if (key_from) {
      host_key_ = key_from->host_key_file();
      host_key_fp_ = key_from->host_key_fingerprint();
    } else if (auto made = make_host_key(); !made) {
      return made;
    }
    ::mkdir("/run/sshd", 0755);  // sshd's privilege separation directory
    return detail::make_bridge(o_, &created_bridge_);
  }

  // The template's SSH host key, in a directory of its own.
  pvs::Status make_host_key() {
    char dir[] = "/tmp/pvesim-ssh-XXXXXX";
    if (!mkdtemp(dir)) return pvs::fail(pvs::errno_error("mkdtemp", errno));
    dir_ = dir;
    host_key_ = dir_ + "/ssh_host_ed25519_key";
    if (run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", host_key_}) != 0)
      return pvs::fail(pvs::ErrorCode::kIo, "ssh-keygen failed");
    std::string listing;
    if (run_command({"ssh-keygen", "-l", "-f", host_key_ + ".pub"}, &listing) != 0 ||
        listing.find("SHA256:") == std::string::npos)
      return pvs::fail(pvs::ErrorCode::kIo, "ssh-keygen -l failed: " + listing);
    host_key_fp_ = listing.substr(listing.find("SHA256:"), 50);
    return {};
  }

  std::string start(int vmid, const std::map<std::string, std::string>& config,
                    const std::string& ipv4) override {
    {
      std::lock_guard lock(mutex_);
      if (running_.count(vmid)) return "";  // running or being started
      running_[vmid] = Live{-1, port_name(vmid, net0_of(config))};
    }
    auto forget = [&] {
      std::lock_guard lock(mutex_);
      running_.erase(vmid);
    };
    auto net0 = net0_of(config);
    std::string ns = o_.ns_prefix + std::to_string(vmid);
    std::string port = port_name(vmid, net0);
    std::string ifname = net0.count("name") ? net0["name"] : "eth0";
    std::string out;
    auto fail = [&](const std::string& what) {
      teardown(vmid, ns, port, -1);
      forget();
      return what + ": " + out;
    };
    if (run_command({"ip", "netns", "add", ns}, &out) != 0) return fail("ip netns add " + ns);
    if (run_command(
            host_ip({"link", "add", port, "type", "veth", "peer", "name", ifname, "netns", ns}),
            &out) != 0)
      return fail("veth");
    if (run_command(host_ip({"link", "set", port, "master", o_.bridge, "up"}), &out) != 0)
      return fail("attach to bridge " + o_.bridge);
    // The CT's side in one `ip -batch` (one program instead of five).
    std::vector<std::string> inside;
    if (!net0["hwaddr"].empty())
      inside.push_back("link set " + ifname + " address " + lower(net0["hwaddr"]));
    inside.push_back("link set lo up");
    inside.push_back("link set " + ifname + " up");
    std::string ip = ipv4.substr(0, ipv4.find('/'));
    bool real_dhcp = net0["ip"] == "dhcp" && !o_.dhcp_client.empty();
    if (!real_dhcp && !ipv4.empty()) {
      inside.push_back("addr add " + ipv4 + " dev " + ifname);
      // A static ip= uses net0's gw=; a DHCP lease gets the router the DHCP server would offer.
      std::string gw = net0["gw"];
      if (gw.empty() && net0["ip"] == "dhcp")
        gw = o_.gateway.empty() ? o_.bridge_cidr.substr(0, o_.bridge_cidr.find('/')) : o_.gateway;
      if (!gw.empty()) inside.push_back("route add default via " + gw);
    }
    if (ip_batch(ns, inside, &out) != 0) return fail("configure " + ifname + " in " + ns);
    if (real_dhcp) {
      // As on Proxmox, a CT whose DHCP gets no answer still starts, just without an address
      // (and here without sshd): the caller's wait for SSH is what notices.
      ip.clear();
      if (run_command({"ip", "netns", "exec", ns, o_.dhcp_client, "run", ifname}, &out) == 0)
        ip = first_ipv4(ns, ifname);
      if (ip.empty()) pvs::log::warn("CT " + std::to_string(vmid) + ": no DHCP lease: " + out);
    }
    pid_t pid = -1;
    if (!ip.empty()) {
      if (auto e = give_etc_ssh(vmid); !e.empty()) return fail(e);
      // With private_tmp the sshd (and so every session) gets its own /tmp, as a container has
      // its own filesystem: a tmpfs mounted in the mount namespace `ip netns exec` makes (its
      // "/" is a slave, so nothing leaks to the host); the directory of authorized_keys (the
      // stack's, often under /tmp) is bound back into it; exec keeps the pid.
      std::string keep = o_.authorized_keys.substr(0, o_.authorized_keys.rfind('/'));
      pid = spawn_in_netns(ns,
                           {o_.sshd_path,
                            "-D",
                            "-e",
                            "-f",
                            "/dev/null",
                            "-o",
                            "ListenAddress=" + ip,
                            "-o",
                            "Port=" + std::to_string(o_.ssh_port),
                            "-o",
                            "HostKey=/etc/ssh/ssh_host_ed25519_key",
                            "-o",
                            "AuthorizedKeysFile=" + o_.authorized_keys,
                            "-o",
                            "StrictModes=no",
                            "-o",
                            "PidFile=none",
                            "-o",
                            "UsePAM=no",
                            "-o",
                            "PasswordAuthentication=no",
                            "-o",
                            "KbdInteractiveAuthentication=no",
                            "-o",
                            "PermitRootLogin=prohibit-password",
                            "-o",
                            "AllowUsers=" + o_.user,
                            "-o",
                            "Subsystem=sftp internal-sftp"},
                           o_.private_tmp, keep, -1);
      if (pid < 0) return fail("spawn sshd");
      if (!wait_port(ip, o_.ssh_port, 20000, o_.node_netns)) {
        teardown(vmid, ns, port, pid);
        forget();
        return "sshd did not start in " + ns;
      }
    }
    {
      std::lock_guard lock(mutex_);
      running_[vmid] = Live{pid, port};
    }
    reload_.watch(vmid, etc_dir(vmid) + "/ssh", pid);
    return "";
  }

  void stop(int vmid) override {
    Live live;
    {
      std::lock_guard lock(mutex_);
      auto it = running_.find(vmid);
      if (it == running_.end()) return;
      live = it->second;
      running_.erase(it);
    }
    reload_.forget(vmid);
    teardown(vmid, o_.ns_prefix + std::to_string(vmid), live.port, live.pid);
  }

  std::vector<LiveInterface> interfaces(int vmid) override {
    std::string out;
    if (run_command({"ip", "-n", o_.ns_prefix + std::to_string(vmid), "-j", "addr", "show"},
                    &out) != 0)
      return {};
    return parse_addr_json(out);
  }

  void destroy(int vmid) override {
    std::string etc = etc_dir(vmid);
    run_command({"rm", "-rf", "--one-file-system", etc});
    std::lock_guard lock(mutex_);
    etc_dirs_.erase(vmid);
  }

  std::string host_key_fingerprint() const override { return host_key_fp_; }
  std::string host_key_file() const override { return host_key_; }

  void cleanup() override {
    std::map<int, Live> all;
    std::set<int> etcs;
    {
      std::lock_guard lock(mutex_);
      all.swap(running_);
      etcs.swap(etc_dirs_);
    }
    for (auto& [vmid, live] : all) {
      reload_.forget(vmid);
      teardown(vmid, o_.ns_prefix + std::to_string(vmid), live.port, live.pid);
    }
    for (int vmid : etcs) run_command({"rm", "-rf", "--one-file-system", etc_dir(vmid)});
    if (created_bridge_) run_command(host_ip({"link", "del", o_.bridge}));
    created_bridge_ = false;
    if (!dir_.empty()) {
      ::unlink(host_key_.c_str());
      ::unlink((host_key_ + ".pub").c_str());
      ::rmdir(dir_.c_str());
      dir_.clear();
    }
  }

  ~NetnsBackend() override { cleanup(); }

 private:
  void teardown(int /*vmid*/, const std::string& ns, const std::string& port, pid_t pid) {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      for (int i = 0; i < 100; ++i) {
        if (::waitpid(pid, nullptr, WNOHANG) == pid) {
          pid = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
    // Any process left in the namespace (e.g. an sshd session child) goes too, and as when LXC
    // stops a container, the interface goes only after they are gone: their sockets' FINs
    // reach the peers (a client sees its connection to a stopped CT close).
    for (int round = 0; round < 200; ++round) {
      auto pids = pids_in_netns(ns);
      for (pid_t p : pids) ::kill(p, SIGKILL);
      if (pids.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    run_command(host_ip({"link", "del", port}));
    run_command({"ip", "netns", "del", ns});
  }

  // `ip ARGS` acting on the node's namespace (node_netns), or on ours when that is "".
  std::vector<std::string> host_ip(const std::vector<std::string>& args) const {
    return node_ip(o_, args);
  }

  // /etc/netns/<ns> (ip netns exec mounts its entries over /etc): the CT's own /etc/ssh.
  std::string etc_dir(int vmid) const {
    return "/etc/netns/" + o_.ns_prefix + std::to_string(vmid);
  }

  // Makes etc_dir(vmid) this backend's. One it did not make is another process's leftover (one
  // killed before its cleanup, whose prefix a later one reuses with its pid) and goes: a CT
  // never starts with a /etc/ssh it was not given. False if it cannot be removed.
  bool claim_etc_dir(int vmid) {
    {
      std::lock_guard lock(mutex_);
      if (!etc_dirs_.insert(vmid).second) return true;
    }
    std::string etc = etc_dir(vmid);
    if (::access(etc.c_str(), F_OK) != 0) return true;
    return run_command({"rm", "-rf", "--one-file-system", etc}) == 0;
  }

  // A clone of a CT that ran (a sandbox captured as a template) starts with its /etc/ssh, as
  // its copied root file system would; a template's clones get the template's key at start.
  std::string clone(int src, int dst, bool /*full*/, const std::string& /*snapname*/,
                    const std::map<std::string, std::string>& /*config*/) override {
    std::string from = etc_dir(src) + "/ssh";
    if (::access((from + "/ssh_host_ed25519_key").c_str(), F_OK) != 0) return "";
    if (!claim_etc_dir(dst)) return "the clone's /etc/ssh: cannot remove a stale " + etc_dir(dst);
    std::string out;
    if (run_command({"mkdir", "-p", etc_dir(dst)}, &out) != 0 ||
        run_command({"cp", "-a", from, etc_dir(dst) + "/"}, &out) != 0)
      return "the clone's /etc/ssh: " + out;
    return "";
  }

  // A clone's /etc/ssh holds the template's host key until something replaces it; it stays
  // across stop and start. Returns "" or an error.
  std::string give_etc_ssh(int vmid) {
    std::string ssh = etc_dir(vmid) + "/ssh";
    if (!claim_etc_dir(vmid)) return "the CT's /etc/ssh: cannot remove a stale " + etc_dir(vmid);
    if (::access((ssh + "/ssh_host_ed25519_key").c_str(), F_OK) == 0) return "";
    std::string out;
    if (run_command({"mkdir", "-p", ssh}, &out) != 0 ||
        run_command({"cp", host_key_, host_key_ + ".pub", ssh + "/"}, &out) != 0 ||
        run_command({"chown", "-R", o_.user, ssh}, &out) != 0)
      return "the CT's /etc/ssh: " + out;
    return "";
  }

  // The bridge port Proxmox would create: fwpr<vmid>p0 behind the firewall bridge when net0
  // has firewall=1, else the CT's veth itself, veth<vmid>i0.
  static std::string port_name(int vmid, const std::map<std::string, std::string>& net0) {
    auto fw = net0.find("firewall");
    bool firewall = fw != net0.end() && fw->second == "1";
    return (firewall ? "fwpr" : "veth") + std::to_string(vmid) + (firewall ? "p0" : "i0");
  }

  struct Live {
    pid_t pid = -1;
    std::string port;
  };

  NetnsOptions o_;
  std::string dir_, host_key_, host_key_fp_;
  std::set<int> etc_dirs_;  // CTs with an /etc/netns/<ns> (until deleted)
  bool created_bridge_ = false;
  std::mutex mutex_;
  std::map<int, Live> running_;  // pid -1 while starting
  SshdKeyReload reload_;         // HUPs a CT's sshd when its host key is replaced
};

}  // namespace

int run_command(const std::vector<std::string>& argv, std::string* out, int in_fd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = spawn(argv, fds[1], in_fd);
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  if (pid < 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

pvs::Result<std::unique_ptr<Backend>> make_netns_backend(const NetnsOptions& options,
                                                         const Backend* key_from) {
  auto backend = std::make_unique<NetnsBackend>(options);
  if (auto ok = backend->init(key_from); !ok) return pvs::fail(ok.error());
  return std::unique_ptr<Backend>(std::move(backend));
}

pvs::Result<std::unique_ptr<Backend>> make_backend(const Options& options) {
  if (options.backend == "model") return std::unique_ptr<Backend>(new ModelBackend);
  if (options.backend == "lxc") {
    if (!options.nodes.empty())
      return pvs::fail(pvs::ErrorCode::kInvalidArgument, "the lxc backend simulates one node");
    return make_lxc_backend(options.netns);
  }
  if (options.backend != "netns")
    return pvs::fail(pvs::ErrorCode::kInvalidArgument, "unknown backend " + options.backend);
  if (options.nodes.empty()) return make_netns_backend(options.netns);
  // Nodes may share a bridge (one L2 segment for the cluster): the first one makes it (if
  // missing) and deletes it at exit.
  std::vector<std::pair<std::string, std::unique_ptr<Backend>>> nodes;
  for (const auto& node : options.nodes) {
    auto backend = make_netns_backend(node.netns, nodes.empty() ? nullptr : nodes[0].second.get());
    if (!backend) return pvs::fail(backend.error());  // those made so far clean up
    nodes.emplace_back(node.name, std::move(*backend));
  }
  return make_cluster_backend(std::move(nodes));
}

}  // namespace pvesim
