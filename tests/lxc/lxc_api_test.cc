// The REST API (Api + HttpServer, api_fixture.h) on real containers: pvesim's lxc backend with
// StackOptions::egress (stack_fixture.h): pve-sandbox-resolver as nobody on the node, the
// "internet" namespace with an authoritative dnsmasq for allowed.test, other.test and also.test
// and an HTTP server on each of their addresses. Every probe runs inside the container with its
// own tools and its own /etc/resolv.conf (nameserver 10.99.0.1, the gateway, which the ruleset
// sends to the resolver), and the egress log reads back what it asked for; the terminal runs the
// container's own vi as root; a template recipe installs a package from a mirror of the test's own
// (deb.test, tests/lxc/apt-repo.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <sstream>
#include <thread>

#include "lxc_support.h"
#include "service/support/api_fixture.h"

namespace pvs::service {
namespace {

constexpr const char* kAllowed = "203.0.113.20";  // allowed.test
constexpr const char* kOther = "203.0.113.21";    // other.test

class LxcApiTest : public ApiTest {
 protected:
  test::StackOptions stack_options() override {
    test::StackOptions o;
    o.backend = "lxc";
    o.egress = true;
    return o;
  }
  void SetUp() override {
    ApiTest::SetUp();
    run_dir_ = lxctest::own_run_dir();
    ASSERT_FALSE(run_dir_.empty());
  }
  // ApiTest's TearDown destroys every sandbox and the stack; nothing of the run is left then.
  void TearDown() override {
    ApiTest::TearDown();
    EXPECT_EQ(lxctest::leftovers(run_dir_), std::vector<std::string>{});
  }

  std::string run_dir_;
};

TEST_F(LxcApiTest, AnAllowlistLetsOneNameThroughTheContainersOwnResolvConf) {
  std::string id = create(R"({"internet":{"allow":["allowed.test"],"ports":[80]}})");
  ASSERT_FALSE(id.empty());
  // The container's own resolver configuration and tools (glibc, curl of its root file system).
  EXPECT_EQ(in_sandbox(id, "cat /etc/resolv.conf"), "nameserver 10.99.0.1");
  EXPECT_EQ(in_sandbox(id, "id -un"), "root");

  // The allowed name resolves through resolv.conf (the resolver asked the agent first) and is
  // reachable by that name.
  EXPECT_EQ(in_sandbox(id, "getent ahostsv4 allowed.test | head -n1 | cut -d' ' -f1"), kAllowed);
  EXPECT_EQ(in_sandbox(id, "curl -sS -m 5 http://allowed.test/"),
            std::string("hello from ") + kAllowed);
  EXPECT_NE(stack_->resolver_log().find("allowed.test"), std::string::npos);

  // The other name is refused by the resolver (getent: not found), so curl cannot resolve it;
  // its bare address is refused at once by the ruleset (curl: could not connect, not a timeout).
  EXPECT_EQ(in_sandbox(id, "getent ahostsv4 other.test"), "exit 2:  ");
  EXPECT_EQ(in_sandbox(id, "curl -sS -m 5 http://other.test/ 2>/dev/null"), "exit 6:  ");
  EXPECT_EQ(in_sandbox(id, std::string("curl -sS -m 5 http://") + kOther + "/ 2>/dev/null"),
            "exit 7:  ");

  // The egress log has what the container asked for: the names the resolver decided and the
  // connection the node's ruleset refused (how often depends on the container's tools: glibc
  // asks A and AAAA, so counts are at least one).
  stack_->flush_resolver_log();
  std::map<std::string, Poco::JSON::Object::Ptr> names;
  Poco::JSON::Array::Ptr conns;
  for (int i = 0; i < 200 && (names.size() < 2 || conns->size() < 1); ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto r = call("GET", "/v1/sandboxes/" + id + "/egress/log");
    ASSERT_EQ(r.status, 200) << r.body;
    auto view = json(r.body);
    names.clear();
    auto lines = view->getArray("names");
    for (unsigned k = 0; k < lines->size(); ++k)
      names[lines->getObject(k)->getValue<std::string>("name")] = lines->getObject(k);
    conns = view->getArray("connections");
  }
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names.at("allowed.test")->getValue<std::string>("decision"), "allow");
  EXPECT_EQ(names.at("allowed.test")->getValue<std::string>("entry"), "allowed.test");
  EXPECT_EQ(names.at("other.test")->getValue<std::string>("decision"), "refuse");
  EXPECT_GE(names.at("other.test")->getValue<int>("count"), 1);
  ASSERT_EQ(conns->size(), 1u);
  EXPECT_EQ(conns->getObject(0)->getValue<std::string>("address"), kOther);
  EXPECT_EQ(conns->getObject(0)->getValue<int>("port"), 80);
  EXPECT_EQ(conns->getObject(0)->getValue<std::string>("protocol"), "tcp");
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 204);
}

