// envd's WatchDir on a sandbox: a directory watched by inotify inside the sandbox, its events
// streamed as WatchDirResponse messages (docs/e2b.md "Watching a directory").
//
// The watcher is a small python3 program (the kernel's inotify through ctypes: no package
// beyond python3, which Debian's standard templates have) run over the sandbox's SSH session
// like a command: it prints its pid, then "ready" once every watch is in place, then one line
// per event, "<c|w|r|n|m> <hex of the name>" (create, write, remove, rename, chmod, as fsnotify
// names them for envd), the name relative to the watched directory. The start event goes out
// at "ready"; an event queue too full for a slow reader drops events (as envd's channel does).
// stop() kills the watcher's process group; the exec's timeout and the session's watchdog end
// it otherwise.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "e2b/envd_wire.h"
#include "e2b/processes.h"

namespace pvs::service::e2b {

struct WatchOptions {
  std::string path;  // absolute, resolved
  bool recursive = false;
  std::chrono::milliseconds timeout{0};  // the call's; 0: none
};

// Where a watch's news go, from the watch's own thread: armed() once every watch is in place,
// then event() per filesystem event, and ended() last, with an error when the watcher could not
// start (NotFound: no such directory; InvalidArgument: not a directory; FailedPrecondition: no
// python3) and none when it ran and ended (stopped, its time up, the directory gone).
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  virtual void armed() = 0;
  virtual void event(WatchEventType type, std::string name) = 0;
  virtual void ended(std::optional<ConnectError> error) = 0;
};

class DirWatch {
 public:
  static std::unique_ptr<DirWatch> start(std::shared_ptr<pvs::Sandbox> sandbox,
                                         const WatchOptions& options,
                                         std::shared_ptr<WatchSink> sink);
  // The WatchDir stream's form: `events` gets the start event once the watch is in place, then
  // the filesystem events (each a WatchDirResponse), and finishes as ended() says.
  static std::unique_ptr<DirWatch> start(std::shared_ptr<pvs::Sandbox> sandbox,
                                         const WatchOptions& options,
                                         std::shared_ptr<EventQueue> events);
  ~DirWatch();  // stop()
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  void stop();

  // The remote program (exposed for tests).
  static std::string script(const WatchOptions& options);

 private:
  DirWatch(std::shared_ptr<pvs::Sandbox> sandbox, std::shared_ptr<WatchSink> sink)
      : sandbox_(std::move(sandbox)), sink_(std::move(sink)) {}
  void on_stdout(std::string_view bytes);
  void on_line(std::string_view line);
  void on_exit(const Result<ExecResult>& r);

  std::shared_ptr<pvs::Sandbox> sandbox_;
  std::shared_ptr<WatchSink> sink_;
  std::mutex mu_;
  std::string pending_;  // a line not yet complete
  std::uint32_t pid_ = 0;
  bool ready_ = false;
  std::string first_error_;  // the watcher's "error ..." line, before it was ready
  std::string path_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> finished_{false};  // the exec returned
  std::jthread runner_;
};

}  // namespace pvs::service::e2b
