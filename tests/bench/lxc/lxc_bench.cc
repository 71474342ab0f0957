// lxc_bench: what real containers cost on this machine (pvesim's lxc backend), next to the netns
// stand-in in the same run. Needs root and the template rootfs (scripts/lxc-rootfs); not a ctest.
//
//   lxc_bench [n=10] [hot_n=20]
//
// 1. The backend's steps on their own, n times: linked clone (storage: nothing until the first
//    start), start (disk image + overlay + LXC + sshd answering), stop, destroy; and a full clone.
// 2. An idle container: RSS of its processes and of its LXC monitor, its memory cgroup, its CPU
//    over 10 s.
// 3. Hot-pool time to first command through REST (POST /v1/sandboxes, then exec echo), lxc
//    stack vs netns stack, hot_n claims each.
#include <sys/stat.h>
#include <unistd.h>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "backend.h"
#include "bench_args.h"
#include "http/auth.h"
#include "rest_conn.h"
#include "sim.h"
#include "support/in_process_service.h"
#include "support/stack_fixture.h"

#ifndef PVS_LXC_ROOTFS
#error "PVS_LXC_ROOTFS must name the template's root file system"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
std::string p50_p99(std::vector<double> v) {
  if (v.empty()) return "-";
  std::sort(v.begin(), v.end());
  char buf[96];
  std::snprintf(buf, sizeof buf, "p50 %.0f ms, p99 %.0f ms (n=%zu)", v[v.size() / 2],
                v[std::min(v.size() - 1, v.size() * 99 / 100)], v.size());
  return buf;
}
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
long rss_kb(pid_t pid) {
  std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return 0;
}
long cpu_ticks(pid_t pid) {
  std::string text = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  long ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i == 14 || i == 15) ticks += std::atol(field.c_str());
  return ticks;
}
// The processes of a container: those in its init's pid namespace... as the node sees them:
// every pid whose /proc/<pid>/cgroup names the container's payload cgroup.
std::vector<pid_t> container_pids(const std::string& name) {
  std::vector<pid_t> out;
  std::string all;
  pvesim::run_command({"sh", "-c", "grep -l 'lxc.payload." + name + "' /proc/[0-9]*/cgroup"}, &all);
  std::istringstream in(all);
  for (std::string path; std::getline(in, path);) out.push_back(std::atoi(path.c_str() + 6));
  return out;
}

void backend_steps(int n) {
  std::string ns = "lxb" + std::to_string(::getpid());
  pvesim::run_command({"ip", "netns", "add", ns});
  char dir[] = "/tmp/lxcbench.XXXXXX";
  ::mkdtemp(dir);
  ::chmod(dir, 0711);
  std::string key = std::string(dir) + "/key";
  pvesim::run_command({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key});
  pvesim::NetnsOptions o;
  o.bridge = "lxbbr0";
  o.bridge_cidr = "10.96.0.1/16";
  o.node_netns = ns;
  o.authorized_keys = key + ".pub";
  o.lxc_rootfs = PVS_LXC_ROOTFS;
  o.lxc_dir = dir;
  {
    auto made = pvesim::make_lxc_backend(o);
    if (!made) throw std::runtime_error(made.error().message);
    auto& b = **made;
    std::map<std::string, std::string> config = {
        {"hostname", "bench"},
        {"memory", "512"},
        {"cores", "1"},
        {"rootfs", "local-lvm:vm-1-disk-0,size=8G"},
        {"net0", "name=eth0,bridge=lxbbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp,type=veth"}};
    std::vector<double> clone, start, stop, destroy;
    for (int i = 0; i < n; ++i) {
      int vmid = 100 + i;
      auto t = Clock::now();
      if (auto e = b.clone(9000, vmid, false, "", config); !e.empty()) throw std::runtime_error(e);
      clone.push_back(ms_since(t));
      t = Clock::now();
      std::string ip = "10.96.0." + std::to_string(10 + i) + "/16";
      if (auto e = b.start(vmid, config, ip); !e.empty()) throw std::runtime_error(e);
      start.push_back(ms_since(t));
      if (i == 0) {  // 2. the idle container
        std::this_thread::sleep_for(std::chrono::seconds(2));
        std::string name = b.run_dir().substr(b.run_dir().rfind('/') + 1);
        name = "pvesim-" + name + "-" + std::to_string(vmid);
        auto pids = container_pids(name);
        long rss = 0, ticks0 = 0, ticks1 = 0;
        for (pid_t p : pids) rss += rss_kb(p), ticks0 += cpu_ticks(p);
        std::string monitor;
        pvesim::run_command({"pgrep", "-f", "lxc monitor\\] " + b.run_dir() + " " + name},
                            &monitor);
        long monitor_rss = rss_kb(std::atoi(monitor.c_str()));
        std::this_thread::sleep_for(std::chrono::seconds(10));
        for (pid_t p : pids) ticks1 += cpu_ticks(p);
        std::printf(
            "idle container: %zu processes (sshd as init), %ld KiB RSS; LXC monitor %ld KiB; "
            "memory cgroup %.1f MiB; CPU %.3f%% of a core over 10 s\n",
            pids.size(), rss, monitor_rss, static_cast<double>(b.memory_used(vmid)) / 1048576.0,
            100.0 * static_cast<double>(ticks1 - ticks0) /
                static_cast<double>(sysconf(_SC_CLK_TCK)) / 10.0);
      }
      t = Clock::now();
      b.stop(vmid);
      stop.push_back(ms_since(t));
      t = Clock::now();
      b.destroy(vmid);
      destroy.push_back(ms_since(t));
    }
    // A full clone copies the template's tree into its own disk.
    auto t = Clock::now();
    if (auto e = b.clone(9000, 999, true, "", config); !e.empty()) throw std::runtime_error(e);
    double full = ms_since(t);
    b.destroy(999);
    std::printf("linked clone %s\nstart (until sshd answers) %s\nstop %s\ndestroy %s\n",
                p50_p99(clone).c_str(), p50_p99(start).c_str(), p50_p99(stop).c_str(),
                p50_p99(destroy).c_str());
    std::printf("full clone (copy of the ~200 MB template) %.0f ms\n", full);
  }
  pvesim::run_command({"ip", "netns", "del", ns});
  pvesim::run_command({"rm", "-rf", "--one-file-system", dir});
}

