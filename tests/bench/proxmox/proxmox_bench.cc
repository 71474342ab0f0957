// Request latency and throughput of ProxmoxClient against pvesim, next to the curl CLI doing
// the same requests in the same run. Usage: proxmox_bench [requests]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "backend.h"
#include "bench_args.h"
#include "pvesandbox/proxmox_client.h"
#include "sim.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

constexpr const char* kToken = "bench@pve!bench";
constexpr const char* kSecret = "9b1e4c7a-bench";

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "proxmox_bench [requests=2000]\n"
                        "  ProxmoxClient against pvesim next to the curl CLI, same requests",
                        1);
  int n = args.count(1, 2000);
  pvesim::Options options;
  options.tokens[kToken] = kSecret;
  options.auth_delay_ms = 0;
  auto sim = pvesim::Simulator::start(options);
  if (!sim) {
    std::fprintf(stderr, "pvesim: %s\n", sim.error().to_string().c_str());
    return 1;
  }
  std::string base = "https://127.0.0.1:" + std::to_string((*sim)->port());
  pvs::pve::ClientOptions o;
  o.base_url = base;
  o.token_id = kToken;
  o.token_secret = kSecret;
  o.fingerprint = (*sim)->fingerprint();
  o.max_connections = 16;
  auto client = pvs::pve::Client::create(o);
  if (!client) return 1;
  auto& c = **client;

  // 1. ProxmoxClient, one thread, keep-alive connection reused.
  c.next_id();  // warm up: TLS handshake
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i)
    if (!c.status("pve", 9000)) return 1;
  double client_ms = ms_since(t0) / n;

  // 2. ProxmoxClient, 16 threads.
  std::atomic<int> failures{0};
  t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < n / 16; ++i)
        if (!c.status("pve", 9000)) ++failures;
    });
  for (auto& th : threads) th.join();
  double parallel_rps = (n / 16 * 16) / (ms_since(t0) / 1000.0);

  // 3. curl CLI, one process per request (new TCP + TLS each time), as a script would.
  std::string url = base + "/api2/json/nodes/pve/lxc/9000/status/current";
  std::string header = std::string("Authorization: PVEAPIToken=") + kToken + "=" + kSecret;
  int m = std::max(20, n / 20);
  t0 = Clock::now();
  for (int i = 0; i < m; ++i) {
    if (pvesim::run_command({"curl", "-sf", "-o", "/dev/null", "--cacert", (*sim)->cert_file(),
                             "-H", header, url}) != 0) {
      std::fprintf(stderr, "curl failed\n");
      return 1;
    }
  }
  double curl_spawn_ms = ms_since(t0) / m;

  // 4. curl CLI, one process for all requests (keep-alive reuse, like the client).
  char cfg[] = "/tmp/proxmox-bench-XXXXXX";
  int fd = ::mkstemp(cfg);
  ::close(fd);
  {
    std::ofstream out(cfg);
    for (int i = 0; i < n; ++i) out << "url = \"" << url << "\"\noutput = \"/dev/null\"\n";
  }
  t0 = Clock::now();
  int rc = pvesim::run_command(
      {"curl", "-sf", "--cacert", (*sim)->cert_file(), "-H", header, "-K", cfg});
  double curl_reuse_ms = ms_since(t0) / n;
  ::unlink(cfg);
  if (rc != 0) {
    std::fprintf(stderr, "curl -K failed\n");
    return 1;
  }

  std::printf("requests: %d (GET status/current, pvesim model backend, loopback HTTPS)\n", n);
  std::printf("ProxmoxClient 1 thread      : %8.3f ms/request (%.0f req/s)\n", client_ms,
              1000.0 / client_ms);
  std::printf("ProxmoxClient 16 threads    : %8.0f req/s (%d failures)\n", parallel_rps,
              failures.load());
  std::printf("curl CLI, process per call  : %8.3f ms/request (%d calls)\n", curl_spawn_ms, m);
  std::printf("curl CLI, one process -K    : %8.3f ms/request\n", curl_reuse_ms);
  std::printf("ratio curl-per-call / client: %8.1fx\n", curl_spawn_ms / client_ms);
  std::printf("ratio curl -K / client      : %8.2fx\n", curl_reuse_ms / client_ms);
  std::printf("requests counted by pvesim  : %llu\n",
              static_cast<unsigned long long>((*sim)->total_requests()));
  return failures.load() == 0 ? 0 : 1;
}
