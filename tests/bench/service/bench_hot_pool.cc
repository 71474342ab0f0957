// bench_hot_pool: create -> the first command's output (`echo`), cold vs warm vs hot, through
// the REST API and through the library, on the netns stack (a real sshd per sandbox, the real
// agent and ruleset) with pvesim's realistic timing profile; then 64 concurrent hot creates.
// Prints p50/p99 and the ratios of one run. Needs root; not a ctest.
//
//   bench_hot_pool [hot_n=200] [warm_n=20] [cold_n=20]
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <Poco/JSON/Parser.h>
#include <Poco/Net/HTTPClientSession.h>
#include <Poco/Net/HTTPRequest.h>
#include <Poco/Net/HTTPResponse.h>
#include <Poco/StreamCopier.h>

#include "app/api.h"
#include "bench_args.h"
#include "http/auth.h"
#include "pvesandbox/proxmox_client.h"
#include "rest_conn.h"
#include "service/support/in_process_service.h"
#include "sim.h"
#include "support/stack_fixture.h"
#include "timing.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Pct {
  double p50 = 0, p99 = 0;
  std::size_t n = 0;
};
Pct pct(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)], v.size()};
}

using Conn = pvs::bench::RestConn;

// The stack, the REST service in this process, and the timing profile switch.
struct Bench {
  pvs::test::Stack stack;
  pvs::service::ServiceConfig config;
  std::unique_ptr<pvs::test::InProcessService> service;
  std::shared_ptr<pvs::Manager> manager;
  std::map<std::string, int> realistic = pvesim::timing_profile("realistic");

  Bench() {
    config = pvs::bench::rest_config(stack.dir(), 1000, true);
    config.http_threads = 80;
    config.http_max_queued = 128;
    auto s = pvs::test::InProcessService::start(config);
    if (!s) throw std::runtime_error("service: " + s.error().message);
    service = std::move(*s);
  }
  // Tasks as long as on a real node, or instant (to fill and empty pools between runs).
  void timings(bool real) {
    for (auto& [type, ms] : realistic) stack.sim().set_task_ms(type, real ? ms : 0);
  }
  void open(pvs::ManagerConfig mc) {
    service->set_manager(nullptr);
    manager.reset();
    mc.max_sandboxes = 1000;
    auto m = pvs::Manager::open(mc);
    if (!m) throw std::runtime_error("open: " + m.error().message);
    manager = std::move(*m);
    service->set_manager(manager);
  }
  bool wait_ready(int ready) {  // the first pool (hot, else warm)
    for (int i = 0; i < 1200; ++i) {
      auto p = manager->pools();
      if (!p.empty() && p[0].ready >= ready) return true;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return false;
  }
  void destroy_all() {
    std::vector<std::thread> t;
    auto live = manager->list();
    for (int w = 0; w < 8; ++w)
      t.emplace_back([&, w] {
        for (std::size_t i = w; i < live.size(); i += 8) (void)manager->destroy_by_id(live[i].id);
      });
    for (auto& x : t) x.join();
  }
};

// POST /v1/sandboxes, then POST .../exec {"command":"echo hi"}: ms until the output arrived
// (*created: until the create returned).
// `between`: every thread's create is done before any first command runs.
double rest_once(Conn& c, double* created = nullptr, std::barrier<>* between = nullptr) {
  auto t = Clock::now();
  std::string body;
  int status = 0;
  try {
    status = c.call("POST", "/v1/sandboxes", "{}", &body);
  } catch (const std::exception& e) {
    body = e.what();
  }
  if (created) *created = ms_since(t);
  if (between) between->arrive_and_wait();  // a failed create arrives too: no one waits forever
  if (status != 201) throw std::runtime_error("create: " + body);
  auto id =
      Poco::JSON::Parser().parse(body).extract<Poco::JSON::Object::Ptr>()->getValue<std::string>(
          "id");
  if (c.call("POST", "/v1/sandboxes/" + id + "/exec", R"({"command":"echo hi"})", &body) != 200 ||
      body.find("hi\\n") == std::string::npos)
    throw std::runtime_error("exec: " + body);
  return ms_since(t);
}

double library_once(pvs::Manager& m, double* created = nullptr, std::barrier<>* between = nullptr) {
  auto t = Clock::now();
  auto sb = m.create({});
  if (created) *created = ms_since(t);
  if (between) between->arrive_and_wait();
  if (!sb) throw std::runtime_error("create: " + sb.error().message);
  // As the REST exec runs it: with a timeout (registered with the session's watchdog).
  pvs::ExecOptions with_timeout;
  with_timeout.timeout = std::chrono::seconds(60);
  auto r = (*sb)->exec("echo hi", with_timeout);
  if (!r || r->out != "hi\n") throw std::runtime_error("exec failed");
  return ms_since(t);
}

// RSS (KiB) and CPU time (clock ticks) of a process.
struct Usage {
  long rss_kb = 0, ticks = 0;
};
Usage usage_of(pid_t pid) {
  Usage u;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kb = std::atol(line.c_str() + 6);
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 15 && rest >> field; ++i)
      if (i == 14 || i == 15) u.ticks += std::atol(field.c_str());
  }
  return u;
}
// Every process in the namespaces of the stack's CTs.
Usage members_usage(pvs::test::Stack& stack) {
  Usage total;
  for (auto& ns : stack.ct_namespaces()) {
    FILE* f = ::popen(("ip netns pids " + ns).c_str(), "r");
    for (long pid = 0; f && std::fscanf(f, "%ld", &pid) == 1;) {
      auto u = usage_of(static_cast<pid_t>(pid));
      total.rss_kb += u.rss_kb;
      total.ticks += u.ticks;
    }
    if (f) ::pclose(f);
  }
  return total;
}