using Conn = pvs::bench::RestConn;

// Hot-pool TTFC through the REST service in this process, on a stack of `backend`.
std::vector<double> hot_ttfc(const std::string& backend, int n) {
  pvs::test::StackOptions so;
  so.backend = backend;
  pvs::test::Stack stack(so);
  auto config = pvs::bench::rest_config(stack.dir(), 1000, true);
  auto svc = pvs::test::InProcessService::start(config);
  if (!svc) throw std::runtime_error("http server: " + svc.error().message);
  auto mc = stack.manager_config();
  pvs::HotPoolProfile p;
  p.name = "hot";
  p.size = 2;
  p.cpus = 1;
  p.memory_mb = 512;
  mc.hot_pools = {p};
  mc.hot_pool_check_interval = milliseconds(100);
  std::shared_ptr<pvs::Manager> manager = std::move(*pvs::Manager::open(mc));
  (*svc)->set_manager(manager);
  Conn c((*svc)->port());
  std::vector<double> ttfc;
  for (int i = 0; i < n; ++i) {
    for (int w = 0; w < 600; ++w) {  // a ready member (the refill of the last claim)
      auto pools = manager->pools();
      if (!pools.empty() && pools[0].ready >= 1) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
    auto t = Clock::now();
    std::string body;
    if (c.call("POST", "/v1/sandboxes", "{}", &body) != 201)
      throw std::runtime_error("create: " + body);
    auto id =
        Poco::JSON::Parser().parse(body).extract<Poco::JSON::Object::Ptr>()->getValue<std::string>(
            "id");
    if (c.call("POST", "/v1/sandboxes/" + id + "/exec", R"({"command":"echo hi"})", &body) != 200)
      throw std::runtime_error("exec: " + body);
    ttfc.push_back(ms_since(t));
    (void)manager->destroy_by_id(id);
  }
  (*svc)->set_manager(nullptr);
  manager.reset();
  return ttfc;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv, "lxc_bench [n=10] [hot_n=20]   (root; scripts/lxc-rootfs)", 2);
  int n = args.count(1, 10), hot_n = args.count(2, 20);
  try {
    std::printf("== pvesim lxc backend steps (this machine: %ld CPUs)\n",
                ::sysconf(_SC_NPROCESSORS_ONLN));
    backend_steps(n);
    std::printf("== hot-pool time to first command through REST (pool of 2, instant tasks)\n");
    auto lxc = hot_ttfc("lxc", hot_n);
    auto netns = hot_ttfc("netns", hot_n);
    std::printf("lxc containers  %s\nnetns stand-in  %s\n", p50_p99(lxc).c_str(),
                p50_p99(netns).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lxc_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
