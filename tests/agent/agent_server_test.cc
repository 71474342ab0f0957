// The pve-sandbox-agent binary end to end: started inside a namespace of the test's own with the
// contract's tables, spoken to over its unix socket, checked against `nft list`: its verbs,
// routes, leases, drift repair and restarts.
#include "agent/agent_server_fixture.h"

namespace pvs::test {
namespace {

TEST_F(AgentServerTest, EveryVerb) {
  start();
  LineClient c(agent_->socket());
  EXPECT_EQ(c.call("HELLO 1"), "OK pve-sandbox-agent " PVS_VERSION " proto=1");
  EXPECT_TRUE(c.call("HELLO 2").starts_with("ERR 400"));
  EXPECT_EQ(c.call("ALLOW 10.99.0.5"), "OK");
  EXPECT_EQ(c.call("ALLOW 10.99.0.6 ttl=300"), "OK");
  std::string list = c.call("LIST");
  EXPECT_TRUE(list.starts_with("OK 2 10.99.0.5 10.99.0.6@")) << list;
  EXPECT_NE(nft_set().find("10.99.0.6 timeout 5m"), std::string::npos) << nft_set();
  EXPECT_EQ(c.call("REVOKE 10.99.0.5"), "OK");
  EXPECT_EQ(nft_set().find("10.99.0.5"), std::string::npos);
  EXPECT_EQ(c.call("SYNC 10.99.1.1 10.99.1.2@60"), "OK 2");
  list = c.call("LIST");
  EXPECT_TRUE(list.starts_with("OK 2 10.99.1.1 10.99.1.2@")) << list;
  EXPECT_EQ(c.call("SYNC"), "OK 0");
  EXPECT_EQ(c.call("LIST"), "OK 0");

  // BIND against a real bridge port in the namespace.
  ns_.run(
      "ip link add br0 type bridge && ip link add veth100i0 type veth peer name ct100 && "
      "ip link set veth100i0 master br0 && ip link set br0 up && ip link set veth100i0 up");
  EXPECT_EQ(c.call("BIND veth100i0 BC:24:11:2A:3B:4C 10.99.0.7"), "OK");
  EXPECT_EQ(c.call("BINDINGS"), "OK 1 veth100i0=bc:24:11:2a:3b:4c/10.99.0.7");
  std::string l2 = ns_.output("nft list table bridge sandbox_l2");
  EXPECT_NE(l2.find("\"veth100i0\" . bc:24:11:2a:3b:4c"), std::string::npos) << l2;
  EXPECT_NE(l2.find("\"veth100i0\" . 10.99.0.7"), std::string::npos) << l2;
  // BIND replaces the port's binding.
  EXPECT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:01 10.99.0.8"), "OK");
  EXPECT_EQ(c.call("BINDINGS"), "OK 1 veth100i0=bc:24:11:00:00:01/10.99.0.8");
  l2 = ns_.output("nft list table bridge sandbox_l2");
  EXPECT_EQ(l2.find("10.99.0.7"), std::string::npos) << l2;
  // An address bound to another port is a conflict; invalid ports and MACs are bad requests.
  EXPECT_TRUE(c.call("BIND veth101i0 bc:24:11:00:00:02 10.99.0.8").starts_with("ERR 409"));
  EXPECT_TRUE(c.call("BIND eth0 bc:24:11:00:00:02 10.99.0.9").starts_with("ERR 400"));
  EXPECT_TRUE(c.call("BIND veth101i0 01:00:5e:00:00:01 10.99.0.9").starts_with("ERR 400"));
  EXPECT_TRUE(c.call("BIND veth101i0 00:00:00:00:00:00 10.99.0.9").starts_with("ERR 400"));
  EXPECT_TRUE(c.call("BIND veth101i0 bc:24:11:00:00:02 10.99.0.1").starts_with("ERR 403"));
  EXPECT_EQ(c.call("BIND fwpr101p0 bc:24:11:00:00:02 10.99.0.9"), "OK");
  EXPECT_EQ(c.call("UNBIND veth100i0"), "OK");
  EXPECT_EQ(c.call("UNBIND veth100i0"), "OK");  // idempotent
  EXPECT_EQ(c.call("BINDINGS"), "OK 1 fwpr101p0=bc:24:11:00:00:02/10.99.0.9");

  std::string status = c.call("STATUS");
  ASSERT_TRUE(status.starts_with("OK ")) << status;
  auto fields = proto::parse_status_payload(status.substr(3));
  ASSERT_TRUE(fields) << status;
  EXPECT_EQ(proto::find_field(*fields, "table"), "present");
  EXPECT_EQ(proto::find_field(*fields, "set"), "present");
  EXPECT_EQ(proto::find_field(*fields, "elements"), "0");
  EXPECT_EQ(proto::find_field(*fields, "l2"), "present");
  EXPECT_TRUE(proto::find_field(*fields, "last_reapply").has_value());

  // Every change was logged with the peer.
  std::string log = agent_->log_text();
  EXPECT_NE(log.find("uid=0 pid=" + std::to_string(::getpid()) +
                     " verb=ALLOW address=10.99.0.6 ttl=300 result=OK"),
            std::string::npos)
      << log;
}

// ROUTE/UNROUTE (the port proxy's routes) against the kernel's proxy_routes: only for an
// address bound to a sandbox port, a port 1-65535 and a life of 1-300 s; refreshed by asking
// again; UNROUTE idempotent; every change logged; a ruleset without the set is a 409.
TEST_F(AgentServerTest, RoutesOnlyToABoundAddressForABoundedTime) {
  start();
  LineClient c(agent_->socket());
  auto routes = [&] { return ns_.output("nft list set inet sandbox proxy_routes"); };
  EXPECT_EQ(c.call("ROUTE 10.99.0.7 8000 60").rfind("ERR 403 address not bound: 10.99.0.7", 0), 0u);
  EXPECT_EQ(c.call("ROUTE 10.98.0.7 8000 60").rfind("ERR 403 address not allowed", 0), 0u);
  ns_.run("ip link add veth100i0 type veth peer name ct100");
  ASSERT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:01 10.99.0.7"), "OK");
  EXPECT_EQ(c.call("ROUTE 10.99.0.8 8000 60").rfind("ERR 403 address not bound", 0), 0u);
  EXPECT_EQ(c.call("ROUTE 10.99.0.7 0 60").rfind("ERR 400 invalid port", 0), 0u);
  EXPECT_EQ(c.call("ROUTE 10.99.0.7 65536 60").rfind("ERR 400 invalid port", 0), 0u);
  EXPECT_EQ(c.call("ROUTE 10.99.0.7 8000 301").rfind("ERR 400 invalid seconds", 0), 0u);
  EXPECT_EQ(c.call("ROUTE 10.99.0.7 8000 0").rfind("ERR 400 invalid seconds", 0), 0u);
  EXPECT_EQ(routes().find("elements"), std::string::npos) << routes();

  EXPECT_EQ(c.call("ROUTE 10.99.0.7 8000 5"), "OK");
  EXPECT_EQ(c.call("ROUTE 10.99.0.7 22 300"), "OK");
  std::string set = routes();
  EXPECT_NE(set.find("10.99.0.7 . 8000 timeout 5s"), std::string::npos) << set;
  EXPECT_NE(set.find("10.99.0.7 . 22 timeout 5m"), std::string::npos) << set;
  EXPECT_EQ(c.call("ROUTE 10.99.0.7 8000 120"), "OK");  // a refresh: a new timeout
  EXPECT_NE(routes().find("10.99.0.7 . 8000 timeout 2m"), std::string::npos) << routes();
  EXPECT_EQ(c.call("UNROUTE 10.99.0.7 8000"), "OK");
  EXPECT_EQ(c.call("UNROUTE 10.99.0.7 8000"), "OK");  // idempotent
  EXPECT_EQ(routes().find(". 8000"), std::string::npos) << routes();
  // Unbound: its routes go with it (the next sandbox on the address starts with none), another
  // address's stay; no new route, and UNROUTE of a gone one is still OK.
  ns_.run("ip link add veth101i0 type veth peer name ct101");
  ASSERT_EQ(c.call("BIND veth101i0 bc:24:11:00:00:02 10.99.0.9"), "OK");
  EXPECT_EQ(c.call("ROUTE 10.99.0.9 80 60"), "OK");
  EXPECT_EQ(c.call("UNBIND veth100i0"), "OK");
  EXPECT_EQ(routes().find("10.99.0.7 ."), std::string::npos) << routes();
  EXPECT_NE(routes().find("10.99.0.9 . 80"), std::string::npos) << routes();
  EXPECT_EQ(c.call("ROUTE 10.99.0.7 22 60").rfind("ERR 403 address not bound", 0), 0u);
  EXPECT_EQ(c.call("UNROUTE 10.99.0.7 22"), "OK");
  EXPECT_EQ(c.call("UNBIND veth101i0"), "OK");
  EXPECT_EQ(routes().find("elements"), std::string::npos) << routes();
  std::string log = agent_->log_text();
  EXPECT_NE(log.find("verb=ROUTE address=10.99.0.7 port=22 seconds=300 result=OK"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("verb=UNROUTE address=10.99.0.7 port=8000 result=OK"), std::string::npos);
  EXPECT_NE(log.find("verb=ROUTE address=10.99.0.8 port=8000 seconds=60 result=ERR 403"),
            std::string::npos);

  ASSERT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:01 10.99.0.7"), "OK");
  ns_.run("nft delete set inet sandbox proxy_routes");
  EXPECT_EQ(c.call("ROUTE 10.99.0.7 8000 60").rfind("ERR 409 ruleset missing", 0), 0u);
  EXPECT_EQ(c.call("UNBIND veth100i0"), "OK");  // without the set: nothing to drop
}

TEST_F(AgentServerTest, Idempotency) {
  start();
  LineClient c(agent_->socket());
  EXPECT_EQ(c.call("ALLOW 10.99.0.5"), "OK");
  EXPECT_EQ(c.call("ALLOW 10.99.0.5"), "OK");
  EXPECT_EQ(c.call("LIST"), "OK 1 10.99.0.5");
  EXPECT_EQ(c.call("REVOKE 10.99.0.5"), "OK");
  EXPECT_EQ(c.call("REVOKE 10.99.0.5"), "OK");
  EXPECT_EQ(c.call("REVOKE 10.99.200.200"), "OK");
  EXPECT_EQ(c.call("LIST"), "OK 0");
  EXPECT_EQ(c.call("SYNC 10.99.0.5 10.99.0.6"), "OK 2");
  EXPECT_EQ(c.call("SYNC 10.99.0.5 10.99.0.6"), "OK 2");
  EXPECT_EQ(c.call("LIST"), "OK 2 10.99.0.5 10.99.0.6");
}

TEST_F(AgentServerTest, PolicyRefusesAddressesOutsideTheSandbox) {
  start();
  LineClient c(agent_->socket());
  for (const char* bad : {"10.98.0.5", "10.99.0.0", "10.99.255.255", "10.99.0.1", "8.8.8.8"}) {
    std::string reply = c.call(std::string("ALLOW ") + bad);
    EXPECT_TRUE(reply.starts_with("ERR 403 address not allowed")) << bad << ": " << reply;
    reply = c.call(std::string("SYNC 10.99.0.5 ") + bad);
    EXPECT_TRUE(reply.starts_with("ERR 403 address not allowed")) << bad << ": " << reply;
  }
  EXPECT_EQ(c.call("LIST"), "OK 0");  // nothing half-applied
}

TEST_F(AgentServerTest, TtlExpiryAndRefresh) {
  start();
  LineClient c(agent_->socket());
  EXPECT_EQ(c.call("ALLOW 10.99.0.5 ttl=1"), "OK");
  EXPECT_EQ(c.call("ALLOW 10.99.0.6 ttl=2"), "OK");
  std::this_thread::sleep_for(1200ms);
  // Re-allowing refreshes the lease (destroy + add in one batch).
  EXPECT_EQ(c.call("ALLOW 10.99.0.6 ttl=100"), "OK");
  std::string list = c.call("LIST");
  ASSERT_TRUE(list.starts_with("OK 1 10.99.0.6@")) << list;
  EXPECT_GE(std::stoi(list.substr(list.find('@') + 1)), 95) << list;  // refreshed, not ~1 s left
  std::this_thread::sleep_for(1200ms);
  list = c.call("LIST");
  EXPECT_TRUE(list.starts_with("OK 1 10.99.0.6@")) << list;
  // Re-allowing without ttl turns the lease into a permanent grant.
  EXPECT_EQ(c.call("ALLOW 10.99.0.6"), "OK");
  EXPECT_EQ(c.call("LIST"), "OK 1 10.99.0.6");
}

TEST_F(AgentServerTest, DriftAfterFlushSetIsRepaired) {
  start();
  LineClient c(agent_->socket());
  EXPECT_EQ(c.call("SYNC 10.99.0.5 10.99.0.6@600"), "OK 2");
  EXPECT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:01 10.99.0.5"), "OK");
  // One transaction: with two, a tick between them repairs the first set, and the second set's
  // repair comes a tick later than the check below.
  ns_.run("nft \"flush set inet sandbox internet_allowed; flush set bridge sandbox_l2 port_mac\"");
  EXPECT_TRUE(eventually(c, [&](const std::string& l) {
    return l.starts_with("OK 2 10.99.0.5 ") &&
           ns_.output("nft list set bridge sandbox_l2 port_mac").find("veth100i0") !=
               std::string::npos;
  }));
  EXPECT_NE(nft_set().find("10.99.0.6 timeout"), std::string::npos) << nft_set();
  std::string status = c.call("STATUS");
  EXPECT_EQ(status.find("last_reapply=never"), std::string::npos) << status;
  // A foreign element is removed again, too.
  ns_.run("nft add element inet sandbox internet_allowed { 10.99.9.9 }");
  EXPECT_TRUE(eventually(c, [](const std::string& l) { return l.starts_with("OK 2 "); }));
}

TEST_F(AgentServerTest, DriftAfterReloadingTheTableIsRepaired) {
  start();
  LineClient c(agent_->socket());
  EXPECT_EQ(c.call("SYNC 10.99.0.5 10.99.0.6"), "OK 2");
  ns_.run("nft delete table inet sandbox");
  EXPECT_TRUE(eventually(c, [](const std::string& l) { return l.starts_with("ERR 409"); }));
  std::string status = c.call("STATUS");
  EXPECT_NE(status.find("table=missing set=missing"), std::string::npos) << status;
  // While the ruleset is missing, a change is refused with 409 and a revoke still sticks.
  EXPECT_TRUE(c.call("ALLOW 10.99.0.7").starts_with("ERR 409 ruleset missing"));
  EXPECT_TRUE(c.call("REVOKE 10.99.0.6").starts_with("ERR 409"));
  ns_.load_contract();  // `systemctl restart nftables`
  EXPECT_TRUE(eventually(c, [](const std::string& l) { return l == "OK 1 10.99.0.5"; }));
}

TEST_F(AgentServerTest, RestartRestoresLiveLeasesOnly) {
  start();
  {
    LineClient c(agent_->socket());
    EXPECT_EQ(c.call("ALLOW 10.99.0.5 ttl=1"), "OK");
    EXPECT_EQ(c.call("ALLOW 10.99.0.6 ttl=600"), "OK");
    EXPECT_EQ(c.call("ALLOW 10.99.0.7"), "OK");
    EXPECT_EQ(c.call("BIND veth100i0 bc:24:11:00:00:01 10.99.0.7"), "OK");
  }
  int status = agent_->stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(std::filesystem::exists(agent_->socket()));  // SIGTERM: clean exit, socket gone
  // "Reboot": the kernel forgets everything, and the short lease ends meanwhile.
  ns_.run("nft flush ruleset");
  ns_.load_contract();
  std::this_thread::sleep_for(1100ms);
  agent_->start();
  LineClient c(agent_->socket());
  std::string list = c.call("LIST");
  EXPECT_TRUE(list.starts_with("OK 2 10.99.0.6@") && list.ends_with(" 10.99.0.7")) << list;
  EXPECT_EQ(c.call("BINDINGS"), "OK 1 veth100i0=bc:24:11:00:00:01/10.99.0.7");
}

TEST_F(AgentServerTest, CorruptStateFileStopsTheAgentWithAClearMessage) {
  std::ofstream(dir_.file("agent-state")) << "pve-sandbox-agent-state 1\ngrant 10.99.0.5\n";
  try {
    start();
    FAIL() << "agent started with a corrupt state file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
}

// Connects as `uid`/`gid` from a child process and returns the first line it got.

}  // namespace
}  // namespace pvs::test
