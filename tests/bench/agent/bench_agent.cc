// Benchmark of pve-sandbox-agent against the nft CLI, in one run, in a namespace of its own.
//
//   bench_agent [ops]        (default 1000 operations per side)
//
// 1. ALLOW+REVOKE through the agent's socket vs `nft add element` / `nft delete element` as
//    subprocesses: p50/p99 per operation and the ratio.
// 2. SYNC of 10,000 addresses through the verb code in-process (the protocol line limit of
//    64 KiB holds about 5,000), the largest SYNC that fits one line through the socket, and
//    `nft -f` of the same 10,000-element atomic replace.
// 3. The agent's RSS holding 10,000 elements.
// Not part of ctest. Needs root, ip and nft.
#include <fcntl.h>
#include <linux/netfilter.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent.h"
#include "agent/agent_test_util.h"
#include "bench_args.h"
#include "nft_backend.h"
#include "pvesandbox/common/log.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using pvs::test::AgentProcess;
using pvs::test::LineClient;
using pvs::test::NetNs;
using pvs::test::TempDir;

// CPU time of the calling thread (user + system): the kernel's batch processing runs inside
// this thread's sendmsg(), so it counts; time spent waiting for a CPU on a loaded machine does not.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// CPU time (user + system) of terminated children so far.
double children_cpu_us() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  auto us = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) * 1e6 + static_cast<double>(tv.tv_usec);
  };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1));
  return v[i];
}

double median(std::vector<double> v) {
  return percentile(std::move(v), 50);
}

// Runs argv (looked up in PATH) and waits; returns false on a non-zero exit.
bool spawn_wait(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return false;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string addr(std::uint32_t i) {
  return pvs::Ipv4Address(0x0a630002u + i).to_string();
}

long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

// The disk's price of durability: append one journal-sized record to a file in `dir` and
// fdatasync it, `n` times (what every durable change costs at least, whatever the design).
std::vector<double> fdatasync_floor(const std::string& dir, int n) {
  std::string path = dir + "/fdatasync-probe";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  std::vector<double> out;
  const char record[] = "grant 10.99.0.5 1763900000123\n";
  for (int i = 0; i < n && fd >= 0; ++i) {
    auto t0 = Clock::now();
    if (::write(fd, record, sizeof(record) - 1) < 0 || ::fdatasync(fd) != 0) break;
    out.push_back(us_since(t0));
  }
  if (fd >= 0) ::close(fd);
  ::unlink(path.c_str());
  return out;
}

// What every section needs: the namespace with the contract's tables, a directory, the size.
struct Ctx {
  NetNs& ns;
  TempDir& dir;
  int ops;
};

// An in-process agent on the namespace's tables (the verb code and netlink, no socket).
std::unique_ptr<pvs::agent::Agent> in_process_agent(Ctx& c, const std::string& state_file,
                                                    bool fsync) {
  pvs::agent::AgentConfig config;
  config.sandbox_cidr = *pvs::Cidr::parse("10.99.0.0/16");
  config.gateway = *pvs::Ipv4Address::parse("10.99.0.1");
  config.state_file = state_file;
  config.state_fsync = fsync;
  std::unique_ptr<pvs::agent::NftBackend> backend;
  {
    pvs::test::EnterNs enter(c.ns);
    backend = std::move(*pvs::agent::NftBackend::open());
  }
  auto agent = std::make_unique<pvs::agent::Agent>(config, std::move(backend));
  (void)agent->start();
  return agent;
}

// ---- 1. per-operation latency --------------------------------------------------------------

// ALLOW and REVOKE in turn through an agent's socket, the agent configured with `extra`.
std::vector<double> agent_ops(Ctx& c, const std::string& extra) {
  std::vector<double> out;
  TempDir d;
  AgentProcess agent(c.ns, d, extra);
  LineClient client(agent.socket());
  client.call("HELLO 1");
  for (int i = 0; i < 50; ++i) {  // warm-up
    client.call("ALLOW " + addr(static_cast<std::uint32_t>(i)));
    client.call("REVOKE " + addr(static_cast<std::uint32_t>(i)));
  }
  for (int i = 0; i < c.ops / 2; ++i) {
    std::string a = addr(static_cast<std::uint32_t>(i % 5000));
    auto t0 = Clock::now();
    if (client.call("ALLOW " + a) != "OK") std::printf("ALLOW failed\n");
    out.push_back(us_since(t0));
    t0 = Clock::now();
    if (client.call("REVOKE " + a) != "OK") std::printf("REVOKE failed\n");
    out.push_back(us_since(t0));
  }
  return out;
}

// The default: the journal in the runtime directory, a tmpfs (/run on a Proxmox node; here
// /dev/shm, since this machine's /run is on its disk), appended before each OK, no fsync.
std::vector<double> agent_ops_on_tmpfs(Ctx& c) {
  std::string shm = "/dev/shm/pvs-bench-agent-XXXXXX";
  if (::mkdtemp(shm.data()) == nullptr) {
    std::perror("mkdtemp /dev/shm");
    std::exit(1);
  }
  auto ops = agent_ops(c, "state_file: " + shm + "/agent-state\nstate_fsync: false\n");
  std::filesystem::remove_all(shm);
  return ops;
}

// Group commit: `clients` connections each doing ALLOW/REVOKE in lock-step, fsync on. The
// agent writes the journal once per loop turn for every change of that turn. Changes per second.
double concurrent(Ctx& c, int clients, int per_client, std::vector<double>* latencies) {
  TempDir d;
  AgentProcess agent(c.ns, d, "state_fsync: true\n");
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int k = 0; k < clients; ++k) {
    threads.emplace_back([&, k] {
      LineClient client(agent.socket());
      for (int i = 0; i < per_client; ++i) {
        auto at = [&](int j) { return addr(static_cast<std::uint32_t>(k * per_client + j)); };
        auto t = Clock::now();
        if (client.call(i % 2 == 0 ? "ALLOW " + at(i) : "REVOKE " + at(i - 1)) != "OK")
          std::printf("concurrent change failed\n");
        lat[static_cast<std::size_t>(k)].push_back(us_since(t));
      }
    });
  }
  for (auto& t : threads) t.join();
  double seconds = us_since(t0) / 1e6;
  for (auto& l : lat) latencies->insert(latencies->end(), l.begin(), l.end());
  return static_cast<double>(clients * per_client) / seconds;
}

