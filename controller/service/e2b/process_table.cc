// ProcessTable: starting processes (exec or pty) and finding them again.
#include "e2b/processes.h"

namespace pvs::service::e2b {
namespace {

constexpr auto kStartWait = std::chrono::seconds(30);

std::vector<std::pair<std::string, std::string>> merged_env(const ProcessConfig& c,
                                                            const StartOptions& o) {
  std::map<std::string, std::string> env = o.default_env;
  for (const auto& [k, v] : c.envs) env[k] = v;
  return {env.begin(), env.end()};
}

std::chrono::milliseconds effective_timeout(const StartOptions& o) {
  if (o.timeout.count() <= 0 || o.timeout > o.max_timeout) return o.max_timeout;
  return o.timeout;
}

}  // namespace

ProcessTable::~ProcessTable() {
  shutdown();
}

void ProcessTable::reap_locked() {
  for (auto it = by_pid_.begin(); it != by_pid_.end();)
    it = it->second->running() ? std::next(it) : by_pid_.erase(it);
}

Result<std::shared_ptr<Process>> ProcessTable::start(const StartRequest& request,
                                                     const StartOptions& options,
                                                     std::shared_ptr<EventQueue> events) {
  bool pty = request.pty.has_value();
  bool stdin_open = request.stdin_open.value_or(false) && !pty;
  auto proc = std::make_shared<Process>(request.process, request.tag, pty, stdin_open,
                                        limits_.max_subscribers);
  proc->add_subscriber(std::move(events));
  {
    std::lock_guard lock(mu_);
    std::erase_if(live_, [](const std::weak_ptr<Process>& w) {
      auto p = w.lock();
      return !p || !p->running();
    });
    reap_locked();
    if (std::size_t n = live_.size(); n >= limits_.max_processes)
      return fail(ErrorCode::kTooLarge,
                  "this sandbox runs " + std::to_string(n) + " processes already (at most " +
                      std::to_string(limits_.max_processes) + " per sandbox, docs/e2b.md)");
    live_.push_back(proc);
  }
  std::string script = process_script(request.process, stdin_open,
                                      options.login_snapshot ? login_key(options.default_env) : "");
  auto env = merged_env(request.process, options);
  std::string cwd = request.process.cwd.value_or("");
  if (pty) {
    PtyOptions o;
    o.command = std::move(script);
    o.cols = static_cast<int>(request.pty->cols);
    o.rows = static_cast<int>(request.pty->rows);
    o.env = std::move(env);
    o.cwd = std::move(cwd);
    std::weak_ptr<Process> weak = proc;
    o.on_output = [weak](std::string_view b) {
      if (auto p = weak.lock()) p->on_output(Stream::kPty, b);
    };
    o.on_exit = [weak](const PtyExit& e) {
      auto p = weak.lock();
      if (!p) return;
      if (!e.error.empty()) return p->on_error(e.error);
      p->on_end(e.signal.empty() ? end_for_exit(e.exit_code) : end_for_signal(e.signal));
    };
    auto channel = sandbox_->open_pty(std::move(o));
    if (!channel) return tl::unexpected(channel.error());
    proc->set_pty(std::move(*channel));
  } else {
    ExecOptions o;
    o.env = std::move(env);
    o.cwd = std::move(cwd);
    o.timeout = effective_timeout(options);
    o.max_output = 4096;  // the output streams to the subscribers; the result keeps a little
    o.on_output = [proc](ExecStream s, std::string_view b) {
      proc->on_output(s == ExecStream::kStdout ? Stream::kStdout : Stream::kStderr, b);
    };
    // The command's end comes on the SSH session's I/O thread: no thread per command.
    execs_->begin();
    sandbox_->exec_then(std::move(script), std::move(o),
                        [proc, execs = execs_](Result<ExecResult> r) {
                          if (!r)
                            proc->on_error(r.error().message);
                          else if (!r->exit_signal.empty())
                            proc->on_end(end_for_signal(r->exit_signal));
                          else
                            proc->on_end(end_for_exit(r->exit_code));
                          execs->end();
                        });
  }
  if (!proc->wait_started(kStartWait))
    return fail(ErrorCode::kTimeout, "the command did not start within 30 s");
  if (auto why = proc->start_error()) return fail(ErrorCode::kUnavailable, *why);
  std::lock_guard lock(mu_);
  by_pid_[proc->pid()] = proc;
  return proc;
}

std::shared_ptr<Process> ProcessTable::find(const Selector& selector) const {
  std::lock_guard lock(mu_);
  for (const auto& [pid, p] : by_pid_) {
    if (!p->running()) continue;
    if (selector.pid && *selector.pid == pid) return p;
    if (selector.tag && p->tag() == selector.tag) return p;
  }
  return nullptr;
}

// A process counts until it ended or was let go (a pty that never opened).
std::size_t ProcessTable::live_locked() const {
  std::size_t n = 0;
  for (const auto& w : live_)
    if (auto p = w.lock(); p && p->running()) ++n;
  return n;
}

std::size_t ProcessTable::live() const {
  std::lock_guard lock(mu_);
  return live_locked();
}

std::vector<std::shared_ptr<Process>> ProcessTable::running() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Process>> out;
  for (const auto& [pid, p] : by_pid_)
    if (p->running()) out.push_back(p);
  return out;
}

void ProcessTable::shutdown() {
  std::vector<std::shared_ptr<Process>> alive;
  {
    std::lock_guard lock(mu_);
    for (const auto& [pid, p] : by_pid_)
      if (p->running()) alive.push_back(p);
    by_pid_.clear();
  }
  // Waiting for every command's end would hold the caller (a kill, a destroy) for as long as a
  // background command (a server, a sleep) runs: each group is killed first; where the sandbox
  // is already gone, its SSH session is too and every exec is answered anyway.
  for (const auto& p : alive) (void)p->signal(*sandbox_, 9);
  execs_->wait_idle();
}

void ProcessTable::Execs::begin() {
  std::lock_guard lock(mu);
  ++running;
}

void ProcessTable::Execs::end() {
  std::lock_guard lock(mu);
  if (--running == 0) idle.notify_all();
}

void ProcessTable::Execs::wait_idle() {
  std::unique_lock lock(mu);
  idle.wait(lock, [&] { return running == 0; });
}

}  // namespace pvs::service::e2b
