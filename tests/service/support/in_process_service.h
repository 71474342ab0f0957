// The REST service in this process on loopback: its audit log, metrics, Api and HttpServer, as
// the tests and benches that need no controller binary run it.
//
//   auto svc = test::InProcessService::start(config);            // config.listen_port = 0
//   ASSERT_TRUE(svc) << svc.error().message;
//   (*svc)->set_manager(std::move(manager));                      // sandbox calls answer 503 until
//   test::http((*svc)->port(), "GET", "/v1/health");
//
// The audit log is config.audit_file (none when it is empty or `audit_log` is false). Destroying it
// stops the server first, then lets go of the Manager.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "app/api.h"
#include "core/observability/audit.h"
#include "core/observability/metrics.h"
#include "pvesandbox/common/error.h"

namespace pvs::test {

class InProcessService {
 public:
  static Result<std::unique_ptr<InProcessService>> start(service::ServiceConfig config,
                                                         std::shared_ptr<Manager> manager = nullptr,
                                                         bool audit_log = true) {
    auto s = std::unique_ptr<InProcessService>(new InProcessService);
    if (audit_log && !config.audit_file.empty()) {
      auto audit = service::AuditLog::open(config.audit_file, false);
      if (!audit) return fail(audit.error().code, "audit: " + audit.error().message);
      s->audit_ = std::move(*audit);
    }
    service::Api::declare_metrics(s->metrics_);
    s->api_ = std::make_unique<service::Api>(std::move(config), s->audit_.get(), &s->metrics_);
    if (manager) s->api_->set_manager(std::move(manager));
    s->server_ = std::make_unique<service::HttpServer>(s->api_->config(), *s->api_);
    if (auto st = s->server_->start(); !st) return fail(st.error());
    return s;
  }
  // The same with a Manager opened on `manager_config`; the error of either.
  static Result<std::unique_ptr<InProcessService>> start(service::ServiceConfig config,
                                                         const ManagerConfig& manager_config) {
    auto manager = Manager::open(manager_config);
    if (!manager) return fail(manager.error());
    return start(std::move(config), std::shared_ptr<Manager>(std::move(*manager)));
  }
  ~InProcessService() {
    if (server_) server_->stop();
    server_.reset();
    if (api_) api_->set_manager(nullptr);
  }
  InProcessService(const InProcessService&) = delete;
  InProcessService& operator=(const InProcessService&) = delete;

  void set_manager(std::shared_ptr<Manager> manager) { api_->set_manager(std::move(manager)); }
  std::shared_ptr<Manager> manager() const { return api_->manager(); }
  std::uint16_t port() const { return server_->port(); }
  service::Api& api() { return *api_; }
  service::AuditLog* audit() { return audit_.get(); }  // null without config.audit_file
  service::Metrics& metrics() { return metrics_; }

 private:
  InProcessService() = default;

  std::unique_ptr<service::AuditLog> audit_;
  service::Metrics metrics_;
  std::unique_ptr<service::Api> api_;
  std::unique_ptr<service::HttpServer> server_;
};

}  // namespace pvs::test