std::vector<double> nft_ops(Ctx& c) {
  std::vector<double> out;
  pvs::test::EnterNs enter(c.ns);  // children of this thread run in the namespace
  for (int i = 0; i < c.ops / 2; ++i) {
    std::string a = addr(static_cast<std::uint32_t>(i % 5000));
    auto t0 = Clock::now();
    spawn_wait({"nft", "add", "element", "inet", "sandbox", "internet_allowed", "{", a, "}"});
    out.push_back(us_since(t0));
    t0 = Clock::now();
    spawn_wait({"nft", "delete", "element", "inet", "sandbox", "internet_allowed", "{", a, "}"});
    out.push_back(us_since(t0));
  }
  return out;
}

// The same operations through the verb code in-process: netlink only, no socket, no state file.
std::vector<double> verb_ops(Ctx& c) {
  std::vector<double> out;
  auto agent = in_process_agent(c, c.dir.file("verb-state"), false);
  pvs::agent::Peer peer{1, 0, 0};
  for (int i = 0; i < c.ops / 2; ++i) {
    pvs::Ipv4Address a(0x0a630002u + static_cast<std::uint32_t>(i % 5000));
    auto t0 = Clock::now();
    agent->handle(peer, pvs::proto::Request(pvs::proto::AllowRequest{{a, std::nullopt}}));
    out.push_back(us_since(t0));
    t0 = Clock::now();
    agent->handle(peer, pvs::proto::Request(pvs::proto::RevokeRequest{a}));
    out.push_back(us_since(t0));
  }
  return out;
}

