// Egress by domain (#20) end to end through the controller: the REST API (Api + HttpServer) on
// the real Manager, against the whole netns stack with StackOptions::egress (stack_fixture.h):
// pvesim's netns backend (every sandbox a namespace with its own sshd), the real agent and
// ruleset, pve-sandbox-resolver as nobody, an authoritative dnsmasq for the zone "test" and HTTP
// servers on the internet's addresses. Every probe runs inside the sandbox, over SSH (exec):
// DNS through the sandbox's gateway (which the ruleset redirects to the resolver), HTTP with
// curl, a bare TCP connect for "fails at once". The egress log of those probes is read back
// through REST, sandboxctl and the MCP tool internet (stateless revision 2026-07-28).
#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "service/support/api_fixture.h"
#include "support/sshd_fixture.h"

namespace pvs::service {
namespace {

constexpr const char* kAllowed = "203.0.113.20";  // allowed.test
constexpr const char* kOther = "203.0.113.21";    // other.test
constexpr const char* kAlso = "203.0.113.22";     // also.test

class EgressE2eTest : public ApiTest {
 protected:
  test::StackOptions stack_options() override {
    test::StackOptions o;
    o.egress = true;  // netns backend, resolver, internet
    return o;
  }

  // A query for `name` as the sandbox's resolv.conf would send it: to its gateway, port 53.
  std::string dns(const std::string& id, const std::string& name) {
    return in_sandbox(id, "python3 " + stack_->egress_tool() + " dns 10.99.0.1 " + name);
  }
  std::string http_get(const std::string& id, const std::string& address) {
    return in_sandbox(id, "curl -sS -m 3 http://" + address + "/");
  }
  // "reset 0.00" (refused at once), "timeout 0.70" (dropped), ...
  std::string connect(const std::string& id, const std::string& address) {
    return in_sandbox(
        id, "python3 " + stack_->egress_tool() + " connect " + address + " 80 --timeout 0.7");
  }
  // One request line to the agent, as root (allowed_uids), and its reply.
  std::string agent(const std::string& line) {
    std::string out;
    int rc = test::run_command(
        {"python3", stack_->egress_tool(), "agent", stack_->agent_socket(), line}, &out);
    EXPECT_EQ(rc, 0) << out;
    return out.substr(0, out.find('\n'));
  }
  // Elements of `inet sandbox egress_pairs` whose source is `address`.
  int pairs_of(const std::string& address) {
    std::string out;
    EXPECT_EQ(test::run_command({"nft", "list", "set", "inet", "sandbox", "egress_pairs"}, &out),
              0);
    int n = 0;
    for (auto pos = out.find(address + " . "); pos != std::string::npos;
         pos = out.find(address + " . ", pos + 1))
      ++n;
    return n;
  }
  Poco::JSON::Object::Ptr show(const std::string& id) {
    auto r = call("GET", "/v1/sandboxes/" + id);
    EXPECT_EQ(r.status, 200) << r.body;
    return json(r.body);
  }
  static std::string internet_of(const Poco::JSON::Object::Ptr& sb) {
    std::ostringstream o;
    sb->get("internet").isBoolean() ? o << sb->get("internet").toString()
                                    : (sb->getObject("internet")->stringify(o), o);
    return o.str();
  }
  std::string set_internet(const std::string& id, const std::string& body) {
    auto r = call("PUT", "/v1/sandboxes/" + id + "/internet", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? json(r.body)->getValue<std::string>("egress") : r.body;
  }
  // An allow-list sandbox reaches allowed.test by name and nothing else.
  void expect_allowlisted(const std::string& id) {
    EXPECT_EQ(dns(id, "allowed.test"), std::string("NOERROR ") + kAllowed);
    EXPECT_EQ(http_get(id, kAllowed), std::string("hello from ") + kAllowed);
    EXPECT_EQ(dns(id, "other.test"), "REFUSED");
    EXPECT_EQ(connect(id, kOther).rfind("reset 0.", 0), 0u) << "direct IP must fail at once";
  }
};

TEST_F(EgressE2eTest, AllowlistOnOtherListOffAndDestroyThroughTheApi) {
  auto r = call("POST", "/v1/sandboxes", R"({"internet":{"allow":["allowed.test"]}})");
  ASSERT_EQ(r.status, 201) << r.body;
  auto sb = json(r.body);
  std::string id = sb->getValue<std::string>("id");
  std::string address = sb->getValue<std::string>("address");
  EXPECT_EQ(sb->getValue<std::string>("egress"), "allowlist");
  EXPECT_EQ(internet_of(show(id)), R"({"allow":["allowed.test"],"ports":[80,443]})");
  EXPECT_EQ(agent("EGRESSES"), "OK 1 " + address + "=80,443/allowed.test");
  EXPECT_TRUE(stack_->internet_set().empty());

  expect_allowlisted(id);
  EXPECT_EQ(pairs_of(address), 2) << "(address . 203.0.113.20 . 80/443) after the answer";
  EXPECT_NE(stack_->resolver_log().find("allowed.test"), std::string::npos);
  // DNS only through the node's resolver: the internet's server directly gets nothing back.
  EXPECT_EQ(in_sandbox(id, "python3 " + stack_->egress_tool() + " dns " + test::kInternetDns +
                               " allowed.test --timeout 0.7"),
            "exit 1: TIMEOUT ");

  // on: everything on HTTP/HTTPS, no list at the agent.
  EXPECT_EQ(set_internet(id, R"({"enabled":true})"), "on");
  EXPECT_EQ(internet_of(show(id)), "true");
  EXPECT_EQ(agent("EGRESSES"), "OK 0");
  EXPECT_EQ(stack_->internet_set(), std::set<std::string>{address});
  EXPECT_EQ(http_get(id, kOther), std::string("hello from ") + kOther);

  // Another list: also.test only; allowed.test is refused and its pairs are gone.
  EXPECT_EQ(set_internet(id, R"({"allow":["also.test"],"ports":[80]})"), "allowlist");
  EXPECT_EQ(internet_of(show(id)), R"({"allow":["also.test"],"ports":[80]})");
  EXPECT_TRUE(stack_->internet_set().empty());
  EXPECT_EQ(agent("EGRESSES"), "OK 1 " + address + "=80/also.test");
  EXPECT_EQ(dns(id, "also.test"), std::string("NOERROR ") + kAlso);
  EXPECT_EQ(http_get(id, kAlso), std::string("hello from ") + kAlso);
  EXPECT_EQ(dns(id, "allowed.test"), "REFUSED");
  EXPECT_EQ(connect(id, kAllowed).rfind("reset 0.", 0), 0u);
  EXPECT_EQ(connect(id, kOther).rfind("reset 0.", 0), 0u);

  // off: no list, no pair, nothing reaches the internet (dropped, not answered).
  EXPECT_EQ(set_internet(id, R"({"enabled":false})"), "off");
  EXPECT_EQ(internet_of(show(id)), "false");
  EXPECT_EQ(agent("EGRESSES"), "OK 0");
  EXPECT_EQ(pairs_of(address), 0);
  EXPECT_EQ(connect(id, kAlso).rfind("timeout", 0), 0u);

  // Back to the first list, then destroy: the agent holds no list and no pair of it.
  EXPECT_EQ(set_internet(id, R"({"allow":["allowed.test"]})"), "allowlist");
  expect_allowlisted(id);
  EXPECT_GT(pairs_of(address), 0);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_EQ(agent("EGRESSES"), "OK 0");
  EXPECT_EQ(pairs_of(address), 0);
  EXPECT_TRUE(stack_->internet_set().empty());
}

TEST_F(EgressE2eTest, ARestartedControllerReassertsTheList) {
  auto r = call("POST", "/v1/sandboxes", R"({"internet":{"allow":["allowed.test"]}})");
  ASSERT_EQ(r.status, 201) << r.body;
  std::string id = json(r.body)->getValue<std::string>("id");
  std::string address = json(r.body)->getValue<std::string>("address");
  expect_allowlisted(id);

  // The controller goes away; the list is removed behind its back (the sandbox's DNS now goes
  // to the node's port 53 and its pairs are cut).
  stop();
  EXPECT_EQ(agent("EGRESS " + address + " off"), "OK");
  EXPECT_EQ(agent("EGRESSES"), "OK 0");
  EXPECT_EQ(pairs_of(address), 0);

  // A new controller recovers the sandbox from its metadata and puts the list back.
  start();
  EXPECT_EQ(agent("EGRESSES"), "OK 1 " + address + "=80,443/allowed.test");
  EXPECT_EQ(internet_of(show(id)), R"({"allow":["allowed.test"],"ports":[80,443]})");
  expect_allowlisted(id);
}

// What the sandbox asked for, exactly: one allowed name, one refused twice; the direct connect
// to an unlisted address is not a name. The views: REST, sandboxctl, MCP's still_refused.
TEST_F(EgressE2eTest, TheEgressLogShowsExactlyWhatTheSandboxAskedFor) {
  auto r = call("POST", "/v1/sandboxes", R"({"internet":{"allow":["allowed.test"]}})");
  ASSERT_EQ(r.status, 201) << r.body;
  std::string id = json(r.body)->getValue<std::string>("id");
  // As getaddrinfo() asks: AAAA (answered empty, decided first), then A.
  EXPECT_EQ(dns(id, "allowed.test --type AAAA"), "NOERROR");
  EXPECT_EQ(dns(id, "allowed.test"), std::string("NOERROR ") + kAllowed);
  EXPECT_EQ(dns(id, "other.test"), "REFUSED");
  EXPECT_EQ(dns(id, "other.test"), "REFUSED");
  EXPECT_EQ(connect(id, kOther).rfind("reset 0.", 0), 0u);
  std::string uri = "/v1/sandboxes/" + id + "/egress/log";
  // Before the window ends, the allowed name's line has the address it was answered (#46: the
  // demo showed "addresses": []).
  std::string answered = R"("name":"allowed.test","decision":"allow","count":2,)";
  std::string body;
  for (int i = 0; i < 200 && body.find(answered) == std::string::npos; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    body = call("GET", uri).body;
  }
  ASSERT_NE(body.find(answered), std::string::npos) << body;
  EXPECT_NE(body.find(std::string(R"("addresses":[")") + kAllowed + "\"]"), std::string::npos)
      << body;
  stack_->flush_resolver_log();

  // The resolver's lines reach the agent on their own connection: wait for both.
  Poco::JSON::Array::Ptr names;
  for (int i = 0; i < 200; ++i) {
    auto log = call("GET", uri);
    ASSERT_EQ(log.status, 200) << log.body;
    names = json(log.body)->getArray("names");
    // At once: each name's first decision; after the flush: other.test's second.
    if (log.body.find(R"("name":"other.test","decision":"refuse","count":2)") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(names->size(), 2u);
  std::map<std::string, Poco::JSON::Object::Ptr> by_name;
  for (unsigned i = 0; i < names->size(); ++i)
    by_name[names->getObject(i)->getValue<std::string>("name")] = names->getObject(i);
  ASSERT_EQ(by_name.size(), 2u);
  auto allowed = by_name.at("allowed.test");
  EXPECT_EQ(allowed->getValue<std::string>("decision"), "allow");
  EXPECT_EQ(allowed->getValue<int>("count"), 2);
  EXPECT_EQ(allowed->getValue<std::string>("entry"), "allowed.test");
  EXPECT_EQ(allowed->getArray("addresses")->getElement<std::string>(0), kAllowed);
  auto other = by_name.at("other.test");
  EXPECT_EQ(other->getValue<std::string>("decision"), "refuse");
  EXPECT_EQ(other->getValue<int>("count"), 2);
  EXPECT_TRUE(other->isNull("entry"));
  // The direct connect: one refused connection, counted once (refused with a reset at once).
  auto conns = json(call("GET", uri).body)->getArray("connections");
  ASSERT_EQ(conns->size(), 1u);
  EXPECT_EQ(conns->getObject(0)->getValue<std::string>("address"), kOther);
  EXPECT_EQ(conns->getObject(0)->getValue<int>("port"), 80);
  EXPECT_EQ(conns->getObject(0)->getValue<std::string>("protocol"), "tcp");
  EXPECT_EQ(conns->getObject(0)->getValue<int>("count"), 1);

  auto cli = test::run_captured(
      {PVS_SANDBOXCTL_BIN, "--url", "http://127.0.0.1:" + std::to_string(port_), "internet", id,
       "log"},
      stack_->dir(), "", {"SANDBOXCTL_TOKEN=tok-alice", "HOME=" + stack_->dir()});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("other.test    refuse    2"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("allowed.test  allow     2"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find(std::string(kOther) + ":80     tcp       1"), std::string::npos)
      << cli.out;

  // MCP internet (stateless): a list without other.test says it is still refused.
  std::string mcp_body =
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"internet",)"
      R"("arguments":{"sandbox_id":")" +
      id +
      R"(","allow":["allowed.test","also.test"]},"_meta":{)"
      R"("io.modelcontextprotocol/protocolVersion":"2026-07-28",)"
      R"("io.modelcontextprotocol/clientCapabilities":{}}}})";
  auto mcp = call("POST", "/mcp", mcp_body, "tok-alice",
                  {{"Accept", "application/json, text/event-stream"},
                   {"MCP-Protocol-Version", "2026-07-28"},
                   {"Mcp-Method", "tools/call"},
                   {"Mcp-Name", "internet"}});
  ASSERT_EQ(mcp.status, 200) << mcp.body;
  EXPECT_NE(mcp.body.find(R"(\"still_refused\":[\"other.test\"])"), std::string::npos) << mcp.body;
  EXPECT_NE(mcp.body.find("still refused names: other.test (2 times); connections refused: " +
                          std::string(kOther) + ":80/tcp (1 time)"),
            std::string::npos)
      << mcp.body;
  // /metrics: the node's totals, as its agent's STATUS says (health reads it).
  ASSERT_EQ(call("GET", "/v1/health").status, 200);
  auto metrics = call("GET", "/metrics").body;
  for (const char* line :
       {R"(decision="allow",node="pve"} 2)", R"(decision="refuse",node="pve"} 2)",
        R"(decision="refuse_connection",node="pve"} 1)"}) {
    EXPECT_NE(metrics.find(std::string("pvs_egress_decisions_total{") + line), std::string::npos)
        << line << "\n"
        << metrics.substr(0, 4000);
  }
}

}  // namespace
}  // namespace pvs::service