// The machine's CPU time in ticks: busy (user, nice, system, irq, softirq, steal) and all.
std::pair<long, long> machine_ticks() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  long v[8] = {0}, busy = 0, all = 0;
  stat >> cpu;
  for (long& x : v) stat >> x;
  for (int i = 0; i < 8; ++i) {
    all += v[i];
    if (i != 3 && i != 4) busy += v[i];  // idle, iowait
  }
  return {busy, all};
}

// Where the CPU went during a burst: this process (controller + the bench's clients) and the
// rest of the machine (pvesim, the members' sshd, anything else running).
struct CpuSplit {
  long self0 = usage_of(::getpid()).ticks;
  std::pair<long, long> m0 = machine_ticks();
  void print(int creates) const {
    double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
    long self = usage_of(::getpid()).ticks - self0;
    auto m1 = machine_ticks();
    long busy = m1.first - m0.first, all = m1.second - m0.second;
    std::printf(
        "  CPU: machine %.0f%% busy; this process %.1f ms (%.2f ms per create), the rest "
        "%.1f ms\n",
        all ? 100.0 * static_cast<double>(busy) / static_cast<double>(all) : 0.0,
        1000.0 * static_cast<double>(self) / hz, 1000.0 * static_cast<double>(self) / hz / creates,
        1000.0 * static_cast<double>(busy - self) / hz);
  }
};

// What idle members cost: their processes' memory and CPU, and the controller's.
void pool_cost(Bench& b, long controller_rss_before, int members) {
  auto self0 = usage_of(::getpid());
  auto m0 = members_usage(b.stack);
  std::this_thread::sleep_for(std::chrono::seconds(10));
  auto self1 = usage_of(::getpid());
  auto m1 = members_usage(b.stack);
  double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::printf(
      "%d idle hot members: their processes (sshd listener + the pooled session) %.0f KiB "
      "RSS each, CPU %.3f%% of a core each over 10 s; the controller +%.0f KiB RSS per "
      "member, whole process CPU %.2f%% of a core\n",
      members, static_cast<double>(m1.rss_kb) / members,
      100.0 * static_cast<double>(m1.ticks - m0.ticks) / hz / 10 / members,
      static_cast<double>(self1.rss_kb - controller_rss_before) / members,
      100.0 * static_cast<double>(self1.ticks - self0.ticks) / hz / 10);
}

struct Mode {
  Pct rest, lib;
};