void bench_latency(Ctx& c) {
  // The peer configuration of the default: the journal on the disk with state_fsync: true (one
  // fdatasync per event-loop turn before the replies).
  std::vector<double> tmpfs = agent_ops_on_tmpfs(c), fsync = agent_ops(c, "state_fsync: true\n");
  std::vector<double> lat1, lat16;
  double ops1 = concurrent(c, 1, 200, &lat1);
  double ops16 = concurrent(c, 16, 100, &lat16);
  std::vector<double> floor = fdatasync_floor(c.dir.path(), 300);
  std::vector<double> nft = nft_ops(c);
  double a50 = median(tmpfs), a99 = percentile(tmpfs, 99);
  double f50 = median(fsync), f99 = percentile(fsync, 99);
  double n50 = median(nft), n99 = percentile(nft, 99);
  std::printf("\nALLOW/REVOKE per operation (%zu ops each)\n", tmpfs.size());
  std::printf("  agent socket, default (tmpfs)     p50 %9.1f us   p99 %9.1f us\n", a50, a99);
  std::printf("  agent socket, disk + state_fsync  p50 %9.1f us   p99 %9.1f us\n", f50, f99);
  std::printf("  nft CLI subprocess                p50 %9.1f us   p99 %9.1f us\n", n50, n99);
  std::printf("  ratio nft/agent (default)         p50 %9.1fx    p99 %9.1fx\n", n50 / a50,
              n99 / a99);
  std::printf("  ratio nft/agent (disk + fsync)    p50 %9.1fx    p99 %9.1fx\n", n50 / f50,
              n99 / f99);
  double floor50 = median(floor);
  std::printf("  disk: append + fdatasync alone    p50 %9.1f us   p99 %9.1f us  (%zu runs)\n",
              floor50, percentile(floor, 99), floor.size());
  std::printf("  100x the CLI needs p50 <= %.0f us; one fdatasync alone is %.1fx that budget\n",
              n50 / 100, floor50 / (n50 / 100));
  std::printf("group commit, state_fsync=true (changes/s; a change = ALLOW or REVOKE)\n");
  std::printf("   1 client : %8.0f changes/s  p50 %9.1f us  p99 %9.1f us\n", ops1, median(lat1),
              percentile(lat1, 99));
  std::printf(
      "  16 clients: %8.0f changes/s  p50 %9.1f us  p99 %9.1f us  (%.1f changes per "
      "fdatasync at the disk's p50)\n",
      ops16, median(lat16), percentile(lat16, 99), ops16 * floor50 / 1e6);
  std::vector<double> verb = verb_ops(c);
  std::printf("  verb code in-process (netlink)    p50 %9.1f us   p99 %9.1f us\n", median(verb),
              percentile(verb, 99));
}

// ---- 2. SYNC of 10,000 ----------------------------------------------------------------------
// Wall time and CPU time (user + system: the kernel's batch processing runs inside sendmsg()),
// per run. (The user/system split of getrusage() is tick-sampled, too coarse for a few ms; use
// `valgrind --tool=callgrind bench_agent 10 sync` for the agent's own instructions.)
struct Samples {
  std::vector<double> wall, cpu;
  void add(Clock::time_point t0, double c0) {
    wall.push_back(us_since(t0));
    cpu.push_back(thread_cpu_us() - c0);
  }
  void print(const char* what) const {
    std::printf("  %-46s %7.2f ms wall %7.2f ms CPU\n", what, median(wall) / 1000,
                median(cpu) / 1000);
  }
};

struct SyncFigures {
  Samples backend, verb, line, line_fsync;
  double first_fill_ms = 0, first_fill_cpu_ms = 0;
  std::vector<double> socket, nft, nft_cpu;
  std::size_t fit = 0;  // the addresses of the largest SYNC that fits one protocol line
};

// Two disjoint sets of 10,000 addresses, from 10.99.0.2 and from 10.99.48.2.
pvs::proto::SyncRequest sync_of(std::uint32_t first) {
  pvs::proto::SyncRequest r;
  for (std::uint32_t i = 0; i < 10000; ++i)
    r.grants.push_back({pvs::Ipv4Address(first + i), std::nullopt});
  return r;
}

// The backend alone: one flush + add batch, alternating between two disjoint sets.
void backend_replace(pvs::agent::Agent& agent, SyncFigures& f) {
  std::vector<pvs::agent::RawElement> ea, eb;
  for (std::uint32_t i = 0; i < 10000; ++i) {
    ea.push_back({pvs::agent::ipv4_key(pvs::Ipv4Address(0x0a630002u + i)), std::nullopt});
    eb.push_back({pvs::agent::ipv4_key(pvs::Ipv4Address(0x0a633002u + i)), std::nullopt});
  }
  pvs::agent::SetRef set{NFPROTO_INET, "sandbox", "internet_allowed"};
  for (int i = 0; i < 21; ++i) {
    pvs::agent::Batch batch;
    batch.flush(set);
    batch.add(set, i % 2 == 0 ? ea : eb);
    auto t0 = Clock::now();
    double c0 = thread_cpu_us();
    if (!agent.backend().commit(batch)) std::printf("backend replace failed\n");
    if (i > 0) f.backend.add(t0, c0);
    if (i == 0) {
      f.first_fill_ms = us_since(t0) / 1000;
      f.first_fill_cpu_ms = (thread_cpu_us() - c0) / 1000;
    }
  }
}

