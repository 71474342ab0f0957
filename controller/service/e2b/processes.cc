#include "e2b/processes.h"

#include <charconv>
#include <cstdio>
#include <functional>

#include "pvesandbox/ssh_session.h"

namespace pvs::service::e2b {

using ssh_detail::shell_quote;  // pvesandbox/ssh_session.h
namespace {

constexpr std::string_view kMarkerStart = "\036e2b:";
constexpr std::size_t kMaxMarkerBuffer = 256;
constexpr auto kSideExecTimeout = std::chrono::seconds(10);

Status side_exec(pvs::Sandbox& sandbox, std::string command, std::string stdin_data = {}) {
  ExecOptions o;
  o.stdin_data = std::move(stdin_data);
  o.timeout = kSideExecTimeout;
  o.max_output = 4096;
  auto r = sandbox.exec(std::move(command), std::move(o));
  if (!r) return tl::unexpected(r.error());
  if (r->timed_out)
    return fail(ErrorCode::kTimeout, "the process's input did not go through within " +
                                         std::to_string(kSideExecTimeout.count()) + " s");
  if (r->exit_code != 0)
    return fail(ErrorCode::kNotFound, "process is not running or has no open stdin" +
                                          (r->err.empty() ? std::string() : ": " + r->err));
  return {};
}

}  // namespace

std::string stdin_fifo(std::uint32_t pid) {
  return "/tmp/.pvs-e2b-stdin-" + std::to_string(pid);
}

namespace {

bool is_bash(std::string_view cmd) {
  return cmd == "/bin/bash" || cmd == "bash" || cmd == "/usr/bin/bash" ||
         cmd == "/usr/local/bin/bash";
}

// Runs `bash -l -c CMD` from the login snapshot when it is fresh (in the user's shell itself
// when that is bash, else an `exec`ed `bash -c`), else a login shell that (re)writes it first
// (process_script in processes.h). Variables that differ per connection
// or terminal are left out of the snapshot. A profile file as new as the snapshot counts as
// changed: file times here move in clock ticks, not nanoseconds.
std::string login_launch(const ProcessConfig& c, const std::string& key) {
  const std::string bash = shell_quote(c.cmd), cmd = c.args[2];
  const std::string check =
      "k=login-" + key +
      "; [ -d \"$HOME/bin\" ] && k=$k-b; [ -d \"$HOME/.local/bin\" ] && k=$k-l\n"
      "PVS_E2B_LOGIN=$HOME/.cache/pve-sandbox/$k; export PVS_E2B_LOGIN; n=\n"
      "[ -f \"$PVS_E2B_LOGIN\" ] && [ -O \"$PVS_E2B_LOGIN\" ] && n=1\n"
      "for p in /etc/profile /etc/profile.d /etc/profile.d/*.sh /etc/bash.bashrc "
      "\"$HOME/.bash_profile\" \"$HOME/.bash_login\" \"$HOME/.profile\" \"$HOME/.bashrc\"; do\n"
      "  [ -e \"$p\" ] && [ ! \"$p\" -ot \"$PVS_E2B_LOGIN\" ] && n=\n"
      "done\n";
  const std::string use = ". \"$PVS_E2B_LOGIN\"; unset PVS_E2B_LOGIN\n" + cmd;
  const std::string use_here = ". \"$PVS_E2B_LOGIN\"; unset PVS_E2B_LOGIN; BASH_ARGV0=" + bash +
                               "\neval " + shell_quote(cmd) + "\nexit";
  const std::string write =
      "{ mkdir -p -m 700 \"${PVS_E2B_LOGIN%/*}\" && (unset PWD OLDPWD SHLVL TERM LINES COLUMNS "
      "SSH_CLIENT SSH_CONNECTION SSH_TTY SSH_AUTH_SOCK PVS_E2B_LOGIN; export -p) "
      ">\"$PVS_E2B_LOGIN.$$\" && mv -f \"$PVS_E2B_LOGIN.$$\" \"$PVS_E2B_LOGIN\"; } 2>/dev/null\n"
      "unset PVS_E2B_LOGIN\n" +
      cmd;
  // sshd runs this script in the user's shell: when that is bash already (not in POSIX mode,
  // as `sh` would be), the command runs in it from the snapshot, without starting a second bash
  // (about 2 ms: root's shell in a container is bash). What the check set is unset first; $0
  // is the bash asked for, as in `bash -c` (BASH_ARGV0, bash 5).
  const std::string here =
      "if [ -n \"$BASH_VERSION\" ] && ! shopt -qo posix; then\n"
      "unset k n p\n" +
      use_here + "\nfi\n";
  return check + "if [ -n \"$n\" ]; then\n" + here + "exec " + bash + " -c " + shell_quote(use) +
         "\nfi\nexec " + bash + " -l -c " + shell_quote(write) + "\n";
}

}  // namespace

std::string login_key(const std::map<std::string, std::string>& default_env) {
  std::string all;
  for (const auto& [k, v] : default_env) all += k + '=' + v + '\0';
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(std::hash<std::string>{}(all)));
  return hex;
}