// n REST and n library creates one after another; pools refill in the background. Sandboxes
// stay until the end of the batch (so destroys do not run beside the measurement).
Mode measure(Bench& b, int n, int batch, int refill_to) {
  std::vector<double> rest, lib;
  Conn c(b.service->port());
  for (int done = 0; done < 2 * n;) {
    b.timings(true);
    for (int i = 0; i < batch && done < 2 * n; ++i, ++done) {
      if (done < n)
        rest.push_back(rest_once(c));
      else
        lib.push_back(library_once(*b.manager));
    }
    b.timings(false);
    b.destroy_all();
    if (refill_to > 0 && !b.wait_ready(refill_to)) throw std::runtime_error("pool not refilled");
  }
  return {pct(rest), pct(lib)};
}

// Sum and count of pvs_http_request_duration_seconds for the create route (server-side time).
std::pair<double, double> create_route_time(Bench& b) {
  std::istringstream text(b.service->metrics().render());
  double sum = 0, count = 0;
  for (std::string line; std::getline(text, line);) {
    if (line.find("{route=\"/v1/sandboxes\"}") == std::string::npos) continue;
    if (line.rfind("pvs_http_request_duration_seconds_sum", 0) == 0)
      sum = std::atof(line.c_str() + line.rfind(' ') + 1);
    if (line.rfind("pvs_http_request_duration_seconds_count", 0) == 0)
      count = std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return {sum, count};
}

// The peer: 64 threads each make one bare config write (what a claim costs Proxmox) through a
// client like the Manager's: the ceiling Proxmox (here pvesim, on the same 2 cores) sets.
void concurrent_writes(Bench& b) {
  constexpr int kThreads = 64;
  auto client = pvs::pve::Client::create(b.stack.manager_config().proxmox);
  if (!client) throw std::runtime_error("client: " + client.error().message);
  std::barrier start(kThreads + 1);
  std::vector<std::thread> t;
  for (int i = 0; i < kThreads; ++i)
    t.emplace_back([&, i] {
      start.arrive_and_wait();
      (void)(*client)->update_config("pve", 9000, {{"description", "write " + std::to_string(i)}});
    });
  CpuSplit cpu;
  auto t0 = Clock::now();
  start.arrive_and_wait();
  for (auto& x : t) x.join();
  double wall = ms_since(t0);
  std::printf("peer: 64 concurrent bare config writes: %.1f ms = %.0f writes/s\n", wall,
              kThreads * 1000.0 / wall);
  cpu.print(kThreads);
}

// 64 threads create (and run echo) at once from a full hot pool: creates per second. `apart`:
// every create is done before the first echo runs (the creates alone); else each thread runs
// its echo as soon as it has its sandbox, and the later creates share the CPU with the earlier
// sandboxes' first commands (sshd and a shell per echo).
void concurrent_hot(Bench& b, bool rest, bool apart) {
  constexpr int kThreads = 64;
  b.timings(true);
  std::barrier start(kThreads + 1);
  std::barrier<> between(kThreads);
  std::vector<double> created(kThreads), done(kThreads);
  auto calls0 = b.manager->stats().proxmox_calls;
  auto route0 = create_route_time(b);
  std::atomic<int> failed{0};
  std::vector<std::thread> t;
  Clock::time_point t0;
  for (int i = 0; i < kThreads; ++i)
    t.emplace_back([&, i] {
      std::unique_ptr<Conn> c = rest ? std::make_unique<Conn>(b.service->port()) : nullptr;
      std::string warmup;
      if (c) c->call("GET", "/v1/health", "", &warmup);  // connected, as a keep-alive client is
      start.arrive_and_wait();
      double began = ms_since(t0);
      try {
        double c_ms = 0;
        if (rest) {
          rest_once(*c, &c_ms, apart ? &between : nullptr);
        } else {
          library_once(*b.manager, &c_ms, apart ? &between : nullptr);
        }
        created[i] = began + c_ms;
      } catch (const std::exception& e) {
        ++failed;
        std::fprintf(stderr, "%s\n", e.what());
      }
      done[i] = ms_since(t0);
    });
  CpuSplit cpu;
  t0 = Clock::now();
  start.arrive_and_wait();
  for (auto& x : t) x.join();
  auto calls1 = b.manager->stats().proxmox_calls;
  auto route1 = create_route_time(b);
  double wall = *std::max_element(created.begin(), created.end());
  double wall_echo = *std::max_element(done.begin(), done.end());
  std::printf(
      "64 concurrent hot creates (%s, %s): all created in %.1f ms = %.0f creates/s; with the "
      "first echo %.1f ms = %.0f/s; %d failed\n",
      rest ? "REST" : "library", apart ? "then the echos" : "each echo at once", wall,
      kThreads * 1000.0 / wall, wall_echo, kThreads * 1000.0 / wall_echo, failed.load());
  cpu.print(kThreads);
  auto n = calls1.count - calls0.count;
  std::printf("  Proxmox requests meanwhile: %llu, mean %.2f ms each\n",
              static_cast<unsigned long long>(n),
              n ? (calls1.sum_seconds - calls0.sum_seconds) * 1000 / static_cast<double>(n) : 0.0);
  if (rest && route1.second > route0.second)
    std::printf("  POST /v1/sandboxes inside the server: mean %.2f ms\n",
                (route1.first - route0.first) * 1000 / (route1.second - route0.second));
  b.timings(false);
  b.destroy_all();
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "bench_hot_pool [hot_n=200] [warm_n=20] [cold_n=20]\n"
                        "  create -> first echo output, cold vs warm vs hot, REST and library,\n"
                        "  with pvesim's realistic timing profile (needs root)",
                        3);
  int hot_n = args.count(1, 200), warm_n = args.count(2, 20), cold_n = args.count(3, 20);
  try {
    Bench b;
    std::printf("realistic timing profile (ms):");
    for (auto& [k, v] : b.realistic) std::printf(" %s=%d", k.c_str(), v);
    std::printf("\n");

    auto base = b.stack.manager_config();
    base.background = true;
    auto hot_cfg = base;
    pvs::HotPoolProfile p;
    p.name = "bench";
    p.size = 100;
    hot_cfg.hot_pools = {p};
    b.timings(false);
    long rss_before = usage_of(::getpid()).rss_kb;
    b.open(hot_cfg);
    if (!b.wait_ready(100)) throw std::runtime_error("hot pool not filled");
    pool_cost(b, rss_before, 100);
    auto hot = measure(b, hot_n, 100, 100);
    concurrent_writes(b);
    for (bool apart : {false, true}) {
      for (bool rest : {false, true}) {
        if (!b.wait_ready(100)) throw std::runtime_error("hot pool not refilled");
        concurrent_hot(b, rest, apart);
      }
    }
    auto claims = b.manager->pools()[0];

    auto warm_cfg = base;
    warm_cfg.warm_pool = 4;
    b.open(warm_cfg);  // recovery destroys the hot members
    if (!b.wait_ready(4)) throw std::runtime_error("warm pool not filled");
    auto warm = measure(b, warm_n, 2 * warm_n, 0);
    auto warm_pool = b.manager->pools()[0];

    b.open(base);
    auto cold = measure(b, cold_n, 2 * cold_n, 0);
    b.service->set_manager(nullptr);
    b.manager.reset();

    std::printf("create -> first echo output (ms)          n      p50      p99\n");
    auto row = [](const char* what, const Pct& x) {
      std::printf("  %-36s %4zu %8.1f %8.1f\n", what, x.n, x.p50, x.p99);
    };
    row("hot, REST", hot.rest);
    row("hot, library", hot.lib);
    row("warm, REST", warm.rest);
    row("warm, library", warm.lib);
    row("cold, REST", cold.rest);
    row("cold, library", cold.lib);
    std::printf("hot claims %llu, misses %llu; warm pool hits %llu, misses %llu\n",
                static_cast<unsigned long long>(claims.claims),
                static_cast<unsigned long long>(claims.misses),
                static_cast<unsigned long long>(warm_pool.claims),
                static_cast<unsigned long long>(warm_pool.misses));
    std::printf("ratios (p50): cold/hot REST %.0fx, warm/hot REST %.0fx, cold/hot library %.0fx\n",
                cold.rest.p50 / hot.rest.p50, warm.rest.p50 / hot.rest.p50,
                cold.lib.p50 / hot.lib.p50);
    std::printf("targets: hot REST p50 <= 25 ms (%s), p99 <= 60 ms (%s), >= 40x cold (%s)\n",
                hot.rest.p50 <= 25 ? "met" : "MISSED", hot.rest.p99 <= 60 ? "met" : "MISSED",
                cold.rest.p50 / hot.rest.p50 >= 40 ? "met" : "MISSED");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_hot_pool: %s\n", e.what());
    return 1;
  }
  return 0;
}