// SYNCs of 10,000 through the verb code in-process, alternating between two sets: with a parsed
// request and no state file (fsync off only), then what the server does after parsing a SYNC:
// verb, then the state file (one journal group, or a snapshot when the journal has grown past
// 4 MiB: about one run in 13). A 10,000-address line exceeds the protocol's 64 KiB line limit;
// the socket figure includes parsing.
void sync_in_process(Ctx& c, bool fsync, SyncFigures& f) {
  auto agent =
      in_process_agent(c, c.dir.file(fsync ? "inproc-state-fsync" : "inproc-state"), fsync);
  pvs::proto::SyncRequest a = sync_of(0x0a630002u), b = sync_of(0x0a633002u);
  pvs::agent::Peer peer{1, 0, 0};
  if (!fsync) {
    backend_replace(*agent, f);
    for (int i = 0; i < 21; ++i) {
      auto t0 = Clock::now();
      double c0 = thread_cpu_us();
      std::string reply = agent->handle(peer, pvs::proto::Request(i % 2 == 0 ? a : b));
      if (i > 0) f.verb.add(t0, c0);
      if (reply != "OK 10000") std::printf("SYNC failed: %s\n", reply.c_str());
    }
    (void)agent->persist();
  }
  for (int i = 0; i < 21; ++i) {
    auto t0 = Clock::now();
    double c0 = thread_cpu_us();
    std::string reply = agent->handle(peer, pvs::proto::Request(i % 2 == 0 ? a : b));
    bool persisted = agent->persist().has_value();
    if (i > 0) (fsync ? f.line_fsync : f.line).add(t0, c0);
    if (reply != "OK 10000" || !persisted) std::printf("SYNC failed: %s\n", reply.c_str());
  }
  // The kernel really holds the last SYNC's 10,000 addresses (run 20 replaced with `a`).
  auto listed = agent->backend().list({NFPROTO_INET, "sandbox", "internet_allowed"});
  std::size_t in_a = 0;
  for (const auto& e : listed ? *listed : std::vector<pvs::agent::ListedElement>{}) {
    std::uint32_t v = pvs::agent::decode_ipv4_key(e.key)->to_uint();
    if (v >= 0x0a630002u && v < 0x0a630002u + 10000) ++in_a;
  }
  if (!listed || listed->size() != 10000 || in_a != 10000) {
    std::printf("SYNC check failed: the kernel holds %zu elements, %zu expected ones\n",
                listed ? listed->size() : 0, in_a);
  }
}

// The largest SYNC that fits one line, through the agent's socket; then 3. the agent's RSS with
// 10,000 elements (those by SYNC, the rest by pipelined ALLOWs).
void sync_socket_and_rss(Ctx& c, SyncFigures& f) {
  AgentProcess agent(c.ns, c.dir, "state_fsync: false\n");
  LineClient client(agent.socket());
  std::string sa = "SYNC", sb = "SYNC";
  for (std::uint32_t i = 0;; ++i) {
    std::string next_a = " " + pvs::Ipv4Address(0x0a630002u + i).to_string();
    std::string next_b = " " + pvs::Ipv4Address(0x0a638002u + i).to_string();
    if (sa.size() + next_a.size() > pvs::proto::kMaxRequestLine ||
        sb.size() + next_b.size() > pvs::proto::kMaxRequestLine) {
      break;
    }
    sa += next_a;
    sb += next_b;
    ++f.fit;
  }
  for (int i = 0; i < 21; ++i) {
    auto t0 = Clock::now();
    std::string reply = client.call(i % 2 == 0 ? sa : sb, 30000);
    double t = us_since(t0);
    if (reply != "OK " + std::to_string(f.fit)) std::printf("SYNC failed: %s\n", reply.c_str());
    if (i > 0) f.socket.push_back(t);
  }
  std::string allows;
  for (std::uint32_t i = 0; i < 10000 - f.fit; ++i)
    allows += "ALLOW " + pvs::Ipv4Address(0x0a63a002u + i).to_string() + "\n";
  client.send_raw(allows);
  for (std::uint32_t i = 0; i < 10000 - f.fit; ++i) client.read_line(30000);
  std::string list = client.call("LIST", 30000);
  std::printf("\nagent holds %s elements; RSS %ld KiB (%.2f MiB)\n",
              list.substr(3, list.find(' ', 3) - 3).c_str(), rss_kib(agent.pid()),
              static_cast<double>(rss_kib(agent.pid())) / 1024.0);
}

