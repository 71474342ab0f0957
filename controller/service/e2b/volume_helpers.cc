#include "e2b/volume_helpers.h"

#include <optional>

#include "http/api_error.h"
#include "pvesandbox/common/log.h"

namespace pvs::service::e2b {

namespace {

using Clock = std::chrono::steady_clock;

ApiError held(const std::string& volume, const std::string& why) {
  return ApiError{409, "conflict", "volume " + volume + " " + why};
}

}  // namespace

VolumeHelpers::VolumeHelpers(Deps deps) : d_(std::move(deps)), reaper_([this] { reap_loop(); }) {}

VolumeHelpers::~VolumeHelpers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  reaper_.join();
}

VolumeHelpers::Place VolumeHelpers::open(const Principal& who, const std::string& volume_id) {
  std::optional<VolumeInfo> v;
  for (auto& info : d_.volumes(who))
    if (info.id == volume_id && info.owner == who.name) v = info;
  if (!v) throw not_found("no volume " + volume_id.substr(0, 64));
  std::unique_lock lock(mu_);
  auto h = helpers_.find(volume_id);
  if (!v->mounted_by.empty()) {
    if (h != helpers_.end() && h->second.sandbox && h->second.sandbox->id() == v->mounted_by) {
      h->second.used = Clock::now();
      return {h->second.sandbox, kVolumeHelperPath};
    }
    lock.unlock();
    std::shared_ptr<Sandbox> sb;
    try {
      sb = d_.sandbox_for(who, v->mounted_by);
    } catch (const ApiError&) {
      throw held(volume_id, "is being mounted by a create; try again");
    }
    auto info = sb->info();
    if (info.phase != SandboxMetadata::Phase::kReady)
      throw held(volume_id, "is mounted by " + info.id + ", which is not running (resume it)");
    for (const auto& m : info.volumes)
      if (m.volume == volume_id) return {sb, m.path};
    throw held(volume_id, "is being mounted; try again");
  }
  if (h != helpers_.end() && h->second.sandbox) helpers_.erase(h);  // gone behind our back
  if (auto [it, mine] = helpers_.try_emplace(volume_id); !mine) {   // being made: wait for it
    cv_.wait(lock, [&] {
      auto w = helpers_.find(volume_id);
      return stop_ || w == helpers_.end() || w->second.sandbox;
    });
    auto w = helpers_.find(volume_id);
    if (w == helpers_.end() || !w->second.sandbox)
      throw unavailable("volume " + volume_id + ": its helper sandbox could not be made");
    w->second.used = Clock::now();
    return {w->second.sandbox, kVolumeHelperPath};
  }
  lock.unlock();
  std::shared_ptr<Sandbox> sb;
  try {
    sb = make_helper(who, volume_id);
  } catch (...) {
    std::lock_guard again(mu_);
    helpers_.erase(volume_id);
    cv_.notify_all();
    throw;
  }
  std::lock_guard again(mu_);
  helpers_[volume_id] = {sb, Clock::now()};
  cv_.notify_all();
  return {sb, kVolumeHelperPath};
}

std::shared_ptr<Sandbox> VolumeHelpers::make_helper(const Principal& who,
                                                    const std::string& volume_id) {
  CreateRequest r;
  r.ttl_seconds = 600;  // a controller that stops leaves it for its TTL
  r.memory_mb = 256;
  r.labels = {{kVolumeHelperLabel, volume_id}};
  r.volumes = {{volume_id, kVolumeHelperPath, false}};
  auto sb = d_.create(who, r);
  log::info("volume " + volume_id + ": helper sandbox " + sb->id() + " for its content plane");
  return sb;
}

void VolumeHelpers::release(const std::vector<std::string>& volume_ids) {
  std::vector<std::shared_ptr<Sandbox>> gone;
  {
    std::lock_guard lock(mu_);
    for (const auto& id : volume_ids) {
      auto h = helpers_.find(id);
      if (h == helpers_.end() || !h->second.sandbox) continue;  // none, or being made
      gone.push_back(std::move(h->second.sandbox));
      helpers_.erase(h);
    }
  }
  for (auto& sb : gone) {
    try {
      d_.destroy(*sb);
    } catch (const ApiError& e) {
      log::warn("volume helper " + sb->id() + " not destroyed: " + e.message);
    }
  }
}

void VolumeHelpers::reap_loop() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::min<Clock::duration>(d_.idle / 4, std::chrono::seconds(5)));
    std::vector<std::string> idle;
    for (auto& [id, h] : helpers_)
      if (h.sandbox && Clock::now() - h.used > d_.idle) idle.push_back(id);
    if (idle.empty() || stop_) continue;
    lock.unlock();
    release(idle);
    lock.lock();
  }
}

}  // namespace pvs::service::e2b
