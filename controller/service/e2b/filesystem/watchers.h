// envd's polled watch on one sandbox (CreateWatcher, GetWatcherEvents, RemoveWatcher: what the
// Python SDK's sync `files.watch_dir` and its WatchHandle call; docs/e2b.md "Watching a
// directory"). Each watcher is a DirWatch whose events are held here, by watcher id, until
// taken. A SandboxSession owns one table: its watchers end with the session.
//
// Bounds: at most `max_watchers` per sandbox (ResourceExhausted beyond), at most `max_events` held
// per watcher (later events are dropped until some are taken, as a slow stream reader's are), and
// each watcher runs at most its WatchOptions::timeout. What a watcher holds besides (the
// owner's stream slot) is let go when its watch ends.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "e2b/filesystem/dir_watch.h"
#include "e2b/filesystem/fs_ops.h"

namespace pvs::service::e2b {

struct WatcherLimits {
  std::size_t max_watchers = 8;
  std::size_t max_events = 10000;
};

class Watchers {
 public:
  explicit Watchers(std::shared_ptr<pvs::Sandbox> sandbox, WatcherLimits limits = {})
      : sandbox_(std::move(sandbox)), limits_(limits) {}
  ~Watchers();  // stop_all()
  Watchers(const Watchers&) = delete;
  Watchers& operator=(const Watchers&) = delete;

  // Starts a watch and answers its new id once every watch is in place, or the error the
  // watch ended with (NotFound, InvalidArgument, ...), or Unavailable when it is not in place
  // within `wait` (the watch is then stopped). `hold` lives while the watch runs.
  FsResult<std::string> create(const WatchOptions& options, std::chrono::milliseconds wait,
                               std::shared_ptr<void> hold = nullptr);
  // The events since the last call, oldest first. NotFound for an unknown id; once the watch
  // has ended and its events are taken: the error it ended with, or FailedPrecondition.
  FsResult<std::vector<WatchEvent>> take(const std::string& id);
  // Stops the watch and forgets it; NotFound for an unknown id.
  FsResult<bool> remove(const std::string& id);
  void stop_all();
  std::size_t size() const;

 private:
  class Buffer;
  struct Watcher {
    std::shared_ptr<Buffer> buffer;
    std::unique_ptr<DirWatch> watch;
    std::string path;
  };
  std::shared_ptr<pvs::Sandbox> sandbox_;
  const WatcherLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, Watcher> watchers_;
};

}  // namespace pvs::service::e2b
