// Volumes through the REST API and sandboxctl (docs/api.md "Volumes"), in-process (Api +
// HttpServer) on the real Manager against the netns stack, whose pvesim allocates and keeps the
// volumes as Proxmox does (their files are the lxc tests': tests/lxc/lxc_sandbox_volume_test).
#include <gtest/gtest.h>

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

class VolumeApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StackOptions o;
    o.volume_holder = true;
    stack_ = std::make_unique<test::Stack>(o);
    ServiceConfig config;
    config.listen_port = 0;
    config.audit_file = stack_->dir() + "/audit.log";
    config.tokens = {{"admin", sha256_hex("tok-admin"), 4, true},
                     {"alice", sha256_hex("tok-alice"), 4, false},
                     {"bob", sha256_hex("tok-bob"), 4, false}};
    auto mc = stack_->manager_config();
    mc.volumes.holder_template_vmid = test::kVolumeHolderTemplate;
    mc.volumes.max_per_owner = 2;
    mc.volumes.max_size_gb = 4;
    auto svc = test::InProcessService::start(config, mc);
    ASSERT_TRUE(svc) << svc.error().message;
    svc_ = std::move(*svc);
  }
  void TearDown() override {
    if (auto m = svc_ ? svc_->manager() : nullptr) {
      for (const auto& info : m->list()) EXPECT_TRUE(m->destroy_by_id(info.id));
      for (const auto& v : m->volumes()) EXPECT_TRUE(m->delete_volume(v.id));
    }
    svc_.reset();
    stack_.reset();
  }
  HttpReply call(const std::string& method, const std::string& uri, const std::string& body,
                 const std::string& token) {
    return http(svc_->port(), method, uri, body, token);
  }

  std::unique_ptr<test::Stack> stack_;
  std::unique_ptr<test::InProcessService> svc_;
};

