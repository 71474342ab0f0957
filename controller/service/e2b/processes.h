// The processes the E2B data plane starts in a sandbox (process.Process/*), run over the
// sandbox's SSH session: an exec, or a pty when Start asks for one. No daemon in the sandbox.
//
// Each process announces its pid first (a marker on stderr, or on the pty, that is taken out
// of the output): the login shell's pid, which is also its process group (sshd makes it a
// session leader), so SendSignal signals the whole group. A process started with `stdin: true`
// (and no pty) reads a FIFO in /tmp that a holder of its shell keeps open; SendInput writes to
// it with a side exec, CloseStdin ends the holder (a line on the FIFO's `.close` FIFO), and the
// command sees EOF.
//
// Events (the JSON messages of a Start/Connect stream) go to every subscriber's queue; a queue
// over kMaxQueued bytes drops output (never blocks the SSH thread). A subscriber leaves when its
// stream returns (Unsubscribe), so a reader that went away holds no queue; a process has at
// most ProcessLimits::max_subscribers readers and a sandbox at most max_processes running
// processes (#46 finding 2; docs/e2b.md, "Limits").

#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "e2b/envd_wire.h"
#include "pvesandbox/manager.h"

namespace pvs::service::e2b {

// One subscriber's events, in order; the last is the end event (or an error).
class EventQueue {
 public:
  static constexpr std::size_t kMaxQueued = 8 << 20;
  void push(std::string message, bool is_data);
  void finish(std::optional<ConnectError> error);
  // The next message, waiting up to `timeout`; nullopt on timeout or once finished and empty.
  std::optional<std::string> next(std::chrono::milliseconds timeout);
  bool finished() const;
  std::optional<ConnectError> error() const;
  bool dropped() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> items_;
  std::size_t bytes_ = 0;
  bool finished_ = false;
  bool dropped_ = false;
  std::optional<ConnectError> error_;
};

class Process;

// The caps of one sandbox's data plane; beyond them a Start or a Connect fails with kTooLarge
// (Connect's resource_exhausted).
struct ProcessLimits {
  std::size_t max_processes = 32;   // running processes per sandbox (session)
  std::size_t max_subscribers = 8;  // readers per process: its Start stream and its Connects
};

// Leaves `process`'s readers when the stream that read `events` returns.
struct Unsubscribe {
  std::shared_ptr<Process> process;
  std::shared_ptr<EventQueue> events;
  Unsubscribe(std::shared_ptr<Process> p, std::shared_ptr<EventQueue> q)
      : process(std::move(p)), events(std::move(q)) {}
  Unsubscribe(const Unsubscribe&) = delete;
  Unsubscribe& operator=(const Unsubscribe&) = delete;
  ~Unsubscribe();
};

// What a Start needs besides the request.
struct StartOptions {
  std::map<std::string, std::string> default_env;  // the sandbox's envVars
  std::chrono::milliseconds timeout{0};            // 0: max
  std::chrono::milliseconds max_timeout{std::chrono::hours(1)};
  bool login_snapshot = true;  // see process_script
};

// The processes of one sandbox.
class ProcessTable : public std::enable_shared_from_this<ProcessTable> {
 public:
  explicit ProcessTable(std::shared_ptr<pvs::Sandbox> sandbox, ProcessLimits limits = {})
      : sandbox_(std::move(sandbox)), limits_(limits) {}
  ~ProcessTable();
  ProcessTable(const ProcessTable&) = delete;
  ProcessTable& operator=(const ProcessTable&) = delete;

  // Starts it and returns once its pid is known (or it failed first); `events` receives the
  // start event and everything after it. kTooLarge when the sandbox runs max_processes.
  Result<std::shared_ptr<Process>> start(const StartRequest& request, const StartOptions& options,
                                         std::shared_ptr<EventQueue> events);
  // A running process by pid or tag; nullptr if none.
  std::shared_ptr<Process> find(const Selector& selector) const;
  std::vector<std::shared_ptr<Process>> running() const;
  // Processes started and not ended (also those still starting): what max_processes counts.
  std::size_t live() const;
  // Kills every process (the sandbox goes away) and waits until each exec has ended.
  void shutdown();

  pvs::Sandbox& sandbox() { return *sandbox_; }