TEST_F(LxcApiTest, ATerminalRunsTheContainersViAsRoot) {
  std::string id = create();
  ASSERT_FALSE(id.empty());
  const std::string base = "/v1/sandboxes/" + id + "/terminals";
  auto r = call("POST", base, R"({"command":"vi /root/x.txt","cols":80,"rows":24})");
  ASSERT_EQ(r.status, 201) << r.body;
  const std::string term = base + "/" + json(r.body)->getValue<std::string>("id");
  auto wait = [&](const std::string& body) {
    auto w = call("POST", term + "/wait", body);
    EXPECT_EQ(w.status, 200) << w.body;
    return w.status == 200 ? json(w.body)->getValue<std::string>("outcome") : w.body;
  };
  auto input = [&](const std::string& items) {
    auto i = call("POST", term + "/input", "{\"input\":" + items + "}");
    EXPECT_EQ(i.status, 200) << i.body;
  };
  // vi has drawn its screen (the file's name on the last line), then: insert, Escape, write.
  EXPECT_EQ(wait(R"({"pattern":"x\\.txt","timeout_ms":15000})"), "matched")
      << call("GET", term + "/screen").body;
  input(R"([{"text":"ihello"},{"key":"Escape"}])");
  EXPECT_EQ(wait(R"({"pattern":"^hello","timeout_ms":15000})"), "matched")
      << call("GET", term + "/screen").body;
  input(R"([{"text":":wq"},{"key":"Enter"}])");
  EXPECT_EQ(wait(R"({"timeout_ms":15000})"), "exited") << call("GET", term + "/screen").body;
  EXPECT_EQ(json(call("GET", term).body)->getValue<int>("exit_code"), 0);

  // The file is root's in the container's own file system, and it is what vi wrote.
  auto back = call("GET", "/v1/sandboxes/" + id + "/files?path=/root/x.txt");
  EXPECT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(back.body, "hello\n");
  EXPECT_EQ(in_sandbox(id, "stat -c '%U %u' /root/x.txt"), "root 0");
  // The vi that ran is the container's: its root file system's vim-tiny.
  EXPECT_EQ(in_sandbox(id, "readlink -f /usr/bin/vi"), "/usr/bin/vim.tiny");
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 204);
}