std::string login_warmup_command() {
  return process_script({"/bin/bash", {"-l", "-c", "true"}, {}, std::nullopt}, false,
                        login_key({}));
}

std::string process_script(const ProcessConfig& config, bool stdin_open,
                           const std::string& login_key) {
  const std::string marker = "printf '\\036e2b:%s\\036' \"$$\" >&2\n";
  const auto& a = config.args;
  const bool from_snapshot = !login_key.empty() && is_bash(config.cmd) && a.size() == 3 &&
                             a[0] == "-l" && a[1] == "-c" && config.envs.empty();
  const std::string launch =
      from_snapshot ? login_launch(config, login_key) : "exec " + shell_line(config) + "\n";
  if (!stdin_open) return marker + launch;
  // The FIFO's writer end is held by a holder of its own, a subshell that ends at the first line
  // on the close FIFO (CloseStdin writes one): the shell that waits for the command takes no
  // signal, so its wait always ends with the command's own status. The holder has both FIFOs
  // from its fork on, and the command the FIFO from its own fork until it has opened it to
  // read; the marker comes only after both forks, so input and a close sent as early as the
  // marker allows are kept, and the command sees EOF once the holder is gone.
  return "f=/tmp/.pvs-e2b-stdin-$$\n"
         "rm -f \"$f\" \"$f.close\"; mkfifo -m 600 \"$f\" \"$f.close\" || exit 125\n"
         "exec 3<>\"$f\" 4<>\"$f.close\"\n"
         "(read -r _ <&4) </dev/null >/dev/null 2>&1 &\n"
         "exec 4>&-\n"
         "(exec 3>&-\n" +
         launch + ") <\"$f\" &\n" + "c=$!\n" + "exec 3>&-\n" + marker +
         "wait \"$c\"; r=$?\n"
         "echo 1<>\"$f.close\"; rm -f \"$f\" \"$f.close\"; exit \"$r\"\n";
}

// --- EventQueue ---

void EventQueue::push(std::string message, bool is_data) {
  std::lock_guard lock(mu_);
  if (finished_) return;
  if (is_data && bytes_ + message.size() > kMaxQueued) {
    dropped_ = true;
    return;
  }
  bytes_ += message.size();
  items_.push_back(std::move(message));
  cv_.notify_all();
}

void EventQueue::finish(std::optional<ConnectError> error) {
  std::lock_guard lock(mu_);
  if (finished_) return;
  finished_ = true;
  error_ = std::move(error);
  cv_.notify_all();
}

std::optional<std::string> EventQueue::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !items_.empty() || finished_; });
  if (items_.empty()) return std::nullopt;
  std::string m = std::move(items_.front());
  items_.pop_front();
  bytes_ -= m.size();
  return m;
}

bool EventQueue::finished() const {
  std::lock_guard lock(mu_);
  return finished_ && items_.empty();
}

std::optional<ConnectError> EventQueue::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

bool EventQueue::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

// --- Process ---

Process::Process(ProcessConfig config, std::optional<std::string> tag, bool pty, bool stdin_open,
                 std::size_t max_subscribers)
    : config_(std::move(config)),
      tag_(std::move(tag)),
      pty_mode_(pty),
      stdin_open_(stdin_open),
      max_subscribers_(max_subscribers) {}

Unsubscribe::~Unsubscribe() {
  if (process) process->unsubscribe(events);
}

std::uint32_t Process::pid() const {
  std::lock_guard lock(mu_);
  return pid_;
}

bool Process::running() const {
  std::lock_guard lock(mu_);
  return !ended_;
}

std::optional<EndInfo> Process::end_info() const {
  std::lock_guard lock(mu_);
  return end_;
}

void Process::add_subscriber(std::shared_ptr<EventQueue> q) {
  std::lock_guard lock(mu_);
  subscribers_.push_back(std::move(q));
}

Result<std::shared_ptr<EventQueue>> Process::subscribe() {
  auto q = std::make_shared<EventQueue>();
  std::lock_guard lock(mu_);
  if (!ended_ && subscribers_.size() >= max_subscribers_)
    return fail(ErrorCode::kTooLarge, "process " + std::to_string(pid_) + " has " +
                                          std::to_string(subscribers_.size()) +
                                          " readers already (at most " +
                                          std::to_string(max_subscribers_) + " per process)");
  q->push(start_event(pid_), false);
  if (ended_) {
    q->push(end_message_, false);
    q->finish(std::nullopt);
  } else {
    subscribers_.push_back(q);
  }
  return q;
}

void Process::unsubscribe(const std::shared_ptr<EventQueue>& events) {
  std::lock_guard lock(mu_);
  std::erase(subscribers_, events);
}

std::size_t Process::subscribers() const {
  std::lock_guard lock(mu_);
  return subscribers_.size();
}

void Process::broadcast(const std::string& message, bool is_data) {
  for (const auto& q : subscribers_) q->push(message, is_data);
}

