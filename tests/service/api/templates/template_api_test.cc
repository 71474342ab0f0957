// Custom templates through the REST API (POST/GET/DELETE /v1/templates, and templates of a
// sandbox's files: POST /v1/sandboxes/{id}/capture and /fork), in-process (Api + HttpServer) on
// the real Manager against the netns stack (files are the lxc tests': tests/lxc). The containers
// share this machine's file system as the stack's user: the recipe writes into a directory of the
// stack's only.
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <Poco/JSON/Parser.h>

#include "http/auth.h"
#include "service/support/http_client.h"
#include "service/support/in_process_service.h"
#include "service/support/json_object.h"
#include "support/sshd_fixture.h"
#include "support/stack_fixture.h"

namespace pvs::service {
namespace {

using test::http;
using test::HttpReply;

std::vector<std::string> lines_of(const std::string& body) {
  std::vector<std::string> out;
  std::istringstream in(body);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

const std::string kE2bKey = "e2b_" + std::string(40, 'a');

class TemplateApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    stack_ = std::make_unique<test::Stack>();
    work_ = stack_->dir() + "/tpl";
    ASSERT_EQ(::mkdir(work_.c_str(), 0755), 0);
    auto* pw = ::getpwnam(stack_->user().c_str());
    ASSERT_TRUE(pw);
    ASSERT_EQ(::chown(work_.c_str(), pw->pw_uid, pw->pw_gid), 0);
    ServiceConfig config;
    config.listen_port = 0;
    config.audit_file = stack_->dir() + "/audit.log";
    config.tokens = {{"admin", sha256_hex("tok-admin"), 4, true},
                     {"alice", sha256_hex("tok-alice"), 4, false},
                     {"bob", sha256_hex("tok-bob"), 4, false}};
    config.tokens[1].e2b_key_sha256 = sha256_hex(kE2bKey);
    auto mc = stack_->manager_config();
    mc.template_clean_command = "true";
    auto svc = test::InProcessService::start(config, mc);
    ASSERT_TRUE(svc) << svc.error().message;
    svc_ = std::move(*svc);
  }
  void TearDown() override {
    if (auto m = svc_ ? svc_->manager() : nullptr) {
      for (const auto& info : m->list()) EXPECT_TRUE(m->destroy_by_id(info.id));
    }
    svc_.reset();
    stack_.reset();
  }
  HttpReply call(const std::string& method, const std::string& uri, const std::string& body = "",
                 const std::string& token = "tok-admin") {
    return http(svc_->port(), method, uri, body, token);
  }
  std::string recipe(const std::string& script) const {
    return "name: web\nfiles:\n  - path: " + work_ + "/index.html\n    content: \"<h1>hi</h1>\"\n" +
           "script: |\n  " + script + "\n";
  }

  std::unique_ptr<test::Stack> stack_;
  std::unique_ptr<test::InProcessService> svc_;
  std::string work_;
};

TEST_F(TemplateApiTest, BuildStreamsListCreateDelete) {
  EXPECT_EQ(call("POST", "/v1/templates", recipe("true"), "tok-alice").status, 403);
  auto bad = call("POST", "/v1/templates", "name: Bad");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_NE(bad.body.find("name"), std::string::npos);

  auto r = call("POST", "/v1/templates", recipe("echo step-output"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto lines = lines_of(r.body);
  ASSERT_GE(lines.size(), 3u) << r.body;
  EXPECT_NE(r.body.find("{\"line\":\"step-output\"}"), std::string::npos) << r.body;
  auto last = json(lines.back());
  ASSERT_TRUE(last->has("template")) << lines.back();
  EXPECT_FALSE(last->getValue<bool>("cached"));
  auto tpl = last->getObject("template");
  EXPECT_EQ(tpl->getValue<std::string>("name"), "web");
  // The node it was built on, and its one copy there.
  ASSERT_EQ(last->getArray("built_on")->size(), 1u);
  EXPECT_EQ(last->getArray("built_on")->getElement<std::string>(0), "pve");
  EXPECT_EQ(tpl->getArray("nodes")->getElement<std::string>(0), "pve");
  ASSERT_EQ(tpl->getArray("copies")->size(), 1u);
  EXPECT_EQ(tpl->getArray("copies")->getObject(0)->getValue<int>("vmid"),
            tpl->getValue<int>("vmid"));

  // Again (as JSON this time, the same recipe): a cache hit.
  std::string as_json = "{\"name\":\"web\",\"files\":[{\"path\":\"" + work_ +
                        "/index.html\",\"content\":\"<h1>hi</h1>\"}],\"script\":\"echo "
                        "step-output\\n\"}";
  auto again = call("POST", "/v1/templates", as_json);
  ASSERT_EQ(again.status, 200);
  EXPECT_TRUE(json(lines_of(again.body).back())->getValue<bool>("cached")) << again.body;

  auto list = call("GET", "/v1/templates");
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(json(list.body)->getArray("templates")->size(), 1u);
  EXPECT_EQ(call("GET", "/v1/templates/web").status, 200);
  EXPECT_EQ(call("GET", "/v1/templates/nope").status, 404);

  // The E2B API's templateID names it too.
  auto e2b = http(svc_->port(), "POST", "/e2b/v2/sandboxes", "{\"templateID\":\"web\"}", "",
                  {{"X-API-Key", kE2bKey}, {"Content-Type", "application/json"}});
  ASSERT_EQ(e2b.status, 201) << e2b.body;
  auto e2b_id = json(e2b.body)->getValue<std::string>("sandboxID");
  EXPECT_EQ(json(call("GET", "/v1/templates/web").body)->getValue<int>("in_use"), 1);
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + e2b_id, "", "tok-alice").status, 204);
  auto sb = call("POST", "/v1/sandboxes", "{\"template\":\"web\"}", "tok-alice");
  ASSERT_EQ(sb.status, 201) << sb.body;
  auto id = json(sb.body)->getValue<std::string>("id");
  EXPECT_EQ(call("POST", "/v1/sandboxes", "{\"template\":\"nope\"}", "tok-alice").status, 400);
  auto del = call("DELETE", "/v1/templates/web");
  EXPECT_EQ(del.status, 409) << del.body;
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + id, "", "tok-alice").status, 204);
  EXPECT_EQ(call("DELETE", "/v1/templates/web").status, 204);
  EXPECT_EQ(call("GET", "/v1/templates/web").status, 404);
}

