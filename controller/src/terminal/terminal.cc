// Terminal: a PtyChannel whose output feeds a TerminalScreen and the watchers; input as text
// and named keys; waits on the screen.
#include "pvesandbox/terminal.h"

#include <algorithm>
#include <thread>

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

// Two sides: the SSH I/O thread appends output (in_mu: pending bytes, watchers, the exit) and
// never waits for the emulator; a feeder thread per terminal moves pending bytes into the
// screen (mu), where readers and waiters look. libvterm scrolls its whole buffer per line
// (about 6 us at 80x24), so a flood of output costs the feeder, never the SSH session.
struct Terminal::Core {
  static constexpr std::size_t kMaxPending = 32 << 20;  // beyond: the oldest bytes are dropped
  static constexpr std::size_t kFeedSlice = 16 << 10;

  explicit Core(const TerminalOptions& o) : screen(o.cols, o.rows, o.scrollback_lines) {}

  // Output side (in_mu).
  std::mutex in_mu;
  std::condition_variable in_cv;
  std::string pending;
  bool stop = false;
  std::optional<PtyExit> exit_in;  // the program ended (the screen may still be catching up)
  bool exit_fed = false;
  std::vector<std::shared_ptr<TerminalWatcher>> watchers;
  // What the program wrote before anyone watched, for the first watcher (a client that opens a
  // terminal and then attaches must not lose the program's first output); the last bytes.
  static constexpr std::size_t kMaxUnwatched = 1 << 20;
  std::string unwatched;
  bool watched = false;
  Clock::time_point last_output = Clock::now();
  Clock::time_point last_activity = Clock::now();
  std::uint64_t input_bytes = 0;

  // Screen side (mu).
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  TerminalScreen screen;
  std::uint64_t generation = 0;  // bumped by every fed slice and resize
  std::optional<PtyExit> exit;   // set once every byte before the end is on the screen
  bool answer_queries = true;
  PtyChannel* pty = nullptr;  // null until open() returns and after ~Terminal
  std::string early_replies;  // answers produced before pty was set

  std::thread feeder;

  // On the SSH I/O thread.
  void on_output(std::string_view bytes) {
    {
      std::lock_guard lock(in_mu);
      if (stop) return;
      pending.append(bytes);
      if (pending.size() > kMaxPending) pending.erase(0, pending.size() - kMaxPending);
      last_output = last_activity = Clock::now();
      watchers.erase(std::remove_if(watchers.begin(), watchers.end(),
                                    [](const auto& w) { return w->cancelled() || w->dropped(); }),
                     watchers.end());
      for (auto& w : watchers) w->push(bytes);
      if (!watched) {
        unwatched.append(bytes);
        if (unwatched.size() > kMaxUnwatched) unwatched.erase(0, unwatched.size() - kMaxUnwatched);
      }
    }
    in_cv.notify_one();
  }

  void on_exit(const PtyExit& e) {
    std::vector<std::shared_ptr<TerminalWatcher>> ws;
    {
      std::lock_guard lock(in_mu);
      exit_in = e;
      last_activity = Clock::now();
      ws.swap(watchers);
    }
    for (auto& w : ws) w->finish(e);
    in_cv.notify_one();
  }

  void feed_loop() {
    for (;;) {
      std::string batch;
      std::optional<PtyExit> ended;
      {
        std::unique_lock lock(in_mu);
        in_cv.wait(lock, [&] { return stop || !pending.empty() || (exit_in && !exit_fed); });
        if (stop) return;
        batch.swap(pending);
        if (batch.empty()) {
          exit_fed = true;
          ended = exit_in;
        }
      }
      for (std::size_t off = 0; off < batch.size(); off += kFeedSlice) {
        if (off > 0 && stopping()) return;
        std::lock_guard lock(mu);
        screen.feed(std::string_view(batch).substr(off, kFeedSlice));
        ++generation;
        std::string replies = screen.take_replies();
        if (answer_queries && !replies.empty()) {
          if (pty != nullptr) {
            (void)pty->write(replies);
          } else {
            early_replies += replies;
          }
        }
        cv.notify_all();
      }
      if (ended) {
        std::lock_guard lock(mu);
        exit = ended;
        cv.notify_all();
      }
    }
  }

  bool stopping() {
    std::lock_guard lock(in_mu);
    return stop;
  }

  void stop_feeder() {
    {
      std::lock_guard lock(in_mu);
      stop = true;
    }
    in_cv.notify_one();
    if (feeder.joinable()) feeder.join();
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
  core_->stop_feeder();
  std::lock_guard lock(core_->mu);
  core_->pty = nullptr;
}

Result<std::shared_ptr<Terminal>> Terminal::open(const Opener& opener, TerminalOptions options) {
  if (options.cols < 1 || options.cols > 1000 || options.rows < 1 || options.rows > 1000) {
    return fail(ErrorCode::kInvalidArgument, "cols and rows must be 1..1000");
  }
  auto core = std::make_shared<Core>(options);
  core->feeder = std::thread([c = core.get()] { c->feed_loop(); });
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
  if (!pty) {
    core->stop_feeder();
    return tl::unexpected<Error>(pty.error());
  }
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
  std::lock_guard lock(core_->in_mu);
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
  }
  core_->cv.notify_all();
  std::lock_guard lock(core_->in_mu);
  core_->last_activity = Clock::now();
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
      Clock::time_point last_output;
      {
        std::lock_guard in(core_->in_mu);  // order: mu, then in_mu (never the reverse)
        last_output = core_->last_output;
      }
      auto quiet_at = std::max(last_output, start) + condition.quiet;
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
  std::lock_guard lock(core_->in_mu);
  if (!core_->watched) {  // the first watcher: what came before anyone watched, then the rest
    core_->watched = true;
    if (!core_->unwatched.empty()) w->push(core_->unwatched);
    std::string().swap(core_->unwatched);
  }
  if (core_->exit_in) {
    w->finish(*core_->exit_in);
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
  TerminalState s;
  {
    std::lock_guard lock(core_->mu);
    s.cols = core_->screen.cols();
    s.rows = core_->screen.rows();
    s.output_bytes = core_->screen.output_bytes();
  }
  std::lock_guard lock(core_->in_mu);
  s.running = !core_->exit_in.has_value();
  s.exit = core_->exit_in;
  s.last_activity = core_->last_activity;
  s.output_bytes += core_->pending.size();
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
