// `internet` with allowlists through the REST API, on the real Api, HttpServer and Manager over
// in-memory peers (tests/lifecycle/fake_peers.h: no root, no agent binary): create with a
// list, a named list and true; runtime changes both ways; what the sandbox JSON shows; caps
// (403), bad names (400), policy rules on the names, the audit log; what the agent holds;
// sandboxctl's internet and create options against the same server; and the egress log's views
// (REST, sandboxctl, MCP internet, approvals) of the lines the agent holds.
#include <gtest/gtest.h>

#include <ctime>
#include <fstream>

#include <Poco/JSON/Parser.h>

#include "app/api.h"
#include "core/observability/audit.h"
#include "lifecycle/fake_peers.h"
#include "manager_testing.h"
#include "service/support/http_client.h"
#include "service/support/in_process_fixture.h"
#include "service/support/json_object.h"
#include "service/support/policy_rules.h"
#include "support/sshd_fixture.h"

namespace pvs::service {
namespace {

using test::http;
using test::HttpReply;

const std::string kE2bKey = "e2b_" + std::string(40, 'e');

class EgressApiTest : public test::InProcessServiceTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pvs-egress-api-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    config_.listen_port = 0;
    config_.tokens = {{"alice", sha256_hex("tok-alice"), 8, false},
                      {"bob", sha256_hex("tok-bob"), 8, false},
                      {"carol", sha256_hex("tok-carol"), 0, false, true}};
    config_.tokens[0].e2b_key_sha256 = sha256_hex(kE2bKey);
    config_.approval_wait_seconds = 0;  // an E2B call needing a person answers at once
    config_.tokens[1].egress.lists = std::vector<std::string>{"python-packages"};
    config_.tokens[1].egress.names = std::vector<std::string>{"*.example.com"};
    config_.egress.lists["python-packages"] =
        Egress::allow({"pypi.org", "files.pythonhosted.org"}).list;
    config_.egress.lists["git"] = Egress::allow({"*.github.com", "github.com"}, {443}).list;
    config_.audit_file = dir_ + "/audit.log";
    PolicySpec spec;
    auto deny =
        test::rule("policy.default[0]", {PolicyAction::kInternet, PolicyAction::kSandboxCreate},
                   Verdict::kDeny, "no paste sites");
    deny.egress_names = R"((^|\.)pastebin\.com$)";
    auto approve = test::rule("policy.default[1]", {PolicyAction::kInternet}, Verdict::kApprove);
    approve.egress_names = R"((^|\.)needs-approval\.org$)";
    spec.default_rules = {deny, approve};
    config_.policy = *Policy::compile(spec);

    ManagerConfig mc;
    mc.node = "pve";
    mc.template_vmid = 9000;
    mc.vmid_min = 100;
    mc.vmid_max = 199;
    mc.sandbox_cidr = *Cidr::parse("10.99.0.0/24");
    mc.gateway = *Ipv4Address::parse("10.99.0.1");
    mc.wait_for_ssh = false;
    mc.background = false;
    lifecycle::TestPeers peers;
    auto agent = std::make_unique<test::FakeAgent>();
    agent_ = agent.get();
    peers.proxmox = std::make_unique<test::FakeProxmox>(mc.template_vmid);
    peers.agent = std::move(agent);
    auto m = lifecycle::open_manager(mc, std::move(peers));
    ASSERT_TRUE(m) << m.error().message;
    serve(std::shared_ptr<Manager>(std::move(*m)));
  }
  void TearDown() override {
    InProcessServiceTest::TearDown();
    ::rmdir(dir_.c_str());
  }

