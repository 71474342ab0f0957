#include "support/stack_fixture.h"
#include "support/stack_detail.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "sim.h"
#include "support/sshd_fixture.h"

#ifndef PVS_STACK_AGENT_BIN
#error "PVS_STACK_AGENT_BIN must name the pve-sandbox-agent binary"
#endif
#ifndef PVS_STACK_RULESET_LIB
#error "PVS_STACK_RULESET_LIB must name setup/lib/ruleset.sh"
#endif
#ifndef PVS_STACK_RULESET
#error "PVS_STACK_RULESET must name nftables/sandbox.nft"
#endif
#ifndef PVS_STACK_LXC_ROOTFS
#error "PVS_STACK_LXC_ROOTFS must name the lxc template's root file system (scripts/lxc-rootfs)"
#endif
#ifndef PVS_STACK_DHCP_CLIENT
#error "PVS_STACK_DHCP_CLIENT must name tests/pvesim/dhcp-client.sh"
#endif

namespace pvs::test {

void stack_detail::must(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("stack: " + what);
}

void stack_detail::run(const std::vector<std::string>& argv) {
  std::string out;
  int rc = run_command(argv, &out);
  std::string line;
  for (auto& a : argv) line += a + " ";
  must(rc == 0, line + "failed (" + std::to_string(rc) + "): " + out);
}

void stack_detail::end_process(pid_t* pid, int sig) {
  if (*pid <= 0) return;
  ::kill(*pid, sig);
  int status = 0;
  ::waitpid(*pid, &status, 0);
  *pid = -1;
}

std::string stack_detail::slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

using stack_detail::end_process;
using stack_detail::must;
using stack_detail::run;
using stack_detail::slurp;

}  // namespace

