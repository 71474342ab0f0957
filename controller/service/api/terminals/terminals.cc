#include "api/terminals/terminals.h"

#include <algorithm>
#include <random>

#include "http/json.h"
#include "pvesandbox/common/log.h"

namespace pvs::service {

using Clock = std::chrono::steady_clock;

namespace {

std::string new_terminal_id() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mu);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%012llx",
                static_cast<unsigned long long>(rng() & 0xffffffffffffull));
  return std::string("t-") + buf;
}

}  // namespace

TerminalRegistry::TerminalRegistry(Limits limits) : limits_(limits) {
  reaper_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::seconds(1));
      if (stop_) break;
      lock.unlock();
      sweep();
      lock.lock();
    }
  });
}

TerminalRegistry::~TerminalRegistry() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  reaper_.join();
  std::map<std::string, std::shared_ptr<TerminalEntry>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(entries_);
  }
  for (auto& [id, e] : all) e->terminal->close();
}

int TerminalRegistry::running_locked(const std::function<bool(const TerminalEntry&)>& pred) const {
  int n = 0;
  for (const auto& [id, e] : entries_) {
    if (pred(*e) && e->terminal->state().running) ++n;
  }
  return n;
}

ApiResult<std::shared_ptr<TerminalEntry>> TerminalRegistry::open(const std::string& sandbox,
                                                                 const std::string& owner,
                                                                 std::string command,
                                                                 const Opener& opener) {
  {
    std::lock_guard lock(mu_);
    int in_sandbox = running_locked([&](const TerminalEntry& e) { return e.sandbox == sandbox; }) +
                     pending_sandbox_[sandbox];
    if (in_sandbox >= limits_.per_sandbox) {
      return tl::unexpected(
          limit_exceeded("sandbox " + sandbox + " has " + std::to_string(in_sandbox) +
                         " terminals open (terminals.max_per_sandbox); close one first"));
    }
    int of_token = running_locked([&](const TerminalEntry& e) { return e.owner == owner; }) +
                   pending_token_[owner];
    if (of_token >= limits_.per_token) {
      return tl::unexpected(limit_exceeded("token " + owner + " has " + std::to_string(of_token) +
                                           " terminals open (terminals.max_per_token)"));
    }
    ++pending_sandbox_[sandbox];
    ++pending_token_[owner];
  }
  auto terminal = opener();
  std::lock_guard lock(mu_);
  if (--pending_sandbox_[sandbox] == 0) pending_sandbox_.erase(sandbox);
  if (--pending_token_[owner] == 0) pending_token_.erase(owner);
  if (!terminal) return tl::unexpected(from_error(terminal.error()));
  auto e = std::make_shared<TerminalEntry>();
  e->id = new_terminal_id();
  e->sandbox = sandbox;
  e->owner = owner;
  e->command = std::move(command);
  e->created_at = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  e->terminal = std::move(*terminal);
  entries_[e->id] = e;
  return e;
}

std::shared_ptr<TerminalEntry> TerminalRegistry::find(const std::string& sandbox,
                                                      const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second->sandbox != sandbox) return nullptr;
  return it->second;
}

std::vector<std::shared_ptr<TerminalEntry>> TerminalRegistry::list(
    const std::string& sandbox) const {
  std::vector<std::shared_ptr<TerminalEntry>> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, e] : entries_) {
    if (e->sandbox == sandbox) out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a->created_at != b->created_at ? a->created_at < b->created_at : a->id < b->id;
  });
  return out;
}

bool TerminalRegistry::close(const std::string& sandbox, const std::string& id) {
  std::shared_ptr<TerminalEntry> e;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end() || it->second->sandbox != sandbox) return false;
    e = it->second;
    entries_.erase(it);
    ended_at_.erase(id);
  }
  e->terminal->close();
  return true;
}

void TerminalRegistry::close_sandbox(const std::string& sandbox) {
  for (const auto& e : list(sandbox)) close(sandbox, e->id);
}

void TerminalRegistry::sweep() {
  std::vector<std::shared_ptr<TerminalEntry>> gone;
  const auto now = Clock::now();
  {
    std::lock_guard lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      const TerminalEntry& e = *it->second;
      TerminalState s = e.terminal->state();
      bool drop = false;
      if (!s.running) {
        auto [at, fresh] = ended_at_.emplace(e.id, now);
        drop = now - at->second >= std::min(limits_.ended_linger, limits_.idle);
      } else {
        drop = e.readers.load() == 0 && now - s.last_activity >= limits_.idle;
        if (drop) log::info("terminal " + e.id + " of " + e.sandbox + ": idle, closed");
      }
      if (drop) {
        gone.push_back(it->second);
        ended_at_.erase(e.id);
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& e : gone) e->terminal->close();
}

std::size_t TerminalRegistry::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::string terminal_json(const TerminalEntry& e) {
  TerminalState s = e.terminal->state();
  JsonWriter w;
  w.begin_object().key("id").value(e.id).key("sandbox").value(e.sandbox);
  w.key("command").value(e.command).key("owner").value(e.owner);
  w.key("state").value(s.running ? "running" : "exited");
  w.key("cols").value(s.cols).key("rows").value(s.rows);
  if (s.exit) {
    if (s.exit->signal.empty() && s.exit->error.empty()) {
      w.key("exit_code").value(s.exit->exit_code);
    } else {
      w.key("exit_code").null();
    }
    if (!s.exit->signal.empty()) w.key("signal").value(s.exit->signal);
    if (!s.exit->error.empty()) w.key("error").value(s.exit->error);
    w.key("hung_up").value(s.exit->hung_up);
  }
  w.key("created_at").value(e.created_at);
  w.key("idle_seconds")
      .value(static_cast<std::int64_t>(
          std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - s.last_activity)
              .count()));
  w.key("watchers").value(s.watchers);
  w.key("input_bytes").value(s.input_bytes).key("output_bytes").value(s.output_bytes);
  return w.end_object().take();
}

std::string screen_json(const ScreenSnapshot& s) {
  JsonWriter w;
  w.begin_object().key("cols").value(s.cols).key("rows").value(s.rows);
  w.key("lines").begin_array();
  for (const auto& l : s.lines) w.value(l);
  w.end_array();
  w.key("cursor").begin_object().key("row").value(s.cursor_row).key("col").value(s.cursor_col);
  w.key("visible").value(s.cursor_visible).end_object();
  w.key("title").value(s.title).key("alternate_screen").value(s.alternate_screen);
  w.key("scrollback").begin_array();
  for (const auto& l : s.scrollback) w.value(l);
  w.end_array();
  w.key("output_bytes").value(s.output_bytes);
  return w.end_object().take();
}

}  // namespace pvs::service
