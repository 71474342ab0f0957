#include "e2b/templates/template_builds.h"

#include <Poco/DigestEngine.h>

#include <cstdio>

#include "http/auth.h"
#include "pvesandbox/common/random.h"

namespace pvs::service::e2b {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kReasonLines = 20;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `n` bytes from getrandom(2) (upload links are secrets; build ids must not collide).
Poco::DigestEngine::Digest random_bytes(std::size_t n) {
  const std::string bytes = secure_random_or_throw(n, "an upload link or build id");
  return Poco::DigestEngine::Digest(bytes.begin(), bytes.end());
}

}  // namespace

struct TemplateBuilds::Build {
  std::string template_id, build_id;
  enum class State { kWaiting, kBuilding, kReady, kError } state = State::kWaiting;
  Clock::time_point created;
  MappedBuild mapped;
  std::vector<LogLine> lines;
  bool dropped = false;
  int last_marker = 0;
  std::string reason, reason_step;
};

std::string mint_build_id() {
  auto r = random_bytes(16);
  r[6] = static_cast<unsigned char>((r[6] & 0x0f) | 0x40);
  r[8] = static_cast<unsigned char>((r[8] & 0x3f) | 0x80);
  std::string h = Poco::DigestEngine::digestToHex(r);
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

std::string mint_upload_token() {
  return Poco::DigestEngine::digestToHex(random_bytes(32));
}

TemplateBuilds::TemplateBuilds(Builder builder, Limits limits)
    : builder_(std::move(builder)), limits_(limits) {}

TemplateBuilds::~TemplateBuilds() {
  std::vector<Worker> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& w : workers) w.thread.join();
}