// Before the pid is known, output is held (stdout may overtake the marker on stderr); the
// marker's bytes are taken out.
void Process::take_marker(Stream stream, std::string_view bytes) {
  if (stream != Stream::kStdout || pty_mode_) marker_buffer_.append(bytes);
  auto at = marker_buffer_.find(kMarkerStart);
  auto end = at == std::string::npos ? at : marker_buffer_.find('\036', at + kMarkerStart.size());
  if (end == std::string::npos) {
    if (marker_buffer_.size() > kMaxMarkerBuffer) start_error_ = "no pid marker from the shell";
    return;
  }
  std::string_view digits(marker_buffer_.data() + at + kMarkerStart.size(),
                          end - at - kMarkerStart.size());
  std::uint32_t pid = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (ec != std::errc() || p != digits.data() + digits.size() || pid == 0) {
    start_error_ = "bad pid marker from the shell";
    return;
  }
  pid_ = pid;
  std::string before = marker_buffer_.substr(0, at), after = marker_buffer_.substr(end + 1);
  marker_buffer_.clear();
  broadcast(start_event(pid_), false);
  Stream marked = pty_mode_ ? Stream::kPty : Stream::kStderr;
  if (!before.empty()) broadcast(data_event(marked, before), true);
  if (!after.empty()) broadcast(data_event(marked, after), true);
}

void Process::on_output(Stream stream, std::string_view bytes) {
  std::lock_guard lock(mu_);
  if (pid_ == 0) {
    if (stream == Stream::kStdout && !pty_mode_) {
      // Held until the start event went out.
      held_stdout_.append(bytes);
      return;
    }
    take_marker(stream, bytes);
    if (pid_ != 0 && !held_stdout_.empty()) {
      broadcast(data_event(Stream::kStdout, held_stdout_), true);
      held_stdout_.clear();
    }
    cv_.notify_all();
    return;
  }
  broadcast(data_event(stream, bytes), true);
}

void Process::on_end(const EndInfo& end) {
  std::lock_guard lock(mu_);
  if (pid_ == 0 && !start_error_)
    start_error_ = "the command ended before it started (" + end.status + ")";
  if (!held_stdout_.empty() && pid_ != 0)
    broadcast(data_event(Stream::kStdout, held_stdout_), true);
  ended_ = true;
  end_ = end;
  end_message_ = end_event(end);
  broadcast(end_message_, false);
  for (const auto& q : subscribers_) q->finish(std::nullopt);
  subscribers_.clear();
  cv_.notify_all();
}

void Process::on_error(const std::string& message) {
  std::lock_guard lock(mu_);
  if (pid_ == 0 && !start_error_) start_error_ = message;
  ended_ = true;
  EndInfo e;
  e.exit_code = -1;
  e.exited = false;
  e.status = "error";
  e.error = message;
  end_ = e;
  end_message_ = end_event(e);
  for (const auto& q : subscribers_) q->finish(ConnectError{ConnectCode::kUnavailable, message});
  subscribers_.clear();
  cv_.notify_all();
}

bool Process::wait_started(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return pid_ != 0 || ended_ || start_error_; });
}

std::optional<std::string> Process::start_error() const {
  std::lock_guard lock(mu_);
  return pid_ == 0 ? start_error_ : std::nullopt;
}

void Process::set_pty(std::unique_ptr<PtyChannel> pty) {
  std::lock_guard lock(mu_);
  pty_ = std::move(pty);
}

Status Process::send_input(pvs::Sandbox& sandbox, std::string_view bytes, bool pty) {
  std::unique_lock lock(mu_);
  if (pty) {
    if (!pty_) return fail(ErrorCode::kInvalidArgument, "the process has no pty");
    return pty_->write(bytes);
  }
  if (!stdin_open_)
    return fail(ErrorCode::kInvalidArgument,
                "the process was started without stdin (start it with stdin: true)");
  if (stdin_closed_)
    return fail(ErrorCode::kInvalidArgument, "the process's stdin is closed (CloseStdin)");
  std::uint32_t pid = pid_;
  lock.unlock();
  std::string fifo = stdin_fifo(pid);
  return side_exec(sandbox, "[ -p " + fifo + " ] && exec cat > " + fifo, std::string(bytes));
}

Status Process::close_stdin(pvs::Sandbox& sandbox) {
  std::unique_lock lock(mu_);
  if (!stdin_open_ || stdin_closed_) return {};  // no stdin, or closed already
  std::uint32_t pid = pid_;
  lock.unlock();
  const std::string close = stdin_fifo(pid) + ".close";
  auto done = side_exec(sandbox, "[ -p " + close + " ] && echo 1<>" + close);
  if (done) {
    lock.lock();
    stdin_closed_ = true;  // later input would reach a command that has seen EOF
  }
  return done;
}

Status Process::signal(pvs::Sandbox& sandbox, int signal) {
  std::uint32_t pid = this->pid();
  const char* name = signal == 9 ? "KILL" : "TERM";
  return side_exec(sandbox, "kill -s " + std::string(name) + " -- -" + std::to_string(pid));
}

Status Process::resize(std::uint32_t cols, std::uint32_t rows) {
  std::lock_guard lock(mu_);
  if (!pty_) return fail(ErrorCode::kInvalidArgument, "the process has no pty");
  return pty_->resize(static_cast<int>(cols), static_cast<int>(rows));
}

}  // namespace pvs::service::e2b
