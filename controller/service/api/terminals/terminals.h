// The service's terminals: which sandbox and token each belongs to, the limits per sandbox and
// per token, and the idle reaper. The terminals themselves are pvs::Terminal (terminal.h).
//
//   TerminalRegistry reg({.per_sandbox = 8, .per_token = 32, .idle = 30min});
//   auto entry = reg.open("sb-...", "alice", "vi", [&] { return Terminal::open(*sandbox, o); });
//   reg.find("sb-...", (*entry)->id);   // null once closed, reaped or of another sandbox
//   reg.close_sandbox("sb-...");        // the sandbox is being destroyed
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/api_error.h"
#include "policy/typed_line.h"
#include "pvesandbox/terminal.h"

namespace pvs::service {

struct TerminalEntry {
  std::string id;  // "t-" + 12 hex digits
  std::string sandbox;
  std::string owner;            // the token that opened it
  std::string command;          // "" for the login shell
  std::int64_t created_at = 0;  // unix seconds
  std::shared_ptr<Terminal> terminal;
  std::atomic<int> readers{0};      // WebSockets attached (an attached terminal is never idle)
  std::atomic<int> interactive{0};  // of which may type
  // Input is typed one call at a time (REST, MCP and WebSockets alike), judged a line at a time.
  std::mutex input_mu;
  TypedLine typed;  // GUARDED_BY(input_mu)
};

class TerminalRegistry {
 public:
  struct Limits {
    int per_sandbox = 8;
    int per_token = 32;
    std::chrono::seconds idle{1800};
    // An ended terminal stays listed (with its exit status) this long at most.
    std::chrono::seconds ended_linger{300};
  };
  explicit TerminalRegistry(Limits limits);
  ~TerminalRegistry();  // closes every terminal

  // Runs `opener` unless a limit is reached (429 naming it); the error of `opener` as ApiError.
  using Opener = std::function<Result<std::shared_ptr<Terminal>>()>;
  ApiResult<std::shared_ptr<TerminalEntry>> open(const std::string& sandbox,
                                                 const std::string& owner, std::string command,
                                                 const Opener& opener);
  std::shared_ptr<TerminalEntry> find(const std::string& sandbox, const std::string& id) const;
  std::vector<std::shared_ptr<TerminalEntry>> list(const std::string& sandbox) const;
  // Closes (hangs up) and forgets it; false if unknown.
  bool close(const std::string& sandbox, const std::string& id);
  void close_sandbox(const std::string& sandbox);
  // One pass of the reaper (the background thread calls it every second).
  void sweep();
  std::size_t size() const;

 private:
  int running_locked(const std::function<bool(const TerminalEntry&)>& pred) const;

  Limits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<TerminalEntry>> entries_;  // GUARDED_BY(mu_)
  std::map<std::string, int> pending_sandbox_, pending_token_;     // GUARDED_BY(mu_): opening
  std::map<std::string, std::chrono::steady_clock::time_point> ended_at_;  // GUARDED_BY(mu_)
  bool stop_ = false;
  std::thread reaper_;
};

// JSON of a terminal and of a screen, as the API returns them.
std::string terminal_json(const TerminalEntry& entry);
std::string screen_json(const ScreenSnapshot& screen);

}  // namespace pvs::service