// Issue #46, finding 6: pve-sandbox/template-name records the template a create used; a tenant
// who sets it as a label (REST) or metadata (E2B) is refused, and so cannot hold off an admin's
// delete of a template the tenant never used.
TEST_F(TemplateApiTest, ATenantsLabelNeitherUsesNorHoldsATemplate) {
  auto r = call("POST", "/v1/templates", recipe("true"));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_TRUE(json(lines_of(r.body).back())->has("template")) << r.body;
  auto rest = call("POST", "/v1/sandboxes", R"({"labels":{"pve-sandbox/template-name":"web"}})",
                   "tok-alice");
  EXPECT_EQ(rest.status, 400) << rest.body;
  EXPECT_NE(rest.body.find(R"(label key \"pve-sandbox/template-name\" is reserved)"),
            std::string::npos)
      << rest.body;
  auto other =
      call("POST", "/v1/sandboxes", R"({"labels":{"pve-sandbox/anything":"x"}})", "tok-alice");
  EXPECT_EQ(other.status, 400) << other.body;
  auto e2b = http(svc_->port(), "POST", "/e2b/v2/sandboxes",
                  R"({"templateID":"base","metadata":{"pve-sandbox/template-name":"web"}})", "",
                  {{"X-API-Key", kE2bKey}, {"Content-Type", "application/json"}});
  EXPECT_EQ(e2b.status, 400) << e2b.body;
  EXPECT_NE(e2b.body.find("is reserved"), std::string::npos) << e2b.body;
  // Labels of the tenant's own are fine, and a sandbox of another template is no user.
  auto mine = call("POST", "/v1/sandboxes", R"({"labels":{"team/web":"yes"}})", "tok-alice");
  ASSERT_EQ(mine.status, 201) << mine.body;
  EXPECT_EQ(json(call("GET", "/v1/templates/web").body)->getValue<int>("in_use"), 0);
  EXPECT_EQ(call("DELETE", "/v1/templates/web").status, 204);
}

int fork_bases(const std::string& list_body) {
  int n = 0;
  for (auto at = list_body.find("\"fork_base\":true"); at != std::string::npos;
       at = list_body.find("\"fork_base\":true", at + 1))
    ++n;
  return n;
}

