// What DHCP addressing costs a create: the same create/destroy loop on the netns stack (real
// sshd per sandbox, real agent and ruleset, zero-duration Proxmox tasks) with static addresses
// and with ip=dhcp (the agent's reservation file + the node's dnsmasq + busybox udhcpc in the
// sandbox namespace). The DHCP exchange itself is timed alone as the peer.
//
//   lifecycle_dhcp_bench [iterations=30]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_args.h"
#include "pvesandbox/agent_client.h"
#include "pvesandbox/manager.h"
#include "stack_loop.h"
#include "support/stack_fixture.h"

namespace {

using pvs::bench::Clock;
using pvs::bench::ms_since;
using pvs::bench::p50;
using pvs::bench::Run;

bool loop(bool dhcp, int n, Run* out) {
  pvs::test::StackOptions so;
  so.dhcp = dhcp;
  return pvs::bench::create_destroy_loop(so, n, dhcp ? "dhcp" : "static", out);
}

// The bare exchange: a namespace on the stack's bridge whose port is bound at the agent (which
// writes the reservation), then udhcpc alone, n times.
double bare_exchange_ms(int n) {
  pvs::test::StackOptions so;
  so.dhcp = true;
  pvs::test::Stack stack(so);
  std::string ns = stack.id() + "-bare";
  auto sh = [](const std::string& cmd) { return std::system(cmd.c_str()) == 0; };
  auto mac = *pvs::MacAddress::parse("02:53:0a:63:00:63");
  if (!sh("ip netns add " + ns) ||
      !sh("ip link add veth99999i0 type veth peer name eth0 netns " + ns) ||
      !sh("ip -n " + ns + " link set eth0 address " + mac.to_string() + " up") ||
      !sh("ip link set veth99999i0 master vmbr1 up")) {
    std::fprintf(stderr, "bare exchange: namespace set-up failed\n");
    return -1;
  }
  pvs::AgentClientOptions ao;
  ao.socket_path = stack.agent_socket();
  pvs::AgentClient agent(ao);
  if (auto b = agent.bind({"veth99999i0", mac, *pvs::Ipv4Address::parse("10.99.0.99")}); !b) {
    std::fprintf(stderr, "BIND: %s\n", b.error().message.c_str());
    return -1;
  }
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    if (!sh("ip netns exec " + ns + " " PVS_DHCP_CLIENT " run eth0 >/dev/null 2>&1")) break;
    v.push_back(ms_since(t));
  }
  sh("ip netns del " + ns);
  return v.size() == static_cast<std::size_t>(n) ? p50(v) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  pvs::bench::Args args(argc, argv,
                        "lifecycle_dhcp_bench [iterations=30]\n"
                        "  create/destroy with static addresses vs ip=dhcp, and the DHCP exchange",
                        1);
  int n = args.count(1, 30);
  Run st, dh;
  if (!loop(false, n, &st) || !loop(true, n, &dh)) return 1;
  double bare = bare_exchange_ms(n);
  std::printf("netns stack, zero-duration tasks, %d iterations, p50 (ms)\n", n);
  std::printf("  create, static address              %8.2f\n", p50(st.create));
  std::printf("  create, ip=dhcp (dnsmasq + udhcpc)  %8.2f  (%+.2f ms, ratio %.2f)\n",
              p50(dh.create), p50(dh.create) - p50(st.create), p50(dh.create) / p50(st.create));
  std::printf("  destroy, static / dhcp              %8.2f / %.2f\n", p50(st.destroy),
              p50(dh.destroy));
  std::printf("  peer: bare udhcpc exchange          %8.2f\n", bare);
  std::printf(
      "  (the create difference is the exchange plus the Manager's task-status polling, which\n"
      "   doubles from 20 ms: a start task that ends a little later can be seen one poll later)\n");
  return 0;
}
