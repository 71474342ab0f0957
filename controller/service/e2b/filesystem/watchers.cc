#include "e2b/filesystem/watchers.h"

#include <condition_variable>

#include "http/auth.h"

namespace pvs::service::e2b {
namespace {

ConnectError too_many(std::size_t max) {
  return {ConnectCode::kResourceExhausted,
          "this sandbox has " + std::to_string(max) +
              " watchers already: RemoveWatcher (WatchHandle.stop) one"};
}

}  // namespace

// One watcher's news, held until taken: the DirWatch reports into it from its thread.
class Watchers::Buffer final : public WatchSink {
 public:
  Buffer(std::size_t max_events, std::shared_ptr<void> hold)
      : max_events_(max_events), hold_(std::move(hold)) {}

  void armed() override {
    std::lock_guard lock(mu_);
    armed_ = true;
    cv_.notify_all();
  }
  void event(WatchEventType type, std::string name) override {
    std::lock_guard lock(mu_);
    if (events_.size() < max_events_) events_.push_back({type, std::move(name)});
  }
  void ended(std::optional<ConnectError> error) override {
    std::shared_ptr<void> let_go;
    {
      std::lock_guard lock(mu_);
      ended_ = true;
      error_ = std::move(error);
      let_go = std::move(hold_);
      cv_.notify_all();
    }
  }

  // True once armed; false when it ended first or `wait` passed.
  bool wait_armed(std::chrono::milliseconds wait) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return armed_ || ended_; });
    return armed_;
  }
  std::optional<ConnectError> error() const {
    std::lock_guard lock(mu_);
    return error_;
  }
  FsResult<std::vector<WatchEvent>> take(const std::string& path) {
    std::lock_guard lock(mu_);
    if (events_.empty() && ended_) {
      if (error_) return {std::nullopt, error_};
      return {std::nullopt, ConnectError{ConnectCode::kFailedPrecondition,
                                         "the watch of '" + path +
                                             "' has ended (the directory was removed or moved, "
                                             "the sandbox paused, or its time was up)"}};
    }
    return {std::exchange(events_, {}), std::nullopt};
  }

 private:
  const std::size_t max_events_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool ended_ = false;
  std::optional<ConnectError> error_;
  std::vector<WatchEvent> events_;
  std::shared_ptr<void> hold_;
};

Watchers::~Watchers() {
  stop_all();
}

FsResult<std::string> Watchers::create(const WatchOptions& options, std::chrono::milliseconds wait,
                                       std::shared_ptr<void> hold) {
  {
    std::lock_guard lock(mu_);
    if (watchers_.size() >= limits_.max_watchers)
      return {std::nullopt, too_many(limits_.max_watchers)};
  }
  auto buffer = std::make_shared<Buffer>(limits_.max_events, std::move(hold));
  auto watch = DirWatch::start(sandbox_, options, buffer);
  if (!buffer->wait_armed(wait)) {
    watch->stop();
    auto error = buffer->error();
    if (!error)
      error = ConnectError{ConnectCode::kUnavailable,
                           "the watch of '" + options.path + "' was not in place in time"};
    return {std::nullopt, error};
  }
  std::string id = generate_token("w");
  std::lock_guard lock(mu_);
  if (watchers_.size() >= limits_.max_watchers)  // others came meanwhile
    return {std::nullopt, too_many(limits_.max_watchers)};
  watchers_.emplace(id, Watcher{std::move(buffer), std::move(watch), options.path});
  return {id, std::nullopt};
}

FsResult<std::vector<WatchEvent>> Watchers::take(const std::string& id) {
  std::shared_ptr<Buffer> buffer;
  std::string path;
  {
    std::lock_guard lock(mu_);
    auto it = watchers_.find(id);
    if (it == watchers_.end())
      return {std::nullopt, ConnectError{ConnectCode::kNotFound, "watcher not found"}};
    buffer = it->second.buffer;
    path = it->second.path;
  }
  return buffer->take(path);
}

FsResult<bool> Watchers::remove(const std::string& id) {
  std::unique_ptr<DirWatch> watch;
  {
    std::lock_guard lock(mu_);
    auto it = watchers_.find(id);
    if (it == watchers_.end())
      return {std::nullopt, ConnectError{ConnectCode::kNotFound, "watcher not found"}};
    watch = std::move(it->second.watch);
    watchers_.erase(it);
  }
  watch->stop();  // outside the lock: a side exec in the sandbox
  return {true, std::nullopt};
}

void Watchers::stop_all() {
  std::map<std::string, Watcher> all;
  {
    std::lock_guard lock(mu_);
    all.swap(watchers_);
  }
  for (auto& [id, w] : all) w.watch->stop();
}

std::size_t Watchers::size() const {
  std::lock_guard lock(mu_);
  return watchers_.size();
}

}  // namespace pvs::service::e2b