void TemplateBuilds::expire_locked(Clock::time_point now) {
  for (auto it = uploads_.begin(); it != uploads_.end();) {
    if (now - it->second.created > limits_.expiry) {
      stored_ -= it->second.data.size();
      it = uploads_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = builds_.begin(); it != builds_.end();) {
    bool stale =
        it->second->state == Build::State::kWaiting && now - it->second->created > limits_.expiry;
    it = stale ? builds_.erase(it) : std::next(it);
  }
}

ApiResult<std::string> TemplateBuilds::request(const std::string& name) {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  expire_locked(now);
  while (builds_.size() >= limits_.max_builds) {
    auto oldest = builds_.end();
    for (auto it = builds_.begin(); it != builds_.end(); ++it) {
      auto s = it->second->state;
      if ((s == Build::State::kReady || s == Build::State::kError) &&
          (oldest == builds_.end() || it->second->created < oldest->second->created))
        oldest = it;
    }
    if (oldest == builds_.end())
      return tl::unexpected(limit_exceeded(std::to_string(limits_.max_builds) +
                                           " template builds are waiting or running"));
    builds_.erase(oldest);
  }
  auto b = std::make_shared<Build>();
  b->template_id = name;
  b->build_id = mint_build_id();
  b->created = now;
  builds_[b->build_id] = b;
  return b->build_id;
}

ApiResult<TemplateBuilds::Link> TemplateBuilds::upload_link(const std::string& template_id,
                                                            const std::string& hash) {
  std::lock_guard lock(mu_);
  expire_locked(Clock::now());
  bool waiting = false;
  for (const auto& [id, b] : builds_)
    waiting |= b->template_id == template_id && b->state == Build::State::kWaiting;
  if (!waiting)
    return tl::unexpected(
        not_found("no build of template \"" + template_id + "\" waits for files"));
  for (const auto& [key, u] : uploads_)
    if (u.template_id == template_id && u.hash == hash && u.received) return Link{true, ""};
  if (uploads_.size() >= limits_.max_uploads)
    return tl::unexpected(limit_exceeded("too many template file uploads are pending"));
  Link link{false, mint_upload_token()};
  uploads_[sha256_hex(link.token)] = Upload{template_id, hash, "", false, Clock::now()};
  return link;
}

bool TemplateBuilds::expects(const std::string& token) const {
  std::lock_guard lock(mu_);
  auto it = uploads_.find(sha256_hex(token));
  return it != uploads_.end() && !it->second.received;
}

ApiResult<void> TemplateBuilds::upload(const std::string& token, std::string data) {
  std::lock_guard lock(mu_);
  auto it = uploads_.find(sha256_hex(token));
  if (it == uploads_.end() || it->second.received)
    return tl::unexpected(not_found("no such upload (a link is good for one upload)"));
  if (data.size() > limits_.max_upload_bytes)
    return tl::unexpected(too_large("an archive is at most " +
                                    std::to_string(limits_.max_upload_bytes >> 20) + " MiB"));
  if (stored_ + data.size() > limits_.max_stored_bytes)
    return tl::unexpected(limit_exceeded("the template file uploads held are full"));
  // Another link to the same archive (two COPY steps of the same files) may have been used.
  for (auto& [key, u] : uploads_)
    if (u.received && u.template_id == it->second.template_id && u.hash == it->second.hash) {
      uploads_.erase(it);
      return {};
    }
  stored_ += data.size();
  it->second.data = std::move(data);
  it->second.received = true;
  return {};
}

std::optional<std::string> TemplateBuilds::archive(const std::string& template_id,
                                                   const std::string& hash) const {
  std::lock_guard lock(mu_);
  for (const auto& [key, u] : uploads_)
    if (u.received && u.template_id == template_id && u.hash == hash) return u.data;
  return std::nullopt;
}

ApiResult<void> TemplateBuilds::start(const std::string& template_id, const std::string& build_id,
                                      MappedBuild mapped, Done done) {
  std::lock_guard lock(mu_);
  auto it = builds_.find(build_id);
  if (it == builds_.end() || it->second->template_id != template_id)
    return tl::unexpected(
        not_found("no build " + build_id + " of template \"" + template_id + "\""));
  auto b = it->second;
  if (b->state != Build::State::kWaiting)
    return tl::unexpected(ApiError{409, "conflict", "build " + build_id + " was started already"});
  b->state = Build::State::kBuilding;
  b->mapped = std::move(mapped);
  const auto& r = b->mapped.recipe;
  b->lines.push_back({now_ms(), 1,
                      "Building template " + template_id + " as a recipe: files " +
                          std::to_string(r.files.size()) + ", packages " +
                          std::to_string(r.packages.size()) + ", env " +
                          std::to_string(r.env.size()) + ", script " +
                          std::to_string(r.script.size()) + " bytes"});
  for (auto w = workers_.begin(); w != workers_.end();) {
    if (!w->finished->load()) {
      ++w;
      continue;
    }
    w->thread.join();  // it has returned, or is about to
    w = workers_.erase(w);
  }
  auto finished = std::make_shared<std::atomic<bool>>(false);
  workers_.push_back({std::thread([this, b, finished, done = std::move(done)] {
                        run(b, done);
                        finished->store(true);
                      }),
                      finished});
  return {};
}

void TemplateBuilds::run(std::shared_ptr<Build> b, Done done) {
  auto output = [this, b](std::string_view line) {
    std::lock_guard lock(mu_);
    if (int m = marker_step(line)) b->last_marker = m;
    if (b->lines.size() >= limits_.max_lines) {
      if (!b->dropped) b->lines.push_back({now_ms(), 2, "(later lines are not kept)"});
      b->dropped = true;
      return;
    }
    int level = line.substr(0, 11) == "==> failed:" ? 3 : 1;
    b->lines.push_back({now_ms(), level, std::string(line.substr(0, 4096))});
  };
  Result<TemplateBuild> result = fail(ErrorCode::kInternal, "the build did not run");
  try {
    result = builder_(b->mapped.recipe, output);
  } catch (const std::exception& e) {  // a build never takes the controller down
    result = fail(ErrorCode::kInternal, std::string("the build failed: ") + e.what());
  }
  {
    std::lock_guard lock(mu_);
    if (result) {
      b->lines.push_back({now_ms(), 1,
                          result->cached ? "Template " + b->template_id + " was built already"
                                         : "Template " + b->template_id + " is ready"});
      b->state = Build::State::kReady;
    } else {
      b->reason = result.error().message;
      b->reason_step = failed_step(b->mapped, b->reason, b->last_marker);
      b->state = Build::State::kError;
    }
  }
  if (done) done(b->mapped, result);
}

ApiResult<StatusView> TemplateBuilds::status(const std::string& template_id,
                                             const std::string& build_id,
                                             const StatusQuery& query) const {
  std::lock_guard lock(mu_);
  auto it = builds_.find(build_id);
  if (it == builds_.end() || it->second->template_id != template_id)
    return tl::unexpected(
        not_found("no build " + build_id + " of template \"" + template_id + "\""));
  const Build& b = *it->second;
  static const char* kStates[] = {"waiting", "building", "ready", "error"};
  StatusView v;
  v.template_id = template_id;
  v.build_id = build_id;
  v.status = kStates[static_cast<int>(b.state)];
  std::size_t seen = 0;
  for (const auto& l : b.lines) {
    if (l.level < query.min_level) continue;
    if (seen++ < query.offset) continue;
    if (v.lines.size() >= query.limit) break;
    v.lines.push_back(l);
  }
  if (b.state == Build::State::kError) {
    v.reason = b.reason;
    v.reason_step = b.reason_step;
    auto from = b.lines.size() > kReasonLines ? b.lines.end() - kReasonLines : b.lines.begin();
    v.reason_lines.assign(from, b.lines.end());
  }
  return v;
}

}  // namespace pvs::service::e2b
