#include "api/mcp/session.h"

#include "pvesandbox/common/random.h"

namespace pvs::service::mcp {

std::string new_session_id() {
  return secure_random_hex(16, "an MCP session id");
}

void SessionStore::expire(Clock::time_point now) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now - it->second.last_used >= options_.idle)
      it = sessions_.erase(it);
    else
      ++it;
  }
}

Session SessionStore::open(const std::string& token, const std::string& protocol_version,
                           const std::string& client, Clock::time_point now) {
  Session s;
  s.id = new_session_id();
  s.token = token;
  s.protocol_version = protocol_version;
  s.client = client.substr(0, 128);
  s.last_used = now;
  std::lock_guard lock(mu_);
  expire(now);
  while (true) {
    std::size_t n = 0;
    auto oldest = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.token != token) continue;
      ++n;
      if (oldest == sessions_.end() || it->second.last_used < oldest->second.last_used) oldest = it;
    }
    if (n < options_.max_per_token) break;
    sessions_.erase(oldest);
  }
  sessions_[s.id] = s;
  return s;
}

std::optional<Session> SessionStore::use(const std::string& id, const std::string& token,
                                         Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.token != token) return std::nullopt;
  if (now - it->second.last_used >= options_.idle) {
    sessions_.erase(it);
    return std::nullopt;
  }
  it->second.last_used = std::max(it->second.last_used, now);
  return it->second;
}

void SessionStore::mark_initialized(const std::string& id) {
  std::lock_guard lock(mu_);
  if (auto it = sessions_.find(id); it != sessions_.end()) it->second.initialized = true;
}

bool SessionStore::close(const std::string& id, const std::string& token) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.token != token) return false;
  sessions_.erase(it);
  return true;
}

std::size_t SessionStore::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

std::size_t SessionStore::count(const std::string& token) const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [id, s] : sessions_) n += s.token == token;
  return n;
}

std::shared_ptr<SessionStore> make_session_store(const McpConfig& config) {
  SessionStore::Options o;
  o.max_per_token = static_cast<std::size_t>(config.max_sessions_per_token);
  o.idle = std::chrono::seconds(config.session_idle_seconds);
  return std::make_shared<SessionStore>(o);
}

}  // namespace pvs::service::mcp
