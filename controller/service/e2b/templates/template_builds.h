// E2B template builds in flight (docs/e2b.md, "Template builds"): a small table of builds by
// build id, each requested (POST /v3/templates), then started with its steps mapped onto a
// recipe (map_build) and run in the background by Manager::build_template, its output kept as
// the SDK's log entries; and the COPY steps' archives the SDK uploads to a one-time URL the
// controller serves itself. Everything is bounded: builds, lines per build, archives and their
// bytes; a build that is never started and an archive expire after an hour.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "e2b/templates/template_wire.h"
#include "pvesandbox/common/error.h"
#include "pvesandbox/custom_templates.h"

namespace pvs::service::e2b {

class TemplateBuilds {
 public:
  using Builder = std::function<Result<TemplateBuild>(const TemplateRecipe&, const BuildOutput&)>;
  // A build's end, for the audit log: its mapped build and outcome.
  using Done = std::function<void(const MappedBuild&, const Result<TemplateBuild>&)>;
  struct Limits {
    std::size_t max_builds = 32;              // kept, finished ones evicted oldest first
    std::size_t max_lines = 20000;            // log entries per build
    std::size_t max_upload_bytes = 16 << 20;  // one archive
    std::size_t max_stored_bytes = 64 << 20;  // all archives
    std::size_t max_uploads = 256;
    std::chrono::seconds expiry{3600};  // unstarted builds, archives
  };
  explicit TemplateBuilds(Builder builder) : TemplateBuilds(std::move(builder), Limits{}) {}
  TemplateBuilds(Builder builder, Limits limits);
  ~TemplateBuilds();  // waits for the builds running
  TemplateBuilds(const TemplateBuilds&) = delete;
  TemplateBuilds& operator=(const TemplateBuilds&) = delete;

  // A new build of template `name`, waiting for its steps: its build id. 429 when the table
  // is full of builds not finished.
  ApiResult<std::string> request(const std::string& name);

  struct Link {
    bool present = false;  // the archive is here already
    std::string token;     // else: the one-time upload token (64 hex digits)
  };
  // An upload link for template `template_id`'s archive `hash`; 404 without a build waiting.
  ApiResult<Link> upload_link(const std::string& template_id, const std::string& hash);
  // True while `token` is a link not yet used (checked before its body is read).
  bool expects(const std::string& token) const;
  // The archive sent to the link of `token` (once; 404 for an unknown or used token, 413
  // beyond max_upload_bytes, 429 when all archives together would exceed max_stored_bytes).
  ApiResult<void> upload(const std::string& token, std::string data);
  std::optional<std::string> archive(const std::string& template_id, const std::string& hash) const;

  // Build `build_id` of `template_id` (waiting) runs `mapped` in the background; `done` is
  // called at its end. 404: no such build; 409: started already.
  ApiResult<void> start(const std::string& template_id, const std::string& build_id,
                        MappedBuild mapped, Done done);
  ApiResult<StatusView> status(const std::string& template_id, const std::string& build_id,
                               const StatusQuery& query) const;

 private:
  struct Build;
  struct Upload {
    std::string template_id, hash;
    std::string data;
    bool received = false;
    std::chrono::steady_clock::time_point created;
  };
  void expire_locked(std::chrono::steady_clock::time_point now);
  void run(std::shared_ptr<Build> b, Done done);

  Builder builder_;
  Limits limits_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Build>> builds_;  // by build id
  std::map<std::string, Upload> uploads_;                 // by sha256(token)
  std::size_t stored_ = 0;
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::vector<Worker> workers_;  // finished ones are joined at the next start
};

// A UUID-shaped random id (version 4), and 32 random bytes as hex.
std::string mint_build_id();
std::string mint_upload_token();

}  // namespace pvs::service::e2b
