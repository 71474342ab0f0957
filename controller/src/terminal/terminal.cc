// Terminal: a PtyChannel whose output feeds a TerminalScreen and the watchers; input as text
// and named keys; waits on the screen.
#include "pvesandbox/terminal.h"

#include <algorithm>

#include "pvesandbox/manager.h"
#include "pvesandbox/ssh_session.h"

namespace pvs {

using Clock = std::chrono::steady_clock;

std::string_view to_string(WaitOutcome outcome) {
  switch (outcome) {
    case WaitOutcome::kMatched: return "matched";
    case WaitOutcome::kQuiet: return "quiet";
    case WaitOutcome::kExited: return "exited";
    case WaitOutcome::kTimeout: return "timeout";
  }
  return "timeout";
}

// ---- TerminalWatcher ----------------------------------------------------------------------

std::string TerminalWatcher::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout,
               [&] { return !buffer_.empty() || dropped_ || cancelled_ || exit_.has_value(); });
  std::string out;
  out.swap(buffer_);
  return out;
}

bool TerminalWatcher::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

std::optional<PtyExit> TerminalWatcher::ended() const {
  std::lock_guard lock(mu_);
  return buffer_.empty() ? exit_ : std::nullopt;
}

void TerminalWatcher::cancel() {
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

bool TerminalWatcher::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

void TerminalWatcher::push(std::string_view bytes) {
  {
    std::lock_guard lock(mu_);
    if (dropped_ || cancelled_) return;
    if (buffer_.size() + bytes.size() > max_) {
      dropped_ = true;  // too slow: it goes, the terminal does not wait
      buffer_.clear();
    } else {
      buffer_.append(bytes);
    }
  }
  cv_.notify_all();
}

void TerminalWatcher::finish(const PtyExit& exit) {
  {
    std::lock_guard lock(mu_);
    exit_ = exit;
  }
  cv_.notify_all();
}

// ---- Terminal::Core -----------------------------------------------------------------------

struct Terminal::Core {
  Core(const TerminalOptions& o) : screen(o.cols, o.rows, o.scrollback_lines) {}

  mutable std::mutex mu;
  mutable std::condition_variable cv;
  TerminalScreen screen;         // GUARDED_BY(mu)
  std::uint64_t generation = 0;  // GUARDED_BY(mu): bumped by every output
  Clock::time_point last_output = Clock::now();
  Clock::time_point last_activity = Clock::now();
  std::uint64_t input_bytes = 0;
  std::optional<PtyExit> exit;
  std::vector<std::shared_ptr<TerminalWatcher>> watchers;
  bool answer_queries = true;
  PtyChannel* pty = nullptr;  // null until open() returns and after ~Terminal
  std::string early_replies;  // answers produced before pty was set

  // On the SSH I/O thread.
  void on_output(std::string_view bytes) {
    {
      std::lock_guard lock(mu);
      screen.feed(bytes);
      ++generation;
      last_output = last_activity = Clock::now();
      std::string replies = screen.take_replies();
      if (answer_queries && !replies.empty()) {
        if (pty != nullptr) {
          (void)pty->write(replies);
        } else {
          early_replies += replies;
        }
      }
      watchers.erase(std::remove_if(watchers.begin(), watchers.end(),
                                    [](const auto& w) { return w->cancelled() || w->dropped(); }),
                     watchers.end());
      for (auto& w : watchers) w->push(bytes);
    }
    cv.notify_all();
  }

  void on_exit(const PtyExit& e) {
    std::vector<std::shared_ptr<TerminalWatcher>> ws;
    {
      std::lock_guard lock(mu);
      exit = e;
      ws.swap(watchers);
    }
    for (auto& w : ws) w->finish(e);
    cv.notify_all();
  }
};

// ---- Terminal -----------------------------------------------------------------------------

Terminal::Terminal(std::shared_ptr<Core> core, std::unique_ptr<PtyChannel> pty)
    : core_(std::move(core)), pty_(std::move(pty)) {
  std::lock_guard lock(core_->mu);
  core_->pty = pty_.get();
  if (!core_->early_replies.empty()) (void)pty_->write(core_->early_replies);
  core_->early_replies.clear();
}

Terminal::~Terminal() {
  close();
  std::lock_guard lock(core_->mu);
  core_->pty = nullptr;
}

Result<std::shared_ptr<Terminal>> Terminal::open(const Opener& opener, TerminalOptions options) {
  if (options.cols < 1 || options.cols > 1000 || options.rows < 1 || options.rows > 1000) {
    return fail(ErrorCode::kInvalidArgument, "cols and rows must be 1..1000");
  }
  auto core = std::make_shared<Core>(options);
  PtyOptions po;
  po.command = std::move(options.command);
  po.cols = options.cols;
  po.rows = options.rows;
  po.env = std::move(options.env);
  po.cwd = std::move(options.cwd);
  po.max_pending_input = options.max_pending_input;
  po.on_output = [core](std::string_view bytes) { core->on_output(bytes); };
  po.on_exit = [core](const PtyExit& e) { core->on_exit(e); };
  auto pty = opener(std::move(po));
  if (!pty) return tl::unexpected<Error>(pty.error());
  return std::shared_ptr<Terminal>(new Terminal(std::move(core), std::move(*pty)));
}

Result<std::shared_ptr<Terminal>> Terminal::open(Sandbox& sandbox, TerminalOptions options) {
  return open([&sandbox](PtyOptions o) { return sandbox.open_pty(std::move(o)); },
              std::move(options));
}

Result<std::shared_ptr<Terminal>> Terminal::open(SshSession& ssh, TerminalOptions options) {
  return open([&ssh](PtyOptions o) { return ssh.open_pty(std::move(o)); }, std::move(options));
}

Status Terminal::send(const std::vector<InputItem>& items) {
  std::string bytes;
  {
    std::lock_guard lock(core_->mu);
    for (const auto& item : items) {
      if (item.kind == InputItem::Kind::kText) {
        bytes += item.value;
        continue;
      }
      auto k = core_->screen.key(item.value);
      if (!k) return tl::unexpected<Error>(k.error());
      bytes += *k;
    }
  }
  return write(bytes);
}

Status Terminal::write(std::string_view raw) {
  if (raw.empty()) return {};
  if (auto st = pty_->write(raw); !st) return st;
  std::lock_guard lock(core_->mu);
  core_->input_bytes += raw.size();
  core_->last_activity = Clock::now();
  return {};
}

Status Terminal::resize(int cols, int rows) {
  if (auto st = pty_->resize(cols, rows); !st) return st;
  {
    std::lock_guard lock(core_->mu);
    core_->screen.resize(cols, rows);
    ++core_->generation;
    core_->last_activity = Clock::now();
  }
  core_->cv.notify_all();
  return {};
}

ScreenSnapshot Terminal::screen(std::size_t scrollback) const {
  std::lock_guard lock(core_->mu);
  return core_->screen.snapshot(scrollback);
}

WaitResult Terminal::wait(const WaitCondition& condition) const {
  const auto start = Clock::now();
  const auto deadline = start + condition.timeout;
  WaitResult r;
  std::unique_lock lock(core_->mu);
  std::uint64_t checked = ~std::uint64_t{0};
  for (;;) {
    auto now = Clock::now();
    r.waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
    if (condition.pattern && checked != core_->generation) {
      checked = core_->generation;
      std::string text = core_->screen.snapshot().text();
      std::smatch m;
      if (std::regex_search(text, m, *condition.pattern)) {
        r.outcome = WaitOutcome::kMatched;
        r.match = m.str(0);
        return r;
      }
    }
    if (core_->exit) {
      r.outcome = WaitOutcome::kExited;
      return r;
    }
    auto wake = deadline;
    if (condition.quiet.count() > 0) {
      auto quiet_at = std::max(core_->last_output, start) + condition.quiet;
      if (now >= quiet_at) {
        r.outcome = WaitOutcome::kQuiet;
        return r;
      }
      wake = std::min(wake, quiet_at);
    }
    if (now >= deadline) {
      r.outcome = WaitOutcome::kTimeout;
      return r;
    }
    core_->cv.wait_until(lock, wake);
  }
}

std::shared_ptr<TerminalWatcher> Terminal::watch(std::size_t max_buffered) {
  auto w = std::make_shared<TerminalWatcher>(max_buffered);
  std::lock_guard lock(core_->mu);
  if (core_->exit) {
    w->finish(*core_->exit);
  } else {
    core_->watchers.push_back(w);
  }
  return w;
}

void Terminal::set_answer_queries(bool on) {
  std::lock_guard lock(core_->mu);
  core_->answer_queries = on;
}

TerminalState Terminal::state() const {
  std::lock_guard lock(core_->mu);
  TerminalState s;
  s.running = !core_->exit.has_value();
  s.exit = core_->exit;
  s.cols = core_->screen.cols();
  s.rows = core_->screen.rows();
  s.last_activity = core_->last_activity;
  s.output_bytes = core_->screen.output_bytes();
  s.input_bytes = core_->input_bytes;
  s.watchers = static_cast<int>(
      std::count_if(core_->watchers.begin(), core_->watchers.end(),
                    [](const auto& w) { return !w->cancelled() && !w->dropped(); }));
  return s;
}

void Terminal::close() {
  pty_->close();
}

}  // namespace pvs