TEST_F(VolumeApiTest, CreateMountHoldResizeDelete) {
  auto made = call("POST", "/v1/volumes", R"({"name":"work","size_gb":2})", "tok-alice");
  ASSERT_EQ(made.status, 201) << made.body;
  auto v = json(made.body);
  const std::string id = v->getValue<std::string>("id");
  EXPECT_EQ(v->getValue<std::string>("name"), "work");
  EXPECT_EQ(v->getValue<std::string>("owner"), "alice");
  EXPECT_EQ(v->getValue<int>("size_gb"), 2);
  EXPECT_TRUE(v->isNull("mounted_by"));
  EXPECT_EQ(made.headers["Location"], "/v1/volumes/" + id);
  EXPECT_EQ(call("POST", "/v1/volumes", R"({"name":"work"})", "tok-alice").status, 409);
  EXPECT_EQ(call("POST", "/v1/volumes", R"({"name":"work"})", "tok-bob").status, 201);
  EXPECT_EQ(call("POST", "/v1/volumes", R"({"name":"Bad"})", "tok-alice").status, 400);
  EXPECT_EQ(call("POST", "/v1/volumes", R"({"name":"big","size_gb":5})", "tok-alice").status, 400);
  EXPECT_EQ(call("POST", "/v1/volumes", R"({"name":"two"})", "tok-alice").status, 201);
  auto full = call("POST", "/v1/volumes", R"({"name":"three"})", "tok-alice");
  EXPECT_EQ(full.status, 409);
  EXPECT_NE(full.body.find("max_per_owner"), std::string::npos) << full.body;
  EXPECT_EQ(json(call("GET", "/v1/volumes", "", "tok-alice").body)->getArray("volumes")->size(),
            2u);
  EXPECT_EQ(json(call("GET", "/v1/volumes", "", "tok-admin").body)->getArray("volumes")->size(),
            3u);
  EXPECT_EQ(call("GET", "/v1/volumes/" + id, "", "tok-bob").status, 404);
  auto metrics = http(svc_->port(), "GET", "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("\npvs_volumes 3\n"), std::string::npos) << metrics.body;
  EXPECT_EQ(call("GET", "/v1/volumes/vol-x", "", "tok-alice").status, 400);

  // Mounted by name, read-only: held from then on.
  auto sb =
      call("POST", "/v1/sandboxes",
           R"({"volumes":[{"volume":"work","path":"/mnt/w","read_only":true}]})", "tok-alice");
  ASSERT_EQ(sb.status, 201) << sb.body;
  const std::string sb_id = json(sb.body)->getValue<std::string>("id");
  auto mounts = json(sb.body)->getArray("volumes");
  ASSERT_EQ(mounts->size(), 1u);
  EXPECT_EQ(mounts->getObject(0)->getValue<std::string>("id"), id);
  EXPECT_EQ(mounts->getObject(0)->getValue<std::string>("path"), "/mnt/w");
  EXPECT_TRUE(mounts->getObject(0)->getValue<bool>("read_only"));
  auto held = json(call("GET", "/v1/volumes/" + id, "", "tok-alice").body);
  EXPECT_EQ(held->getValue<std::string>("mounted_by"), sb_id);
  auto again =
      call("POST", "/v1/sandboxes", R"({"volumes":[{"volume":"work","path":"/w"}]})", "tok-alice");
  EXPECT_EQ(again.status, 409);
  EXPECT_NE(again.body.find("mounted by " + sb_id), std::string::npos) << again.body;
  EXPECT_EQ(call("POST", "/v1/sandboxes",
                 "{\"volumes\":[{\"volume\":\"" + id + "\",\"path\":\"/w\"}]}", "tok-bob")
                .status,
            400);
  EXPECT_EQ(
      call("POST", "/v1/sandboxes", R"({"volumes":[{"volume":"nope","path":"/w"}]})", "tok-alice")
          .status,
      400);
  EXPECT_EQ(call("POST", "/v1/sandboxes", R"({"volumes":[{"volume":"two","path":"/proc/x"}]})",
                 "tok-alice")
                .status,
            400);
  EXPECT_EQ(call("DELETE", "/v1/volumes/" + id, "", "tok-alice").status, 409);
  EXPECT_EQ(call("POST", "/v1/volumes/" + id + "/resize", R"({"size_gb":3})", "tok-alice").status,
            409);
  EXPECT_EQ(call("POST", "/v1/sandboxes/" + sb_id + "/capture", "{}", "tok-alice").status, 409);
  EXPECT_EQ(
      call("POST", "/v1/sandboxes/" + sb_id + "/snapshots", R"({"name":"snap1"})", "tok-alice")
          .status,
      409);

  // Free again: grown (only), deleted.
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + sb_id, "", "tok-alice").status, 204);
  EXPECT_EQ(call("POST", "/v1/volumes/" + id + "/resize", R"({"size_gb":2})", "tok-alice").status,
            400);
  auto grown = call("POST", "/v1/volumes/" + id + "/resize", R"({"size_gb":3})", "tok-alice");
  ASSERT_EQ(grown.status, 200) << grown.body;
  EXPECT_EQ(json(grown.body)->getValue<int>("size_gb"), 3);
  EXPECT_EQ(call("DELETE", "/v1/volumes/" + id, "", "tok-bob").status, 404);
  EXPECT_EQ(call("DELETE", "/v1/volumes/" + id, "", "tok-alice").status, 204);
  EXPECT_EQ(call("GET", "/v1/volumes/" + id, "", "tok-alice").status, 404);
}

#ifdef PVS_SANDBOXCTL_BIN
TEST_F(VolumeApiTest, Sandboxctl) {
  const std::string url = "http://127.0.0.1:" + std::to_string(svc_->port());
  auto ctl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{PVS_SANDBOXCTL_BIN, "--url", url, "--token", "tok-alice"};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_captured(argv, stack_->dir());
  };
  auto made = ctl({"volume", "create", "data", "--size", "2"});
  ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
  EXPECT_NE(made.out.find("data  2 GiB on pve"), std::string::npos) << made.out;
  const std::string id = made.out.substr(0, made.out.find(' '));
  auto sb = ctl({"--json", "create", "--volume", "data:/srv/data:ro"});
  ASSERT_EQ(sb.exit_code, 0) << sb.out << sb.err;
  EXPECT_NE(sb.out.find("\"path\":\"/srv/data\",\"read_only\":true"), std::string::npos) << sb.out;
  auto list = ctl({"volume", "list"});
  EXPECT_NE(list.out.find(json(sb.out)->getValue<std::string>("id")), std::string::npos)
      << list.out;
  EXPECT_NE(ctl({"volume", "rm", id}).exit_code, 0);
  EXPECT_EQ(ctl({"destroy", json(sb.out)->getValue<std::string>("id")}).exit_code, 0);
  auto grown = ctl({"volume", "resize", id, "3"});
  EXPECT_NE(grown.out.find("3 GiB"), std::string::npos) << grown.out << grown.err;
  EXPECT_EQ(ctl({"volume", "rm", id}).exit_code, 0);
  EXPECT_NE(ctl({"create", "--volume", "nocolon"}).exit_code, 0);
}
#endif

}  // namespace
}  // namespace pvs::service