  HttpReply call(const std::string& method, const std::string& uri, const std::string& body = "",
                 const std::string& token = "tok-alice") {
    return http(port_, method, uri, body, token, {});
  }
  Poco::JSON::Object::Ptr create(const std::string& body, const std::string& token = "tok-alice") {
    auto r = call("POST", "/v1/sandboxes", body, token);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? json(r.body) : nullptr;
  }
  HttpReply set(const std::string& id, const std::string& body,
                const std::string& token = "tok-alice") {
    return call("PUT", "/v1/sandboxes/" + id + "/internet", body, token);
  }
  EgressList agent_list(const Poco::JSON::Object::Ptr& sb) {
    auto lists = agent_->lists();
    auto it = lists.find(*Ipv4Address::parse(sb->getValue<std::string>("address")));
    return it == lists.end() ? EgressList{} : it->second;
  }
  static std::string internet_of(const Poco::JSON::Object::Ptr& sb) {
    std::ostringstream o;
    sb->get("internet").isBoolean() ? o << sb->get("internet").toString()
                                    : (sb->getObject("internet")->stringify(o), o);
    return o.str();
  }

  // An egress log line as the agent would hold it for `sb`.
  void log_line(const Poco::JSON::Object::Ptr& sb, const std::string& name, bool allowed,
                std::uint64_t count, std::int64_t at_ms, const std::string& entry = "") {
    log_line(*Ipv4Address::parse(sb->getValue<std::string>("address")), name, allowed, count, at_ms,
             entry);
  }
  void log_line(Ipv4Address source, const std::string& name, bool allowed, std::uint64_t count,
                std::int64_t at_ms, const std::string& entry = "") {
    proto::EgressLogLine l;
    l.source = source;
    l.name = name;
    l.allowed = allowed;
    l.count = count;
    l.window_ms = at_ms;
    l.entry = entry;
    if (allowed) l.to = {*Ipv4Address::parse("203.0.113.7")};
    agent_->add_log_line(l.source, l);
  }
  test::ProcessResult ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {PVS_SANDBOXCTL_BIN, "--url",
                                     "http://127.0.0.1:" + std::to_string(port_)};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_captured(argv, dir_, "", {"SANDBOXCTL_TOKEN=tok-alice", "HOME=" + dir_});
  }

  std::string dir_;
  test::FakeAgent* agent_ = nullptr;  // owned by the Manager
};

TEST_F(EgressApiTest, CreateWithAnAllowlistShowsItAndTheAgentHoldsIt) {
  auto sb = create(R"({"internet":{"allow":["pypi.org","*.github.com"],"ports":[443]}})");
  ASSERT_TRUE(sb);
  EXPECT_EQ(sb->getValue<std::string>("egress"), "allowlist");
  EXPECT_EQ(internet_of(sb), R"({"allow":["*.github.com","pypi.org"],"ports":[443]})");
  EXPECT_EQ(agent_list(sb), Egress::allow({"pypi.org", "*.github.com"}, {443}).list);
  EXPECT_TRUE(agent_->set().empty());
  auto shown = call("GET", "/v1/sandboxes/" + sb->getValue<std::string>("id"));
  ASSERT_EQ(shown.status, 200);
  EXPECT_EQ(internet_of(json(shown.body)), internet_of(sb));
}