// `nft -f` of the same 10,000-element atomic replace, alternating between the two sets.
void sync_nft(Ctx& c, SyncFigures& f) {
  std::string file_a = c.dir.file("a.nft"), file_b = c.dir.file("b.nft");
  {
    std::ofstream fa(file_a), fb(file_b);
    fa << "flush set inet sandbox internet_allowed\nadd element inet sandbox internet_allowed { ";
    fb << "flush set inet sandbox internet_allowed\nadd element inet sandbox internet_allowed { ";
    for (std::uint32_t i = 0; i < 10000; ++i) {
      fa << (i ? ", " : "") << pvs::Ipv4Address(0x0a630002u + i).to_string();
      fb << (i ? ", " : "") << pvs::Ipv4Address(0x0a633002u + i).to_string();
    }
    fa << " }\n";
    fb << " }\n";
  }
  pvs::test::EnterNs enter(c.ns);
  for (int i = 0; i < 11; ++i) {
    auto t0 = Clock::now();
    double c0 = children_cpu_us();
    if (!spawn_wait({"nft", "-f", i % 2 == 0 ? file_a : file_b})) std::printf("nft -f failed\n");
    double t = us_since(t0);
    if (i > 0) {
      f.nft.push_back(t);
      f.nft_cpu.push_back(children_cpu_us() - c0);
    }
  }
}

void report_sync(const SyncFigures& f) {
  std::printf("\nSYNC (atomic replace), median of %zu runs\n", f.verb.wall.size());
  std::printf("  %-46s %7.2f ms wall %7.2f ms CPU  (once)\n",
              "10,000 into the fresh, empty set (run 0)", f.first_fill_ms, f.first_fill_cpu_ms);
  f.backend.print("10,000 addresses, backend batch only");
  f.verb.print("10,000 addresses, verb code (parsed request)");
  f.line.print("10,000, verb + state file, fsync off");
  f.line_fsync.print("10,000, verb + state file, fsync on");
  if (!f.socket.empty()) {
    std::printf("  %zu addresses (one 64 KiB line), socket       %7.2f ms wall\n", f.fit,
                median(f.socket) / 1000);
  }
  if (!f.nft.empty()) {
    std::printf("  10,000 addresses, nft -f subprocess            %7.2f ms wall %7.2f ms CPU\n",
                median(f.nft) / 1000, median(f.nft_cpu) / 1000);
    std::printf("  ratio nft -f / agent verb+state (fsync off): wall %.1fx, CPU %.1fx\n",
                median(f.nft) / median(f.line.wall), median(f.nft_cpu) / median(f.line.cpu));
  }
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "bench_agent [ops=1000] [sync]\n"
                        "  ops: ALLOW/REVOKE operations per side (at least 10)\n"
                        "  sync: only the SYNC section (for valgrind --tool=callgrind)",
                        2);
  int ops = args.count(1, 1000, 10);
  std::string only = args.word(2);
  if (!only.empty() && only != "sync") args.fail("unknown section \"" + only + "\"");
  pvs::log::set_level(pvs::log::Level::kError);  // the in-process agents' change lines
  NetNs ns;
  ns.load_contract();
  TempDir dir;
  Ctx c{ns, dir, ops};
  std::printf("pve-sandbox-agent benchmark: %d operations per side, namespace %s\n", ops,
              ns.name().c_str());
  if (only.empty()) bench_latency(c);
  SyncFigures f;
  for (bool fsync : {false, true}) sync_in_process(c, fsync, f);
  if (only.empty()) {
    sync_socket_and_rss(c, f);
    sync_nft(c, f);
  }
  report_sync(f);
  return 0;
}