// The recipe of docs/templates.md on a real container: its base's apt sources point at the
// test's mirror (a template built first whose file they are: a recipe with packages copies
// nothing under /etc/apt/), the packages step reaches it through the egress allowlist the build
// sets for that step alone, fixed before the recipe's files are copied, and a sandbox of the
// template has the package, the file and the environment at its first command.
TEST_F(LxcApiTest, ARecipeInstallsAPackageFromTheMirrorAndASandboxHasItAtOnce) {
  ASSERT_EQ(lxctest::sh(std::string(PVS_APT_REPO_SCRIPT) + " " + stack_->www_dir()), 0);
  const std::string sources =
      "  - path: /etc/apt/sources.list\n"
      "    content: \"deb [trusted=yes] http://deb.test/ ./\\n\"\n";
  auto refused = call("POST", "/v1/templates",
                      "name: tools\npackages: [pvs-hello]\nfiles:\n" + sources, "tok-root");
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("is under /etc/apt/"), std::string::npos) << refused.body;
  auto mirror = call("POST", "/v1/templates", "name: mirror\nfiles:\n" + sources, "tok-root");
  ASSERT_EQ(mirror.status, 200) << mirror.body;
  ASSERT_NE(mirror.body.find("\"template\""), std::string::npos) << mirror.body;
  const std::string recipe =
      "name: tools\n"
      "base: mirror\n"
      "files:\n"
      "  - path: /opt/app/hello.txt\n"
      "    content: \"from the recipe\\n\"\n"
      "packages: [pvs-hello]\n"
      "env: {GREETING: hi, QUOTED: 'say \"hi\" \\\\ bye'}\n"
      "script: |\n"
      "  pvs-hello > /opt/app/built.txt\n"
      // A service with the template's env, supervised, ready once its port listens.
      "start: echo \"$GREETING\" > /tmp/greeting && exec python3 -m http.server 8000 "
      "--directory /opt/app\n"
      "ready: '[ -n \"$(ss -Htln sport = :8000)\" ]'\n"
      "ready_timeout_seconds: 30\n"
      "pool_size: 1\n";
  auto built = call("POST", "/v1/templates", recipe, "tok-root");
  ASSERT_EQ(built.status, 200) << built.body;
  std::string last;
  std::istringstream lines(built.body);
  for (std::string l; std::getline(lines, l);) last = l;
  auto outcome = json(last);
  ASSERT_TRUE(outcome->has("template")) << built.body;
  EXPECT_FALSE(outcome->getValue<bool>("cached"));
  auto egress_line = built.body.find("==> egress for the packages: deb.test");
  EXPECT_NE(egress_line, std::string::npos) << built.body;
  EXPECT_LT(egress_line, built.body.find("==> files")) << built.body;  // fixed before the files
  std::printf("[ figure ] template build on the lxc backend: %.1f s\n",
              outcome->getValue<double>("seconds"));

  EXPECT_NE(built.body.find("==> start and ready"), std::string::npos) << built.body;
  // The template's own hot pool member, made with its service up, serves the create.
  auto pool_ready = [&] {
    auto pools = json(call("GET", "/v1/pools", "", "tok-root").body)->getArray("pools");
    for (unsigned k = 0; pools && k < pools->size(); ++k)
      if (pools->getObject(k)->getValue<std::string>("name") == "tools")
        return pools->getObject(k)->getValue<int>("ready");
    return 0;
  };
  for (int i = 0; i < 600 && pool_ready() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(pool_ready(), 1);
  std::string id = create(R"({"template":"tools"})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(in_sandbox(id, "curl -sS -m 5 http://127.0.0.1:8000/built.txt"),
            "hello from a package");
  EXPECT_EQ(in_sandbox(id, "cat /tmp/greeting"), "hi");
  EXPECT_NE(in_sandbox(id, "cat /var/log/pve-sandbox/start.log").find("starting"),
            std::string::npos);
  EXPECT_EQ(in_sandbox(id, "pvs-hello"), "hello from a package");
  EXPECT_EQ(in_sandbox(id, "dpkg-query -W -f '${Status}' pvs-hello"), "install ok installed");
  EXPECT_EQ(in_sandbox(id, "cat /opt/app/hello.txt /opt/app/built.txt | tr '\\n' ' '"),
            "from the recipe hello from a package ");
  EXPECT_EQ(in_sandbox(id, "echo $GREETING"), "hi");  // every command, not only login shells
  EXPECT_EQ(in_sandbox(id, "printenv QUOTED"), R"(say "hi" \\ bye)");
  // Cleaned before it became a template; the build's egress went with the build.
  EXPECT_EQ(in_sandbox(id, "ls /var/lib/apt/lists | wc -l"), "0");
  EXPECT_EQ(in_sandbox(id, "getent ahostsv4 deb.test"), "exit 2:  ");

  // A ready check that never passes fails the build, saying so with the start command's log.
  auto broken = call("POST", "/v1/templates",
                     "name: broken\nstart: echo serving; sleep 600\nready: 'false'\n"
                     "ready_timeout_seconds: 1\n",
                     "tok-root");
  EXPECT_NE(broken.body.find("the ready check did not pass in 1 s"), std::string::npos)
      << broken.body;
  EXPECT_NE(broken.body.find("serving"), std::string::npos) << broken.body;
  EXPECT_EQ(broken.body.find("\"template\""), std::string::npos) << broken.body;

  // The same recipe again: a cache hit; in use, the template stays.
  auto again = call("POST", "/v1/templates", recipe, "tok-root");
  EXPECT_NE(again.body.find("\"cached\":true"), std::string::npos) << again.body;
  EXPECT_EQ(call("DELETE", "/v1/templates/tools", "", "tok-root").status, 409);
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_EQ(call("DELETE", "/v1/templates/tools", "", "tok-root").status, 204);
  EXPECT_EQ(call("DELETE", "/v1/templates/mirror", "", "tok-root").status, 204);
}

}  // namespace
}  // namespace pvs::service
