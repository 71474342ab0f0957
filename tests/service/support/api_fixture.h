// The fixture of the in-process API tests (api_test.cc, api_nodes_test.cc): Api + HttpServer on
// the real Manager against pvesim's model backend with real agents and rulesets
// (pvs::test::Stack), three tokens (alice, bob, admin root) and an audit log in the stack's dir.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>

#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include "app/api.h"
#include "core/observability/audit.h"
#include "http/auth.h"
#include "service/support/http_client.h"
#include "service/support/json_object.h"
#include "support/stack_fixture.h"

namespace pvs::service {

using test::http;
using test::HttpReply;

inline std::string error_code(const HttpReply& r) {
  try {
    return json(r.body)->getObject("error")->getValue<std::string>("code");
  } catch (...) {
    return "(not an error envelope: " + r.body + ")";
  }
}

class ApiTest : public ::testing::Test {
 protected:
  // The stack the API runs on (a cluster fixture asks for nodes).
  virtual test::StackOptions stack_options() {
    test::StackOptions o;
    o.backend = "model";
    return o;
  }
  // The Manager's configuration as the stack made it, changed by a fixture (node labels, ...).
  virtual void adjust(ManagerConfig&) {}
  void SetUp() override {
    stack_ = std::make_unique<test::Stack>(stack_options());
    config_.listen_port = 0;
    config_.tokens = {{"alice", sha256_hex("tok-alice"), 3, false},
                      {"bob", sha256_hex("tok-bob"), 40, false},
                      {"root", sha256_hex("tok-root"), 0, true}};
    config_.max_body_bytes = 4096;
    config_.max_upload_bytes = 1 << 20;
    config_.audit_file = stack_->dir() + "/audit.log";
    config_.audit_denied_interval_seconds = 1;
    adjust_service(config_);
    start();
  }
  // The service's configuration before it starts (policy, tokens, ...).
  virtual void adjust_service(ServiceConfig&) {}
  void TearDown() override {
    // Leave nothing behind (a Manager destroyed with live sandboxes keeps them in Proxmox).
    if (auto m = api_ ? api_->manager() : nullptr) {
      for (const auto& info : m->list()) EXPECT_TRUE(m->destroy_by_id(info.id));
    }
    stop();
    stack_.reset();
  }
  void start() {
    auto audit = AuditLog::open(config_.audit_file, false);
    ASSERT_TRUE(audit) << audit.error().message;
    audit_ = std::move(*audit);
    metrics_ = std::make_unique<Metrics>();
    Api::declare_metrics(*metrics_);
    api_ = std::make_unique<Api>(config_, audit_.get(), metrics_.get());
    ManagerConfig mc = stack_->manager_config();
    adjust(mc);
    auto m = Manager::open(std::move(mc));
    ASSERT_TRUE(m) << m.error().message;
    api_->set_manager(std::shared_ptr<Manager>(std::move(*m)));
    server_ = std::make_unique<HttpServer>(api_->config(), *api_);
    ASSERT_TRUE(server_->start());
    port_ = server_->port();
  }
  void stop() {
    if (server_) server_->stop();
    server_.reset();
    if (api_) api_->set_manager(nullptr);
    api_.reset();
    metrics_.reset();
    audit_.reset();
  }
  HttpReply call(const std::string& method, const std::string& uri, const std::string& body = "",
                 const std::string& token = "tok-alice",
                 std::map<std::string, std::string> headers = {}) {
    return http(port_, method, uri, body, token, std::move(headers));
  }
  std::string create(const std::string& body = "{}", const std::string& token = "tok-alice") {
    auto r = call("POST", "/v1/sandboxes", body, token);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? json(r.body)->getValue<std::string>("id") : "";
  }
  // Runs `command` in the sandbox through the API; its stdout's first line (or "exit <n>: ..."
  // when it failed).
  std::string in_sandbox(const std::string& id, const std::string& command,
                         const std::string& token = "tok-alice") {
    Poco::JSON::Object body;
    body.set("command", command);
    body.set("timeout_seconds", 20);
    std::ostringstream text;
    body.stringify(text);
    auto r = call("POST", "/v1/sandboxes/" + id + "/exec", text.str(), token);
    if (r.status != 200) return "HTTP " + std::to_string(r.status) + ": " + r.body;
    auto result = json(r.body);
    std::string out = result->getValue<std::string>("stdout");
    out = out.substr(0, out.find('\n'));
    int code = result->getValue<int>("exit_code");
    if (code != 0)
      return "exit " + std::to_string(code) + ": " + out + " " +
             result->getValue<std::string>("stderr");
    return out;
  }
  std::vector<Poco::JSON::Object::Ptr> audit_lines() {
    std::ifstream in(config_.audit_file);
    std::vector<Poco::JSON::Object::Ptr> out;
    for (std::string l; std::getline(in, l);) out.push_back(json(l));
    return out;
  }

  std::unique_ptr<test::Stack> stack_;
  ServiceConfig config_;
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
  std::uint16_t port_ = 0;
};

}  // namespace pvs::service