 private:
  void reap_locked();
  std::size_t live_locked() const;
  std::shared_ptr<pvs::Sandbox> sandbox_;
  ProcessLimits limits_;
  mutable std::mutex mu_;
  std::vector<std::weak_ptr<Process>> live_;  // every process started, pruned as they end
  std::map<std::uint32_t, std::shared_ptr<Process>> by_pid_;
  // The execs started and not yet answered (their callbacks hold this).
  struct Execs {
    std::mutex mu;
    std::condition_variable idle;
    int running = 0;  // GUARDED_BY(mu)
    void begin();
    void end();
    void wait_idle();
  };
  std::shared_ptr<Execs> execs_ = std::make_shared<Execs>();
};

class Process : public std::enable_shared_from_this<Process> {
 public:
  Process(ProcessConfig config, std::optional<std::string> tag, bool pty, bool stdin_open,
          std::size_t max_subscribers = ProcessLimits{}.max_subscribers);

  std::uint32_t pid() const;
  const ProcessConfig& config() const { return config_; }
  const std::optional<std::string>& tag() const { return tag_; }
  bool running() const;
  // How it ended, once it did.
  std::optional<EndInfo> end_info() const;

  // A new reader of the events from now on (the start event first; the end event at once if
  // it ended); kTooLarge when it has max_subscribers readers. The reader stays until
  // unsubscribe (Unsubscribe) or the end.
  Result<std::shared_ptr<EventQueue>> subscribe();
  void unsubscribe(const std::shared_ptr<EventQueue>& events);
  // Readers now.
  std::size_t subscribers() const;
  // Stdin or pty input; kInvalidArgument when the process has neither open.
  Status send_input(pvs::Sandbox& sandbox, std::string_view bytes, bool pty);
  Status close_stdin(pvs::Sandbox& sandbox);
  // 9 or 15 to the process group.
  Status signal(pvs::Sandbox& sandbox, int signal);
  Status resize(std::uint32_t cols, std::uint32_t rows);

  // Used by ProcessTable's runner.
  void add_subscriber(std::shared_ptr<EventQueue> q);
  void on_output(Stream stream, std::string_view bytes);
  void on_end(const EndInfo& end);
  void on_error(const std::string& message);
  // Waits until the pid marker arrived or the process ended; false on timeout.
  bool wait_started(std::chrono::milliseconds timeout);
  void set_pty(std::unique_ptr<PtyChannel> pty);
  std::optional<std::string> start_error() const;

 private:
  void broadcast(const std::string& message, bool is_data);
  void take_marker(Stream stream, std::string_view bytes);

  ProcessConfig config_;
  std::optional<std::string> tag_;
  bool pty_mode_;
  bool stdin_open_;
  bool stdin_closed_ = false;  // by CloseStdin: SendInput is refused from then on
  std::size_t max_subscribers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::uint32_t pid_ = 0;
  std::string marker_buffer_;  // output before the marker was complete
  std::string held_stdout_;    // stdout that overtook the marker
  bool ended_ = false;
  std::optional<std::string> start_error_;
  std::string end_message_;  // the end event, for late subscribers
  std::optional<EndInfo> end_;
  std::vector<std::shared_ptr<EventQueue>> subscribers_;
  std::unique_ptr<PtyChannel> pty_;
};

// The command line a process runs (exposed for tests): the marker, then the command; with
// stdin open, the FIFO wrapper around it.
//
// With a `login_key` (non-empty), a login shell `bash -l -c CMD` without per-command envs runs
// from a snapshot: the first such command's login shell writes its exported environment to
// $HOME/.cache/pve-sandbox/login-<key>[-b][-l] (-b, -l: ~/bin, ~/.local/bin exist, which
// Debian's ~/.profile puts on PATH), and later ones source that file instead of the profile
// files (in the shell sshd started when that is bash, else in an exec'ed `bash -c`), as long as
// none of /etc/profile, /etc/profile.d, /etc/bash.bashrc,
// ~/.bash_profile, ~/.bash_login, ~/.profile and ~/.bashrc is newer than it. What a profile
// does besides exporting (functions, aliases, output) is not replayed: docs/e2b.md.
std::string process_script(const ProcessConfig& config, bool stdin_open,
                           const std::string& login_key = {});
// The snapshot key of a sandbox's default environment (its envVars): the same environment,
// the same key.
std::string login_key(const std::map<std::string, std::string>& default_env);
// What a sandbox created without envVars would run at its first `bash -l -c`: a login shell
// that writes the snapshot (key login_key({})) and exits. A hot pool member runs it before it
// is ready (ManagerConfig::hot_pool_warmup), so that first command runs from the snapshot.
std::string login_warmup_command();
// The FIFO a stdin-open process reads, by pid.
std::string stdin_fifo(std::uint32_t pid);

}  // namespace pvs::service::e2b