// A capture is its owner's: others neither see, use nor delete it. A fork copies the source's
// labels and is all or none: one past the token's max_sandboxes destroys those it made, and its
// base with them; the reconcile destroys a base once its forks are gone.
TEST_F(TemplateApiTest, CapturesAreTheirOwnersAndForksAreAllOrNone) {
  auto src = call("POST", "/v1/sandboxes", R"({"labels":{"team":"a"}})", "tok-alice");
  ASSERT_EQ(src.status, 201) << src.body;
  auto id = json(src.body)->getValue<std::string>("id");
  auto cap = call("POST", "/v1/sandboxes/" + id + "/capture", R"({"name":"mine"})", "tok-alice");
  ASSERT_EQ(cap.status, 201) << cap.body;
  EXPECT_EQ(json(cap.body)->getValue<std::string>("owner"), "alice");
  EXPECT_EQ(json(cap.body)->getValue<std::string>("source"), id);
  EXPECT_EQ(
      call("POST", "/v1/sandboxes/" + id + "/capture", R"({"name":"Bad"})", "tok-alice").status,
      400);
  EXPECT_EQ(call("GET", "/v1/templates/mine", "", "tok-alice").status, 200);
  EXPECT_EQ(call("GET", "/v1/templates/mine").status, 200);  // an admin sees every one
  EXPECT_EQ(call("GET", "/v1/templates/mine", "", "tok-bob").status, 404);
  EXPECT_EQ(json(call("GET", "/v1/templates", "", "tok-bob").body)->getArray("templates")->size(),
            0u);
  EXPECT_EQ(call("POST", "/v1/sandboxes", R"({"template":"mine"})", "tok-bob").status, 400);
  EXPECT_EQ(call("DELETE", "/v1/templates/mine", "", "tok-bob").status, 404);
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + id + "/capture", "{}", "tok-bob").status, 404);
  auto from = call("POST", "/v1/sandboxes", R"({"template":"mine"})", "tok-alice");
  ASSERT_EQ(from.status, 201) << from.body;
  EXPECT_EQ(call("DELETE", "/v1/templates/mine", "", "tok-alice").status, 409);
  auto from_id = json(from.body)->getValue<std::string>("id");
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + from_id, "", "tok-alice").status, 204);
  EXPECT_EQ(call("DELETE", "/v1/templates/mine", "", "tok-alice").status, 204);

  auto forked = call("POST", "/v1/sandboxes/" + id + "/fork", R"({"count":2})", "tok-alice");
  ASSERT_EQ(forked.status, 201) << forked.body;
  auto forks = json(forked.body)->getArray("sandboxes");
  ASSERT_EQ(forks->size(), 2u);
  for (std::size_t i = 0; i < forks->size(); ++i)
    EXPECT_EQ(forks->getObject(i)->getObject("labels")->getValue<std::string>("team"), "a");
  // Alice has 3 of her 4: a fork of 2 makes one, is refused the second, and keeps neither.
  auto refused = call("POST", "/v1/sandboxes/" + id + "/fork", R"({"count":2})", "tok-alice");
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(svc_->manager()->count_owned("alice"), 3u);
  EXPECT_EQ(fork_bases(call("GET", "/v1/templates").body), 1);
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + id + "/fork", R"({"count":0})", "tok-alice").status,
            400);
  for (std::size_t i = 0; i < forks->size(); ++i)
    ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + forks->getObject(i)->getValue<std::string>("id"),
                   "", "tok-alice")
                  .status,
              204);
  ASSERT_TRUE(svc_->manager()->reconcile());
  EXPECT_EQ(fork_bases(call("GET", "/v1/templates").body), 0);

  // A paused sandbox is captured too (its container is stopped: no snapshot needed).
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + id + "/pause", "{}", "tok-alice").status, 200);
  auto paused = call("POST", "/v1/sandboxes/" + id + "/capture", "{}", "tok-alice");
  ASSERT_EQ(paused.status, 201) << paused.body;
  auto name = json(paused.body)->getValue<std::string>("name");
  EXPECT_EQ(name.rfind("snap-", 0), 0u) << name;
  EXPECT_EQ(call("DELETE", "/v1/templates/" + name, "", "tok-alice").status, 204);
}

TEST_F(TemplateApiTest, AFailedBuildEndsWithItsErrorAndLog) {
  auto r = call("POST", "/v1/templates", recipe("echo broken-step; exit 2"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto last = json(lines_of(r.body).back());
  ASSERT_TRUE(last->has("error")) << r.body;
  auto msg = last->getObject("error")->getValue<std::string>("message");
  EXPECT_NE(msg.find("script: exited with 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("broken-step"), std::string::npos) << msg;
  EXPECT_EQ(stack_->containers(), std::vector<int>{});
  EXPECT_EQ(json(call("GET", "/v1/templates").body)->getArray("templates")->size(), 0u);
}

#ifdef PVS_SANDBOXCTL_BIN
TEST_F(TemplateApiTest, SandboxctlBuildsAFileRecipeListsAndRemoves) {
  // A `src` file next to the recipe: sandboxctl reads it and sends it inline.
  const std::string dir = stack_->dir() + "/recipe";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  std::ofstream(dir + "/page.html") << "<p>from src</p>\n";
  std::ofstream(dir + "/web.yaml") << "name: web\nfiles:\n  - path: " << work_
                                   << "/page.html\n    src: page.html\nscript: echo ctl-step\n";
  const std::string url = "http://127.0.0.1:" + std::to_string(svc_->port());
  auto ctl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{PVS_SANDBOXCTL_BIN, "--url", url, "--token", "tok-admin"};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_captured(argv, stack_->dir());
  };
  auto built = ctl({"template", "build", dir + "/web.yaml"});
  EXPECT_EQ(built.exit_code, 0) << built.out << built.err;
  EXPECT_NE(built.out.find("ctl-step"), std::string::npos) << built.out;
  EXPECT_NE(built.out.find("template web: vmid"), std::string::npos) << built.out;
  std::ifstream page(work_ + "/page.html");
  std::string text((std::istreambuf_iterator<char>(page)), {});
  EXPECT_EQ(text, "<p>from src</p>\n");
  auto again = ctl({"template", "build", dir + "/web.yaml"});
  EXPECT_NE(again.out.find("(cached)"), std::string::npos) << again.out;
  auto list = ctl({"template", "list"});
  EXPECT_NE(list.out.find("web"), std::string::npos) << list.out;
  auto rm = ctl({"template", "rm", "web"});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  auto missing = ctl({"template", "rm", "web"});
  EXPECT_NE(missing.exit_code, 0);
}
#endif

}  // namespace
}  // namespace pvs::service