Stack::Stack(StackOptions options) : options_(std::move(options)) {
  id_ = options_.id.empty() ? "pvs" + std::to_string(::getpid()) : options_.id;
  node_ns_ = id_ + "-node";
  std::string tmpl = "/tmp/" + id_ + ".XXXXXX";
  must(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp");
  dir_ = tmpl;
  try {
    // The node (or, in a cluster, the controller's host): a fresh namespace this thread enters.
    run({"ip", "netns", "add", node_ns_});
    original_ns_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    must(original_ns_ >= 0, "open own netns");
    int fd = ::open(("/run/netns/" + node_ns_).c_str(), O_RDONLY | O_CLOEXEC);
    must(fd >= 0, "open node netns");
    int rc = ::setns(fd, CLONE_NEWNET);
    ::close(fd);
    must(rc == 0, "setns into the node namespace");
    entered_ = true;
    run({"ip", "link", "set", "lo", "up"});
    run({"sysctl", "-qw", "net.ipv4.ip_forward=1"});
    make_keys_and_user();
    must(!options_.egress || options_.nodes == 1, "StackOptions::egress is single-node");
    if (options_.nodes > 1)
      setup_cluster();
    else
      setup_single_node();
    // The template's host key, which config_for pins (also in the lifecycle driver process).
    std::ofstream(dir_ + "/template_host_key") << sim_->ssh_host_key_fingerprint();
  } catch (...) {
    cleanup();
    throw;
  }
}

void Stack::make_keys_and_user() {
  // The template's SSH key.
  run({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "stack", "-f", ssh_key()});
  {
    std::ofstream ak(dir_ + "/authorized_keys");
    ak << slurp(ssh_key() + ".pub");
  }
  // The sandbox login user: a throw-away user with /bin/sh (root's shell may source a heavy
  // .bashrc on every exec), home in the temp dir.
  ::chmod(dir_.c_str(), 0755);
  ::chmod((dir_ + "/authorized_keys").c_str(), 0644);
  std::ofstream(dir_ + "/nodes") << options_.nodes;
  must(::mkdir(dhcp_hosts_dir().c_str(), 0755) == 0, "mkdir " + dhcp_hosts_dir());
  if (options_.backend == "lxc") {  // a real container: root inside, its own home
    user_ = "root";
    std::ofstream(dir_ + "/user") << user_;
    return;
  }
  user_ = "pvsstk" + std::to_string(::getpid());
  ::mkdir(home().c_str(), 0755);
  must(add_test_user(user_, home()) == 0, "useradd " + user_);
  user_created_ = true;
  run({"chown", user_ + ":" + user_, home()});
  std::ofstream(dir_ + "/user") << user_;
}

void Stack::setup_single_node() {
  // The sandbox bridge, as the node has it: with a fixed MAC (udev gives a Proxmox bridge a
  // persistent one). Without it the kernel gives the bridge the lowest MAC of its ports, which
  // changes as containers come and go, and every container's ARP entry for the gateway then
  // points at a MAC nobody answers for until it expires (tens of seconds of lost packets).
  run({"ip", "link", "add", "vmbr1", "address", "02:00:0a:63:00:01", "type", "bridge", "stp_state",
       "0", "forward_delay", "0"});
  run({"ip", "addr", "add", "10.99.0.1/16", "dev", "vmbr1"});
  run({"ip", "link", "set", "vmbr1", "up"});
  // The hardened ruleset, rendered by setup's own helper for this kernel (bridge scope when
  // the kernel has `meta ibrname`, else port-name scope).
  run({"bash", "-c",
       "set -euo pipefail; source \"$1\"; if pvs_kernel_has_ibrname; then s=bridge; "
       "else s=ports; fi; pvs_render_ruleset \"$2\" vmbr1 10.99.0.0/16 10.99.0.1 \"$s\" "
       "'{ \"veth*\", \"fwpr*\" }' > \"$3\"",
       "render", PVS_STACK_RULESET_LIB, PVS_STACK_RULESET, dir_ + "/sandbox.nft"});
  run({"nft", "-f", dir_ + "/sandbox.nft"});
  if (options_.agent) {
    std::ofstream(dir_ + "/agent.yaml") << agent_config(0);
    start_agent();
  }
  if (options_.dhcp) start_dnsmasq();
  if (options_.egress) setup_egress();
  pvesim::Options so;
  so.tokens[kTokenId] = kTokenSecret;
  so.auth_delay_ms = 0;
  so.default_task_ms = options_.default_task_ms;
  so.task_ms = options_.task_ms;
  so.pools = {"pve-sandbox"};
  so.backend = options_.backend;
  so.netns.bridge = "vmbr1";
  so.netns.bridge_cidr = "10.99.0.1/16";
  so.netns.create_bridge = false;
  so.netns.ns_prefix = id_ + "-";
  so.netns.authorized_keys = dir_ + "/authorized_keys";
  so.netns.user = user_;
  so.netns.private_tmp = true;  // each sandbox its own /tmp, as a container
  if (options_.dhcp) so.netns.dhcp_client = PVS_STACK_DHCP_CLIENT;
  so.netns.lxc_rootfs = PVS_STACK_LXC_ROOTFS;
  if (options_.backend == "lxc") so.template_disk = options_.lxc_template_disk;
  if (options_.volume_holder) so.templates.push_back(kVolumeHolderTemplate);
  auto sim = pvesim::Simulator::start(so);
  must(sim.has_value(), "pvesim: " + (sim ? std::string() : sim.error().message));
  sim_ = std::move(*sim);
}

std::string Stack::agent_config(int node) const {
  std::string cidr = node == 0 ? "10.99.0.0/16" : "10." + std::to_string(90 + node) + ".0.0/16";
  std::string gw = node == 0 ? "10.99.0.1" : "10." + std::to_string(90 + node) + ".0.1";
  std::string suffix = node == 0 ? "" : "-" + node_name(node);
  std::ostringstream cfg;
  cfg << "socket: " << agent_socket(node)
      << "\n"
      // StackOptions::egress: the resolver runs as nobody:nogroup and connects through the
      // socket's group.
      << "socket_group: " << (options_.egress && node == 0 ? "nogroup" : "\"\"") << "\n"
      << "allowed_uids: [0]\n"
      << "sandbox_cidr: " << cidr << "\n"
      << "gateway: " << gw << "\n"
      << "state_file: " << dir_ << "/agent-state" << suffix << "\n";
  if (options_.dhcp && node == 0) cfg << "dhcp_hosts_dir: " << dhcp_hosts_dir() << "\n";
  if (options_.egress && node == 0) cfg << "resolver_uids: [65534]\n";
  return cfg.str();
}

Stack::~Stack() {
  cleanup();
}

void Stack::cleanup() {
  sim_.reset();  // stops CT namespaces and their sshds
  if (agent_pid_ > 0) stop_agent();
  for (std::size_t i = 0; i < node_agents_.size(); ++i) stop_agent(static_cast<int>(i) + 1);
  stop_dnsmasq();
  stop_egress();
  if (entered_) {
    if (original_ns_ >= 0) (void)::setns(original_ns_, CLONE_NEWNET);
    entered_ = false;
  }
  if (original_ns_ >= 0) ::close(original_ns_);
  original_ns_ = -1;
  run_command({"ip", "netns", "del", node_ns_});
  // CT namespaces a crashed simulator may have left.
  std::string list;
  run_command({"ip", "netns", "list"}, &list);
  std::istringstream in(list);
  std::string name;
  while (in >> name) {
    if (name.rfind(id_ + "-", 0) == 0) run_command({"ip", "netns", "del", name});
    std::string rest;
    std::getline(in, rest);
  }
  // And their /etc/netns/<ns> directories (a later stack whose pid is this one's must not find
  // them).
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/etc/netns", ec))
    if (entry.path().filename().string().rfind(id_ + "-", 0) == 0)
      std::filesystem::remove_all(entry.path(), ec);
  if (user_created_) run_command({"userdel", "-f", user_});
  user_created_ = false;
  if (!dir_.empty()) run_command({"rm", "-rf", dir_});
  dir_.clear();
}

void Stack::start_agent(int node) {
  pid_t& slot = node == 0 ? agent_pid_ : node_agents_.at(static_cast<std::size_t>(node - 1));
  ::unlink(agent_socket(node).c_str());
  SpawnOptions so;
  std::string suffix = node == 0 ? "" : "-" + node_name(node);
  so.stdout_file = dir_ + "/agent" + suffix + ".log";
  so.append = true;
  pid_t pid = spawn_process(
      in_node(node, {PVS_STACK_AGENT_BIN, "--config", dir_ + "/agent" + suffix + ".yaml"}), so);
  must(pid > 0, "start the agent");
  slot = pid;
  for (int i = 0; i < 800; ++i) {
    if (::access(agent_socket(node).c_str(), F_OK) == 0) return;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      slot = -1;
      must(false, "the agent exited: " + agent_log(node));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  must(false, "the agent did not create its socket: " + agent_log(node));
}

// Node 0 (single node): argv as is, in this thread's namespace; node i: inside its namespace.
std::vector<std::string> Stack::in_node(int node, std::vector<std::string> argv) const {
  if (node == 0) return argv;
  argv.insert(argv.begin(), {"ip", "netns", "exec", id_ + "-" + node_name(node)});
  return argv;
}

// dnsmasq as pve-sandbox-setup configures it on a node (DHCP part only; DNS off): static
// reservations only, unknown clients ignored, reservations read from the agent's directory.
void Stack::start_dnsmasq() {
  std::vector<std::string> argv = {"dnsmasq",
                                   "--keep-in-foreground",
                                   "--conf-file=/dev/null",
                                   "--port=0",
                                   "--interface=vmbr1",
                                   "--bind-interfaces",
                                   "--dhcp-range=vmbr1,10.99.0.0,static,255.255.0.0,1h",
                                   "--dhcp-option=vmbr1,option:router,10.99.0.1",
                                   "--dhcp-ignore=tag:!known",
                                   "--dhcp-authoritative",
                                   "--no-ping",
                                   "--dhcp-hostsdir=" + dhcp_hosts_dir(),
                                   "--dhcp-leasefile=" + dnsmasq_leases(),
                                   "--pid-file=" + dir_ + "/dnsmasq.pid",
                                   "--user=root",
                                   "--log-dhcp",
                                   "--log-facility=" + dir_ + "/dnsmasq.log"};
  pid_t pid = spawn_process(argv);
  must(pid > 0, "start dnsmasq (is dnsmasq-base installed?)");
  dnsmasq_pid_ = pid;
  // Ready once it logs that it watches the reservation directory.
  for (int i = 0; i < 800; ++i) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      dnsmasq_pid_ = -1;
      must(false, "dnsmasq exited (is dnsmasq-base installed?): " + dnsmasq_log());
    }
    if (dnsmasq_log().find("DHCP, static leases only") != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  must(false, "dnsmasq did not start: " + dnsmasq_log());
}

void Stack::stop_dnsmasq() {
  end_process(&dnsmasq_pid_, SIGTERM);
}

std::vector<std::string> Stack::run_driver_until_killed(const DriverRun& run) const {
  SpawnOptions so;
  so.stdout_file = run.out_file;
  pid_t pid = spawn_process(
      {run.driver, std::to_string(port()), fingerprint(), dir_,
       options_.backend == "netns" ? "1" : "0", std::to_string(run.seed),
       std::to_string(run.threads), std::to_string(run.warm_pool), std::to_string(run.hot_pool)},
      so);
  must(pid > 0, "start the driver " + run.driver);
  auto far_enough = [&] {
    std::ifstream in(run.out_file);
    int begun = 0, finished = 0;
    for (std::string line; std::getline(in, line);) {
      begun += line.rfind("begin ", 0) == 0 ? 1 : 0;
      finished += line.rfind("create ", 0) == 0 || line.rfind("destroy ", 0) == 0 ? 1 : 0;
    }
    return begun >= run.begun && finished >= run.finished;
  };
  // Bounded only so that a driver that never gets there fails the test instead of hanging it.
  for (int i = 0; i < 6000 && !far_enough(); ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid)
      must(false, "the driver ended, see " + run.out_file);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  must(far_enough(), "the driver did not get far enough in 120 s, see " + run.out_file);
  std::this_thread::sleep_for(run.run_for);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  must(WIFSIGNALED(status), "the driver exited on its own, see " + run.out_file);
  std::vector<std::string> lines;
  std::ifstream in(run.out_file);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string Stack::dnsmasq_log() const {
  return slurp(dir_ + "/dnsmasq.log");
}

std::string Stack::dnsmasq_leases() const {
  return dir_ + "/dnsmasq.leases";
}

void Stack::stop_agent(int node) {
  pid_t& slot = node == 0 ? agent_pid_ : node_agents_.at(static_cast<std::size_t>(node - 1));
  if (slot <= 0) return;
  ::kill(slot, SIGTERM);
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(slot, &status, WNOHANG) == slot) {
      slot = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  kill_agent(node);
}

void Stack::kill_agent(int node) {
  end_process(node == 0 ? &agent_pid_ : &node_agents_.at(static_cast<std::size_t>(node - 1)),
              SIGKILL);
}

std::string Stack::agent_log(int node) const {
  return slurp(dir_ + "/agent" + (node == 0 ? "" : "-" + node_name(node)) + ".log");
}

int Stack::port() const {
  return sim_->port();
}
std::string Stack::fingerprint() const {
  return sim_->fingerprint();
}

ManagerConfig Stack::manager_config() const {
  auto c = config_for(port(), fingerprint(), dir_, options_.backend != "model");
  c.dhcp = options_.dhcp;
  return c;
}

ManagerConfig Stack::config_for(int sim_port, const std::string& sim_fingerprint,
                                const std::string& stack_dir, bool wait_for_ssh) {
  ManagerConfig c;
  c.proxmox.base_url = "https://127.0.0.1:" + std::to_string(sim_port);
  c.proxmox.token_id = kTokenId;
  c.proxmox.token_secret = kTokenSecret;
  c.proxmox.fingerprint = sim_fingerprint;
  c.proxmox.backoff_initial = std::chrono::milliseconds(20);
  c.proxmox.backoff_max = std::chrono::milliseconds(100);
  c.proxmox.max_connections = 16;
  c.node = "pve";
  c.template_vmid = 9000;
  c.pool = "pve-sandbox";
  c.vmid_min = 10000;
  c.vmid_max = 10999;
  c.sandbox_cidr = *Cidr::parse("10.99.0.0/16");
  c.gateway = *Ipv4Address::parse("10.99.0.1");
  c.bridge = "vmbr1";
  c.ssh.user = slurp(stack_dir + "/user");
  c.ssh.private_key_file = stack_dir + "/id_ed25519";
  // netns: the template's host key, as an operator pins it (each sandbox then gets its own);
  // the model backend has no sshd.
  c.ssh.host_key_fingerprint = slurp(stack_dir + "/template_host_key");
  c.ssh.host_key_policy =
      c.ssh.host_key_fingerprint.empty() ? HostKeyPolicy::kInsecure : HostKeyPolicy::kPinned;
  c.ssh.connect_timeout = std::chrono::milliseconds(3000);
  c.ssh_ready_timeout = std::chrono::milliseconds(20000);
  c.wait_for_ssh = wait_for_ssh;
  c.agent.socket_path = stack_dir + "/agent.sock";
  c.agent.timeout = std::chrono::milliseconds(5000);
  int nodes = std::atoi(slurp(stack_dir + "/nodes").c_str());
  for (int i = 1; nodes > 1 && i <= nodes; ++i) {
    NodeConfig n;
    n.name = node_name(i);
    n.agent.socket_path = stack_dir + "/agent-" + n.name + ".sock";
    n.agent.timeout = c.agent.timeout;
    n.sandbox_cidr = *Cidr::parse("10." + std::to_string(90 + i) + ".0.0/16");
    n.gateway = *Ipv4Address::parse("10." + std::to_string(90 + i) + ".0.1");
    n.template_vmid = 8999 + i;
    c.nodes.push_back(std::move(n));
  }
  c.internet_lease = std::chrono::seconds(300);
  c.task_timeout = std::chrono::milliseconds(30000);
  c.clone_lock_wait = std::chrono::milliseconds(30000);
  c.background = false;
  return c;
}

std::set<std::string> Stack::internet_set(int node) const {
  std::string out;
  must(run_command(in_node(node, {"nft", "list", "set", "inet", "sandbox", "internet_allowed"}),
                   &out) == 0,
       "nft list set");
  std::set<std::string> result;
  auto pos = out.find("elements");
  if (pos == std::string::npos) return result;
  static const std::regex ip(R"((\d+\.\d+\.\d+\.\d+))");
  std::string tail = out.substr(pos);
  for (std::sregex_iterator it(tail.begin(), tail.end(), ip), end; it != end; ++it)
    result.insert((*it)[1]);
  return result;
}

std::set<std::string> Stack::bound_ports(int node) const {
  std::string out;
  must(run_command(in_node(node, {"nft", "list", "set", "bridge", "sandbox_l2", "port_ip4"}),
                   &out) == 0,
       "nft list set port_ip4");
  std::set<std::string> result;
  auto pos = out.find("elements");
  if (pos == std::string::npos) return result;
  static const std::regex el(R"re("?([a-z0-9]+)"? \. (\d+\.\d+\.\d+\.\d+))re");
  std::string tail = out.substr(pos);
  for (std::sregex_iterator it(tail.begin(), tail.end(), el), end; it != end; ++it)
    result.insert(std::string((*it)[1]) + "/" + std::string((*it)[2]));
  return result;
}

std::vector<int> Stack::containers(int node) const {
  auto client = pve::Client::create(manager_config().proxmox);
  must(client.has_value(), "client");
  std::vector<int> out;
  for (int i = options_.nodes > 1 ? 1 : 0; i <= (options_.nodes > 1 ? options_.nodes : 0); ++i) {
    if (node != 0 && i != node) continue;
    auto list = (*client)->list_containers(i == 0 ? "pve" : node_name(i));
    must(list.has_value(), "list containers: " + (list ? "" : list.error().to_string()));
    for (auto& c : *list)
      if (!c.is_template) out.push_back(c.vmid);
  }
  return out;
}

std::vector<std::string> Stack::ct_namespaces() const {
  std::string list;
  run_command({"ip", "netns", "list"}, &list);
  std::istringstream in(list);
  std::string line;
  std::vector<std::string> out;
  while (std::getline(in, line)) {
    auto name = line.substr(0, line.find(' '));
    if (name.rfind(id_ + "-", 0) == 0 && name != node_ns_ && name.rfind(id_ + "-pve", 0) != 0)
      out.push_back(name);
  }
  return out;
}

}  // namespace pvs::test
