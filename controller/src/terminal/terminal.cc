// Terminal: a PTY channel whose output feeds a Screen; waits are woken by every output chunk.
#include "pvesandbox/terminal.h"

#include <condition_variable>
#include <mutex>
#include <regex>

#include "pvesandbox/common/text.h"
#include "pvesandbox/ssh_pty.h"
#include "pvesandbox/ssh_session.h"
#include "screen.h"

namespace pvs {

using Clock = std::chrono::steady_clock;

struct Terminal::State {
  State(int rows, int cols, std::size_t scrollback) : screen(rows, cols, scrollback) {}

  mutable std::mutex mu;
  std::condition_variable cv;
  terminal::Screen screen;        // GUARDED_BY(mu)
  Clock::time_point last_output;  // GUARDED_BY(mu)
  bool exited = false;            // GUARDED_BY(mu)
  PtyExit exit;                   // GUARDED_BY(mu)
  std::string early_replies;      // GUARDED_BY(mu): emulator replies before the channel is set
  std::unique_ptr<PtyChannel> channel;  // set once after open; then only read until close
  std::function<void(std::string_view)> on_output;

  // On the I/O thread.
  void output(std::string_view bytes) {
    std::string replies;
    {
      std::lock_guard<std::mutex> lock(mu);
      screen.feed(bytes);
      last_output = Clock::now();
      replies = screen.take_replies();
      if (!replies.empty() && !channel) {
        early_replies += replies;
        replies.clear();
      }
    }
    cv.notify_all();
    if (!replies.empty()) (void)channel->write(replies);
    if (on_output) on_output(bytes);
  }

  void ended(const PtyExit& e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      exited = true;
      exit = e;
    }
    cv.notify_all();
  }
};

Result<std::unique_ptr<Terminal>> Terminal::open(SshSession& ssh, TerminalOptions options) {
  if (options.rows < 1 || options.rows > 1000 || options.cols < 1 || options.cols > 1000) {
    return fail(ErrorCode::kInvalidArgument, "terminal: rows and cols must be within 1..1000");
  }
  auto state = std::make_shared<State>(options.rows, options.cols, options.scrollback_lines);
  state->on_output = std::move(options.on_output);
  state->last_output = Clock::now();
  PtyOptions po;
  po.command = std::move(options.command);
  po.cols = options.cols;
  po.rows = options.rows;
  po.env = std::move(options.env);
  po.cwd = std::move(options.cwd);
  PtyCallbacks cb;
  // The callbacks hold the state weakly: they end with the channel, which the state owns.
  std::weak_ptr<State> weak = state;
  cb.on_output = [weak](std::string_view bytes) {
    if (auto s = weak.lock()) s->output(bytes);
  };
  cb.on_exit = [weak](const PtyExit& e) {
    if (auto s = weak.lock()) s->ended(e);
  };
  auto channel = ssh.open_pty(po, std::move(cb));
  if (!channel) return fail(channel.error());
  std::string early;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    state->channel = std::move(*channel);
    early.swap(state->early_replies);
  }
  if (!early.empty()) (void)state->channel->write(early);
  return std::unique_ptr<Terminal>(new Terminal(std::move(state)));
}

Terminal::Terminal(std::shared_ptr<State> state) : state_(std::move(state)) {}

Terminal::~Terminal() {
  close();
}

Status Terminal::write(std::string_view bytes) {
  if (exited()) return fail(ErrorCode::kConflict, "terminal: the program has ended");
  return state_->channel->write(bytes);
}

Status Terminal::input(const std::vector<TerminalInput>& items) {
  auto bytes = encode_terminal_input(items);
  if (!bytes) return fail(bytes.error());
  return write(*bytes);
}

TerminalScreen Terminal::screen(std::size_t scrollback_lines) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->screen.snapshot(scrollback_lines);
}

Result<TerminalWaitResult> Terminal::wait(const TerminalWait& what) {
  std::optional<std::regex> re;
  if (!what.pattern.empty()) {
    try {
      re.emplace(what.pattern, std::regex::ECMAScript | std::regex::multiline);
    } catch (const std::regex_error& e) {
      return fail(ErrorCode::kInvalidArgument,
                  "terminal: invalid pattern " + quoted(what.pattern) + ": " + e.what());
    }
  }
  const auto start = Clock::now();
  const auto deadline = start + what.timeout;
  TerminalWaitResult r;
  std::unique_lock<std::mutex> lock(state_->mu);
  for (;;) {
    auto now = Clock::now();
    r.screen = state_->screen.snapshot(what.scrollback_lines);
    if (re) {
      std::string text;
      for (const auto& l : r.screen.lines) text += l + "\n";
      if (std::regex_search(text, *re)) r.matched = true;
    }
    auto quiet_at = std::max(start, state_->last_output) + what.quiet;
    if (what.quiet.count() > 0 && now >= quiet_at) r.quiet = true;
    r.exited = state_->exited;
    if (r.matched || r.quiet || r.exited) return r;
    if (now >= deadline) {
      r.timed_out = true;
      return r;
    }
    auto until = deadline;
    if (what.quiet.count() > 0) until = std::min(until, quiet_at);
    state_->cv.wait_until(lock, until);
  }
}

Status Terminal::resize(int rows, int cols) {
  if (auto st = state_->channel->resize(rows, cols); !st) return st;
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->screen.resize(rows, cols);
  return {};
}

void Terminal::close() {
  if (state_ && state_->channel) state_->channel->close();
}

bool Terminal::exited() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->exited;
}

std::optional<int> Terminal::exit_code() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->exited) return std::nullopt;
  return state_->exit.exit_code;
}

std::string Terminal::exit_signal() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->exit.exit_signal;
}

}  // namespace pvs
