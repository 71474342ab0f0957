// The resolver's per-query cost with the egress log on vs off (#38; target: at most +10%).
// Two real pve-sandbox-resolver processes, one with egress_log (1 s windows, so ELOG lines are
// sent during the run) and one without, against the same fake agent and fake upstream on
// loopback (tests/egress/resolver_fixture.h). Each query goes to both, back to back, in turn
// first, so load on the machine falls on both alike; `queries` sequential A queries a round from
// 16 sources, half listed names, half refused. Prints p50/mean per query and the ratio, then the
// cost of EgressLog::record alone. Run as any user: build-*/tests/bench/egress/resolver_log_bench
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_args.h"
#include "egress_log.h"
#include "resolver_fixture.h"

using namespace pvs::resolver;
using namespace pvs::resolver::testing;

namespace {

struct Side {
  std::string dir;
  std::unique_ptr<FakeAgent> agent;
  std::unique_ptr<ResolverProcess> resolver;
  std::vector<double> us;  // per query
};

std::string temp_dir() {
  char tmpl[] = "/tmp/pvs-resolver-log-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) std::exit(1);
  ::chmod(tmpl, 0755);
  return tmpl;
}

// One query to `side`; false when it got no answer.
bool query(Side& side, int i, int round, int queries) {
  std::string source = "127.0.1." + std::to_string(2 + i % 16);
  std::string name =
      std::string(i % 2 ? "no" : "ok") + std::to_string((round * queries + i) % 64) + ".test";
  auto a = udp_query(source, side.resolver->port(), name, std::chrono::seconds(5));
  if (!a) return false;
  side.us.push_back(static_cast<double>(a->elapsed.count()));
  return true;
}

// `queries` queries to each side, the same query to both back to back (in turn first), so a
// burst of load on the machine falls on both alike.
bool round_of(Side& off, Side& on, int queries, int round) {
  for (int i = 0; i < queries; ++i) {
    bool on_first = (i + round) % 2 == 1;
    if (!query(on_first ? on : off, i, round, queries)) return false;
    if (!query(on_first ? off : on, i, round, queries)) return false;
  }
  return true;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// ns per EgressLog::record, `n` decisions over 256 sources and 64 names each.
double record_ns(int n) {
  EgressLog log({.window_ms = 60000, .max_names_per_source = 32, .max_sources = 4096});
  std::vector<std::string> names;
  for (int i = 0; i < 64; ++i) names.push_back("name" + std::to_string(i) + ".example.org");
  auto answer = *pvs::Ipv4Address::parse("198.51.100.1");
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    EgressDecision d{pvs::Ipv4Address(0x0a630000u + static_cast<std::uint32_t>(i % 256)),
                     names[static_cast<std::size_t>(i / 256 % 64)],
                     i % 2 == 0,
                     "",
                     {}};
    if (d.allowed) d.answer = {answer};
    log.record(d, 0);
  }
  auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start);
  return ns.count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "resolver_log_bench [--rounds N] [--queries N]\n"
                        "  N rounds (default 20) of N sequential queries (default 500), each to\n"
                        "  a resolver with the egress log and one without, back to back",
                        0, {"--rounds", "--queries"});
  int rounds = args.count("--rounds", 20);
  int queries = args.count("--queries", 500);
  FakeUpstream upstream("held-never");
  Side off, on;
  for (Side* s : {&off, &on}) {
    s->dir = temp_dir();
    s->agent = std::make_unique<FakeAgent>(s->dir + "/agent.sock");
  }
  off.resolver = std::make_unique<ResolverProcess>(off.dir, *off.agent, upstream, "");
  on.resolver = std::make_unique<ResolverProcess>(on.dir, *on.agent, upstream,
                                                  "egress_log: true\negress_log_window_ms: 1000\n");
  if (!off.resolver->started() || !on.resolver->started()) {
    std::fprintf(stderr, "a resolver did not start (%s)\n", resolver_binary().c_str());
    return 1;
  }
  round_of(off, on, 100, 0);  // warm up both
  off.us.clear();
  on.us.clear();
  for (int r = 0; r < rounds; ++r) {
    if (!round_of(off, on, queries, r)) {
      std::fprintf(stderr, "a query got no answer\n");
      return 1;
    }
  }
  std::printf("resolver per query (%d rounds x %d queries, 16 sources, half refused):\n", rounds,
              queries);
  for (Side* s : {&off, &on}) {
    std::printf("  egress_log %-3s  p50 %7.1f us  p90 %7.1f us  mean %7.1f us\n",
                s == &on ? "on" : "off", pct(s->us, 0.5), pct(s->us, 0.9), mean(s->us));
  }
  std::printf("  ratio on/off:   p50 %.3f  mean %.3f (target <= 1.10)\n",
              pct(on.us, 0.5) / pct(off.us, 0.5), mean(on.us) / mean(off.us));
  std::printf("  ELOG lines the agent got: %zu\n", on.agent->log().size());
  double ns = record_ns(1'000'000);
  std::printf(
      "EgressLog::record alone: %.0f ns per decision (1,000,000 decisions), %.2f%% of "
      "the p50 query without the log\n",
      ns, 100.0 * ns / (pct(off.us, 0.5) * 1000.0));
  for (Side* s : {&off, &on}) {
    s->resolver.reset();
    s->agent.reset();
    std::filesystem::remove_all(s->dir);
  }
  return 0;
}
