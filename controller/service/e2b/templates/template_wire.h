// E2B's template build calls as the `e2b` SDK 2.51.0 makes them (`Template.build`,
// src/template/buildApi.ts and index.ts; infra's spec/openapi.yml), mapped onto pve-sandbox's
// template recipes (template_recipe.h, docs/templates.md). Pure functions; the build table
// (template_builds.h) and the routes (routes_templates.cc) use them.
//
//   POST /v3/templates {name, tags?, cpuCount?, memoryMB?, minFreeDiskMb?}
//        -> 202 {templateID, buildID, names, aliases, tags, public}
//   GET  /templates/{templateID}/files/{hash} -> 201 {present, url?}: the SDK PUTs a tar.gz of
//        the COPY step's files to `url` unless `present`
//   POST /v2/templates/{templateID}/builds/{buildID}
//        {fromImage | fromTemplate, fromImageRegistry?, startCmd?, readyCmd?, force, steps}
//        steps: [{type: "COPY"|"RUN"|"ENV"|"WORKDIR"|"USER", args, force, filesHash?, ...}]
//        -> 202 (the build runs in the background)
//   GET  /templates/{templateID}/builds/{buildID}/status?logsOffset=&limit=&level=
//        -> 200 {templateID, buildID, status: waiting|building|ready|error,
//                logEntries: [{timestamp, level, message}], logs: [], reason?: {message, step,
//                logEntries}}
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_error.h"
#include "pvesandbox/template_recipe.h"

namespace pvs::service::e2b {

// POST /v3/templates. `name` is a template name (template_recipe.h); "name:default" and
// tags ["default"] are the same; other tags are refused (a template here has one version).
struct BuildRequest {
  std::string name;
};
ApiResult<BuildRequest> parse_build_request(std::string_view body);
std::string build_request_reply(const std::string& template_id, const std::string& build_id);

// A COPY step's filesHash: SHA-256, 64 lower-case hex digits.
bool is_files_hash(std::string_view hash);
// A build id as this controller mints them (a UUID's form, lower-case).
bool is_build_id(std::string_view id);
std::string upload_link_reply(bool present, const std::string& url);

struct BuildStep {
  std::string type;
  std::vector<std::string> args;
  std::string files_hash;
};
struct BuildStart {
  std::string from_image;     // exactly one of these two
  std::string from_template;  //
  std::vector<BuildStep> steps;
  std::string start_cmd;  // setStartCmd: the recipe's start (docs/templates.md)
  std::string ready_cmd;  // its second argument or setReadyCmd: the recipe's ready
};
inline constexpr std::size_t kMaxBuildSteps = 256;
// The body of POST /v2/templates/{id}/builds/{buildID}; fromImageRegistry is refused by name.
ApiResult<BuildStart> parse_build_start(std::string_view body);

// A COPY step's archive, by its filesHash (nullopt: never uploaded).
using UploadLookup = std::function<std::optional<std::string>(const std::string& hash)>;

// A build mapped onto a recipe, and where each of its phases came from (1-based step numbers
// as the SDK counts them: step N is steps[N-1]).
struct MappedBuild {
  TemplateRecipe recipe;
  int first_file_step = 0;     // the first COPY or ENV (0: none)
  int first_package_step = 0;  // the first aptInstall
};
// Bases: fromTemplate "<custom template's name>" or "base"; fromImage "e2bdev/base" (the
// SDK's default and fromBaseImage()), "debian", "debian:stable" or "debian:latest"
// (fromDebianImage()): the node's default template. Steps: COPY (absolute dest, user ""
// or "root"), ENV, RUN as root (aptInstall's exact command: packages), USER root. The order
// must be the recipe's: every COPY before every aptInstall before every RUN (ENV anywhere).
// 400 naming the step and the rule otherwise.
ApiResult<MappedBuild> map_build(const std::string& name, const BuildStart& start,
                                 const UploadLookup& uploads);

// The line the build's script prints before step N's RUN (the log names the step running).
std::string step_marker(int step, std::string_view command);
// The step number a marker line names, or 0.
int marker_step(std::string_view line);
// The SDK's `reason.step` for a failed build: "N" for the step that failed, or "base" when
// the build failed before any step (clone, start). `error` is the build's error message,
// `last_marker` the last step marker it printed (0: none).
std::string failed_step(const MappedBuild& build, std::string_view error, int last_marker);

// GET .../status
struct StatusQuery {
  std::size_t offset = 0;
  std::size_t limit = 100;
  int min_level = 0;  // 0 debug, 1 info, 2 warn, 3 error
};
ApiResult<StatusQuery> parse_status_query(const std::multimap<std::string, std::string>& query);
struct LogLine {
  std::int64_t unix_ms = 0;
  int level = 1;
  std::string message;
};
struct StatusView {
  std::string template_id, build_id;
  std::string status;          // waiting, building, ready, error
  std::vector<LogLine> lines;  // the page asked for
  std::optional<std::string> reason;
  std::string reason_step;
  std::vector<LogLine> reason_lines;
};
std::string build_status_reply(const StatusView& view);

}  // namespace pvs::service::e2b
