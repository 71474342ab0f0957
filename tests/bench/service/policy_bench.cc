// policy_bench: what the policy adds to a call. 100 rules (exec patterns, path globs, sizes),
// decisions on typical command lines where no rule matches (the worst case: every rule is
// tried), p50/p99 per decision; the peer in the same run is the same 100 patterns searched
// with std::regex (ECMAScript, backtracking), the obvious hand-written alternative.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "../bench_args.h"
#include "policy/policy.h"

namespace {

using Clock = std::chrono::steady_clock;
using pvs::service::PolicyAction;

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "policy_bench [decisions=20000]\n  100 rules, decide() vs std::regex", 1);
  int n = args.count(1, 20000);
  pvs::service::PolicySpec spec;
  std::vector<std::string> patterns;
  for (int i = 0; i < 100; ++i) {
    pvs::service::PolicyRuleSpec r;
    r.where = "policy.default[" + std::to_string(i) + "]";
    r.verdict = pvs::service::Verdict::kDeny;
    if (i % 4 == 3) {
      r.actions = {PolicyAction::kFilesWrite};
      r.path = "/etc/tool" + std::to_string(i) + "/*";
    } else {
      r.actions = {PolicyAction::kExec};
      r.command = "(^|[;&|\\s])tool" + std::to_string(i) + "\\s+(install|--force)\\b";
      patterns.push_back(r.command);
    }
    spec.default_rules.push_back(r);
  }
  auto policy = pvs::service::Policy::compile(spec);
  if (!policy) {
    std::fprintf(stderr, "%s\n", policy.error().message.c_str());
    return 1;
  }
  std::vector<std::regex> peers;
  for (const auto& p : patterns) peers.emplace_back(p, std::regex::ECMAScript);
  const std::vector<std::string> lines = {
      "python3 -m pytest -q tests/", "cd /work && make -j4 all && ./run --verbose",
      "git clone https://example.invalid/repo.git && cd repo && npm test",
      "cat /etc/os-release; uname -a; df -h"};
  pvs::service::PolicyRequest r;
  r.action = PolicyAction::kExec;
  std::vector<double> ours, peer;
  for (int i = 0; i < n; ++i) {
    r.text = lines[static_cast<std::size_t>(i) % lines.size()];
    auto t0 = Clock::now();
    auto d = policy->decide("agent", r);
    auto t1 = Clock::now();
    bool any = false;
    for (const auto& re : peers) any = any || std::regex_search(r.text, re);
    auto t2 = Clock::now();
    if (d.verdict != pvs::service::Verdict::kAllow || any) return 1;  // nothing may match
    ours.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    peer.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  std::printf("100 rules, %d decisions, no rule matching (all tried)\n", n);
  std::printf("  decide() (RE2)        p50 %7.2f us  p99 %7.2f us\n", pct(ours, 0.5),
              pct(ours, 0.99));
  std::printf("  std::regex (peer)     p50 %7.2f us  p99 %7.2f us\n", pct(peer, 0.5),
              pct(peer, 0.99));
  std::printf("  ratio peer/ours p50 %.1fx; target: decide() p50 <= 50 us (%s)\n",
              pct(peer, 0.5) / pct(ours, 0.5), pct(ours, 0.5) <= 50 ? "met" : "MISSED");
  return 0;
}