TEST_F(EgressApiTest, NamedListsAndRuntimeChangesBothWays) {
  auto sb = create(R"({"internet":{"list":"python-packages"}})");
  ASSERT_TRUE(sb);
  std::string id = sb->getValue<std::string>("id");
  EXPECT_EQ(internet_of(sb),  // Poco writes the keys sorted
            R"({"allow":["files.pythonhosted.org","pypi.org"],"list":"python-packages",)"
            R"("ports":[80,443]})");
  auto r = set(id, R"({"allow":["api.example.org"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(agent_list(sb).names, (std::vector<std::string>{"api.example.org"}));
  r = set(id, R"({"enabled":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json(r.body)->getValue<std::string>("egress"), "on");
  EXPECT_TRUE(json(r.body)->getValue<bool>("internet"));
  EXPECT_TRUE(agent_->lists().empty());
  EXPECT_EQ(agent_->set().size(), 1u);
  r = set(id, R"({"list":"git"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(agent_->set().empty());
  EXPECT_EQ(agent_list(sb).ports, (std::vector<std::uint16_t>{443}));
  r = set(id, R"({"enabled":false})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(json(r.body)->getValue<bool>("internet"));
  EXPECT_EQ(json(r.body)->getValue<std::string>("egress"), "off");
  EXPECT_TRUE(agent_->lists().empty());
  // The audit log records what was asked.
  std::ifstream in(config_.audit_file);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find(R"({"internet":{"allow":["api.example.org"]}})"), std::string::npos) << all;
  EXPECT_NE(all.find(R"({"internet":{"list":"git"}})"), std::string::npos) << all;
}

TEST_F(EgressApiTest, BadNamesUnknownListsCapsAndPolicy) {
  auto bad = call("POST", "/v1/sandboxes", R"({"internet":{"allow":["PyPI.org"]}})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  auto unknown = call("POST", "/v1/sandboxes", R"({"internet":{"list":"nope"}})");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  auto capped = call("POST", "/v1/sandboxes", R"({"internet":{"list":"git"}})", "tok-bob");
  EXPECT_EQ(capped.status, 403) << capped.body;
  auto outside = call("POST", "/v1/sandboxes", R"({"internet":{"allow":["pypi.org"]}})", "tok-bob");
  EXPECT_EQ(outside.status, 403) << outside.body;
  EXPECT_TRUE(create(R"({"internet":{"allow":["a.example.com"]}})", "tok-bob"));
  auto paste = call("POST", "/v1/sandboxes", R"({"internet":{"allow":["pastebin.com"]}})");
  EXPECT_EQ(paste.status, 403) << paste.body;
  EXPECT_NE(paste.body.find("no paste sites"), std::string::npos) << paste.body;
  EXPECT_EQ(svc_->manager()->list().size(), 1u);  // only bob's allowed one

  auto sb = create("{}");
  ASSERT_TRUE(sb);
  std::string id = sb->getValue<std::string>("id");
  auto r = set(id, R"({"allow":["x.pastebin.com","pypi.org"]})");
  EXPECT_EQ(r.status, 403) << r.body;
  r = set(id, R"({"allow":["*.com"]})");
  EXPECT_EQ(r.status, 400) << r.body;
  r = set(id, R"({"allow":["a.org"],"list":"git"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(agent_list(sb).names.empty());
  EXPECT_EQ(agent_->lists().size(), 1u);  // bob's
}

TEST_F(EgressApiTest, SandboxctlSetsAndShowsAllowlists) {
  auto created =
      ctl({"--json", "create", "--allow", "pypi.org", "--allow", "*.github.com", "--ports", "443"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto sb = json(created.out);
  std::string id = sb->getValue<std::string>("id");
  EXPECT_EQ(agent_list(sb), Egress::allow({"pypi.org", "*.github.com"}, {443}).list);

  auto set = ctl({"internet", id, "allow", "files.pythonhosted.org", "pypi.org"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(agent_list(sb), Egress::allow({"pypi.org", "files.pythonhosted.org"}).list);
  auto shown = ctl({"show", id});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("allow files.pythonhosted.org,pypi.org ports 80,443"), std::string::npos)
      << shown.out;

  ASSERT_EQ(ctl({"internet", id, "allow", "--list", "git"}).exit_code, 0);
  auto listed = ctl({"list"});
  EXPECT_NE(listed.out.find("allow *.github.com,github.com ports 443 (list git)"),
            std::string::npos)
      << listed.out;
  ASSERT_EQ(ctl({"internet", id, "on"}).exit_code, 0);
  EXPECT_TRUE(agent_->lists().empty());
  ASSERT_EQ(ctl({"internet", id, "off"}).exit_code, 0);
  EXPECT_TRUE(agent_->set().empty());

  // Mistakes: usage errors before any request, the server's 400/403 as failures.
  EXPECT_NE(ctl({"internet", id, "allow"}).exit_code, 0);
  EXPECT_NE(ctl({"internet", id, "allow", "a.org", "--ports", "80,,443"}).exit_code, 0);
  EXPECT_NE(ctl({"internet", id, "allow", "a.org", "--list", "git"}).exit_code, 0);
  EXPECT_NE(ctl({"create", "--internet", "--allow", "a.org"}).exit_code, 0);
  auto bad = ctl({"internet", id, "allow", "PyPI.org"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("PyPI.org"), std::string::npos) << bad.err;
  EXPECT_NE(ctl({"internet", id, "allow", "--list", "nope"}).exit_code, 0);
  EXPECT_TRUE(agent_->lists().empty());
}

// The MCP tools take the same allowlist forms (sandbox_create's internet, internet's
// enabled/allow/ports/list).
TEST_F(EgressApiTest, McpToolsTakeAllowlists) {
  std::map<std::string, std::string> headers = {{"Accept", "application/json, text/event-stream"}};
  auto init = http(port_, "POST", "/mcp",
                   R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{)"
                   R"("protocolVersion":"2025-06-18","capabilities":{},)"
                   R"("clientInfo":{"name":"egress-test","version":"1"}}})",
                   "tok-alice", headers);
  ASSERT_EQ(init.status, 200) << init.body;
  headers["Mcp-Session-Id"] = init.headers["Mcp-Session-Id"];
  headers["MCP-Protocol-Version"] = "2025-06-18";
  ASSERT_EQ(http(port_, "POST", "/mcp", R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                 "tok-alice", headers)
                .status,
            202);
  auto tool = [&](const std::string& name, const std::string& arguments) {
    auto r = http(port_, "POST", "/mcp",
                  R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":")" + name +
                      R"(","arguments":)" + arguments + "}}",
                  "tok-alice", headers);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body;
  };
  auto created = tool("sandbox_create", R"({"internet":{"list":"python-packages"}})");
  ASSERT_NE(created.find(R"("egress":"allowlist")"), std::string::npos) << created;
  auto list = svc_->manager()->list();
  ASSERT_EQ(list.size(), 1u);
  std::string id = list[0].id;
  auto address = *list[0].address;
  EXPECT_EQ(agent_->lists().at(address),
            Egress::allow({"pypi.org", "files.pythonhosted.org"}).list);
  // The answer names what the sandbox was refused that the new list still refuses.
  std::int64_t at = list[0].created_at * 1000;  // this sandbox's: after its creation
  log_line(address, "api.example.org", false, 2, at);
  log_line(address, "evil.example", false, 5, at);
  // Refused connections: one destination, and the others (the node's per-sandbox bound).
  agent_->add_refused(address,
                      {*Ipv4Address::parse("203.0.113.9"), 22, 6, false, 3, at, at + 1'000});
  agent_->add_refused(address, {Ipv4Address(0), 0, 0, true, 40, at, at + 2'000});
  auto answer = tool("internet",
                     R"({"sandbox_id":")" + id + R"(","allow":["api.example.org"],"ports":[443]})");
  EXPECT_EQ(agent_->lists().at(address), Egress::allow({"api.example.org"}, {443}).list);
  EXPECT_NE(answer.find(R"(\"still_refused\":[\"evil.example\"])"), std::string::npos) << answer;
  EXPECT_NE(answer.find("still refused names: evil.example (5 times); connections refused: "
                        "203.0.113.9:22/tcp (3 times), other destinations (40 times)"),
            std::string::npos)
      << answer;
  tool("internet", R"({"sandbox_id":")" + id + R"(","enabled":true})");
  EXPECT_TRUE(agent_->lists().empty());
  EXPECT_EQ(agent_->set().size(), 1u);
  auto refused = tool("internet", R"({"sandbox_id":")" + id + R"(","allow":["pastebin.com"]})");
  EXPECT_NE(refused.find("\"isError\":true"), std::string::npos) << refused;
  EXPECT_TRUE(agent_->lists().empty());
  // An address is no name, here as on REST; a reserved label no label a tool may set.
  auto literal = tool("internet", R"({"sandbox_id":")" + id + R"(","allow":["203.0.113.11"]})");
  EXPECT_NE(literal.find("\"isError\":true"), std::string::npos) << literal;
  EXPECT_NE(literal.find("is an address: egress allowlists are by DNS name"), std::string::npos)
      << literal;
  EXPECT_TRUE(agent_->lists().empty());
  auto reserved = tool("sandbox_create", R"({"labels":{"pve-sandbox/template-name":"x"}})");
  EXPECT_NE(reserved.find("\"isError\":true"), std::string::npos) << reserved;
  EXPECT_NE(reserved.find("is reserved"), std::string::npos) << reserved;
  EXPECT_EQ(svc_->manager()->list().size(), 1u);
}

// The demo's finding: an IPv4 literal is not a DNS name (no top-level domain is numeric).
// Refused with a 400 saying egress is by name, at create and on PUT .../internet; nothing set.
TEST_F(EgressApiTest, AnAddressIsRefusedSayingEgressIsByName) {
  auto sb = create("{}");
  ASSERT_TRUE(sb);
  std::string id = sb->getValue<std::string>("id");
  for (const char* entry : {"203.0.113.11", "10.1", "*.0.113.11", "2001:db8::1", "10.0.0.0/8"}) {
    auto r = set(id, std::string(R"({"allow":[")") + entry + R"("]})");
    EXPECT_EQ(r.status, 400) << entry << ": " << r.body;
    EXPECT_NE(r.body.find("is an address: egress allowlists are by DNS name"), std::string::npos)
        << r.body;
    auto c = call("POST", "/v1/sandboxes",
                  std::string(R"({"internet":{"allow":["pypi.org",")") + entry + R"("]}})");
    EXPECT_EQ(c.status, 400) << entry << ": " << c.body;
  }
  EXPECT_TRUE(agent_list(sb).names.empty());
  EXPECT_EQ(svc_->manager()->list().size(), 1u);
  EXPECT_EQ(set(id, R"({"allow":["203.0.113.11.example"]})").status, 200);  // a name
}

// An approval is for the names asked for: it cannot be spent on another list.
TEST_F(EgressApiTest, AnApprovalCoversOnlyTheNamesItWasAskedFor) {
  auto sb = create("{}");
  ASSERT_TRUE(sb);
  std::string uri = "/v1/sandboxes/" + sb->getValue<std::string>("id") + "/internet";
  auto pending = http(port_, "PUT", uri, R"({"allow":["a.needs-approval.org"]})", "tok-alice",
                      {{"Prefer", "respond-async"}});
  ASSERT_EQ(pending.status, 202) << pending.body;
  auto approval = json(pending.body)->getObject("approval");
  std::string id = approval->getValue<std::string>("id");
  EXPECT_NE(pending.body.find("internet allow a.needs-approval.org"), std::string::npos)
      << pending.body;
  ASSERT_EQ(call("POST", "/v1/approvals/" + id + "/approve", "", "tok-carol").status, 200);
  auto other = http(port_, "PUT", uri, R"({"allow":["a.needs-approval.org","evil.org"]})",
                    "tok-alice", {{"Approval", id}});
  EXPECT_EQ(other.status, 403) << other.body;
  EXPECT_TRUE(agent_->lists().empty());
  auto same = http(port_, "PUT", uri, R"({"allow":["a.needs-approval.org"]})", "tok-alice",
                   {{"Approval", id}});
  EXPECT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(agent_list(sb).names, (std::vector<std::string>{"a.needs-approval.org"}));
}

// The egress log: REST (filters, bad input), sandboxctl, the names an approval shows.
TEST_F(EgressApiTest, TheEgressLogShowsTheAgentsLinesThroughRestAndSandboxctl) {
  auto sb = create(R"({"internet":{"allow":["pypi.org"]}})");
  ASSERT_TRUE(sb);
  std::string id = sb->getValue<std::string>("id");
  std::string uri = "/v1/sandboxes/" + id + "/egress/log";
  auto empty = call("GET", uri);
  ASSERT_EQ(empty.status, 200) << empty.body;
  EXPECT_EQ(empty.body, R"({"names":[],"refused":[],"connections":[]})");
  // Windows after the sandbox's creation (the view drops older ones: #46).
  std::int64_t t0 = svc_->manager()->list().at(0).created_at * 1000 + 1000;
  log_line(sb, "pypi.org", true, 3, t0, "pypi.org");
  log_line(sb, "files.pythonhosted.org", false, 12, t0);
  log_line(sb, "evil.example", false, 1, t0 + 60'000);
  log_line(sb, "files.pythonhosted.org", false, 2, t0 + 60'000);

  auto all = call("GET", uri);
  ASSERT_EQ(all.status, 200) << all.body;
  auto names = json(all.body)->getArray("names");
  ASSERT_EQ(names->size(), 4u) << all.body;
  auto first = names->getObject(0);
  EXPECT_EQ(first->getValue<std::string>("name"), "pypi.org");
  EXPECT_EQ(first->getValue<std::string>("decision"), "allow");
  EXPECT_EQ(first->getValue<int>("count"), 3);
  EXPECT_EQ(first->getValue<std::string>("entry"), "pypi.org");
  std::time_t t0_s = t0 / 1000;
  std::tm tm{};
  gmtime_r(&t0_s, &tm);
  char iso[32];
  std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
  EXPECT_EQ(first->getValue<std::string>("window_start"), iso);
  EXPECT_EQ(first->getArray("addresses")->getElement<std::string>(0), "203.0.113.7");
  EXPECT_TRUE(names->getObject(1)->isNull("entry"));
  EXPECT_NE(all.body.find(R"("refused":["files.pythonhosted.org","evil.example"])"),
            std::string::npos)
      << all.body;
  auto since = call("GET", uri + "?since=" + std::to_string(t0 + 60'000));
  EXPECT_EQ(json(since.body)->getArray("names")->size(), 2u) << since.body;
  auto newest = call("GET", uri + "?limit=1");
  EXPECT_NE(newest.body.find(R"("refused":["files.pythonhosted.org"])"), std::string::npos)
      << newest.body;
  for (const char* bad : {"?limit=0", "?limit=1001", "?limit=x", "?since=-1", "?since=1e3"}) {
    auto r = call("GET", uri + bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  EXPECT_EQ(call("GET", uri, "", "tok-bob").status, 404);  // not bob's

  auto cli = ctl({"internet", id, "log"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("files.pythonhosted.org  refuse    12"), std::string::npos) << cli.out;
  EXPECT_NE(cli.out.find("pypi.org                allow     3      pypi.org  203.0.113.7"),
            std::string::npos)
      << cli.out;
  auto cli_json = ctl({"--json", "internet", id, "log", "--limit", "1"});
  ASSERT_EQ(cli_json.exit_code, 0) << cli_json.err;
  EXPECT_EQ(json(cli_json.out)->getArray("names")->size(), 1u) << cli_json.out;
  EXPECT_NE(ctl({"internet", id, "log", "--bogus"}).exit_code, 0);

  // An approval for a wider list shows what the sandbox was refused.
  auto pending = http(port_, "PUT", "/v1/sandboxes/" + id + "/internet",
                      R"({"allow":["pypi.org","a.needs-approval.org"]})", "tok-alice",
                      {{"Prefer", "respond-async"}});
  ASSERT_EQ(pending.status, 202) << pending.body;
  EXPECT_NE(pending.body.find(R"("refused_names":["files.pythonhosted.org","evil.example"])"),
            std::string::npos)
      << pending.body;
  // Without a list the agent keeps no log.
  ASSERT_EQ(set(id, R"({"enabled":false})").status, 200);
  EXPECT_EQ(call("GET", uri).body, R"({"names":[],"refused":[],"connections":[]})");
}

// #46: the node keys refused connections and the resolver's lines by address, and a new sandbox
// may get the address of one destroyed within the hour. What was first refused (or whose window
// started) before the sandbox was created is not its own and is never shown (the agent clears
// them when the list goes; this is the guard).
TEST_F(EgressApiTest, RefusedConnectionsFromBeforeTheSandboxWasCreatedAreNotShown) {
  auto sb = create(R"({"internet":{"allow":["pypi.org"]}})");
  ASSERT_TRUE(sb);
  std::string id = sb->getValue<std::string>("id");
  auto address = *Ipv4Address::parse(sb->getValue<std::string>("address"));
  auto list = svc_->manager()->list();
  ASSERT_EQ(list.size(), 1u);
  std::int64_t created = list[0].created_at * 1000;
  auto ip = [](const char* text) { return *Ipv4Address::parse(text); };
  // The address's last holder: all before, and first before but last after the creation.
  agent_->add_refused(address,
                      {ip("203.0.113.8"), 80, 6, false, 5, created - 120'000, created - 60'000});
  agent_->add_refused(address, {ip("203.0.113.9"), 22, 6, false, 3, created - 1, created + 1'000});
  agent_->add_refused(address, {Ipv4Address(0), 0, 0, true, 40, created - 90'000, created + 10});
  // This sandbox's own.
  agent_->add_refused(address, {ip("203.0.113.10"), 443, 6, false, 1, created, created + 500});
  // The same for the resolver's lines: a window the last holder opened, and this sandbox's.
  log_line(address, "old.example", false, 4, created - 30'000);
  log_line(address, "new.example", false, 1, created);
  auto log = call("GET", "/v1/sandboxes/" + id + "/egress/log");
  ASSERT_EQ(log.status, 200) << log.body;
  auto conns = json(log.body)->getArray("connections");
  ASSERT_EQ(conns->size(), 1u) << log.body;
  EXPECT_EQ(conns->getObject(0)->getValue<std::string>("address"), "203.0.113.10");
  EXPECT_EQ(log.body.find("203.0.113.9"), std::string::npos) << log.body;
  auto names = json(log.body)->getArray("names");
  ASSERT_EQ(names->size(), 1u) << log.body;
  EXPECT_EQ(names->getObject(0)->getValue<std::string>("name"), "new.example");
}

// E2B's network change is judged as REST's internet change is: its approval binds the egress
// in canonical form and shows the person the names the sandbox was refused (#46, finding 4).
TEST_F(EgressApiTest, AnE2bNetworkApprovalShowsWhatTheSandboxWasRefused) {
  auto sb = create(R"({"internet":{"allow":["pypi.org"]}})");
  ASSERT_TRUE(sb);
  std::string id = sb->getValue<std::string>("id");
  // A window after the sandbox's creation (the view drops older ones: #46 finding 5).
  log_line(sb, "evil.example", false, 4, svc_->manager()->list().at(0).created_at * 1000 + 1000);
  auto network = [&](const std::string& body) {
    return http(port_, "PUT", "/e2b/sandboxes/" + id + "/network", body, "",
                {{"X-API-Key", kE2bKey}, {"Content-Type", "application/json"}});
  };
  const std::string wider = R"({"allowOut":["pypi.org","a.needs-approval.org"]})";
  auto pending = network(wider);
  ASSERT_EQ(pending.status, 503) << pending.body;
  auto at = pending.body.find("ap-");
  ASSERT_NE(at, std::string::npos) << pending.body;
  std::string ap = pending.body.substr(at, pending.body.find(' ', at) - at);
  auto shown = call("GET", "/v1/approvals/" + ap, "", "tok-carol");
  ASSERT_EQ(shown.status, 200) << shown.body;
  auto approval = json(shown.body);
  ASSERT_TRUE(approval->has("refused_names")) << shown.body;
  EXPECT_EQ(approval->getArray("refused_names")->getElement<std::string>(0), "evil.example");
  ASSERT_TRUE(approval->has("request")) << shown.body;
  std::ostringstream request;
  approval->getObject("request")->stringify(request);
  EXPECT_NE(request.str().find("a.needs-approval.org"), std::string::npos) << request.str();
  ASSERT_EQ(call("POST", "/v1/approvals/" + ap + "/approve", "", "tok-carol").status, 200);
  EXPECT_EQ(network(wider).status, 204);
  EXPECT_EQ(agent_list(sb).names.size(), 2u);
}

}  // namespace
}  // namespace pvs::service
