// MCP sessions (Streamable HTTP): `initialize` opens one and its random 128-bit id travels in
// the Mcp-Session-Id header of every later request. A session belongs to the token that
// opened it (another token's id is "no such session"), ends when it is idle too long or when
// the client sends DELETE, and a token holds at most max_per_token of them: opening one more
// ends its least recently used one (that client then gets 404 and initializes again, as the
// transport specifies).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/config/config.h"

namespace pvs::service::mcp {

struct Session {
  std::string id;
  std::string token;             // the token's name
  std::string protocol_version;  // negotiated at initialize
  std::string client;            // clientInfo.name, for the audit log
  bool initialized = false;      // notifications/initialized arrived
  std::chrono::steady_clock::time_point last_used;
};

class SessionStore {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    std::size_t max_per_token = 64;
    std::chrono::seconds idle{3600};
  };
  explicit SessionStore(Options options) : options_(options) {}

  // A new session (its id fresh from the OS's random source).
  Session open(const std::string& token, const std::string& protocol_version,
               const std::string& client, Clock::time_point now = Clock::now());
  // The live session `id` of `token`, marked used now; nullopt if unknown, expired or another
  // token's.
  std::optional<Session> use(const std::string& id, const std::string& token,
                             Clock::time_point now = Clock::now());
  void mark_initialized(const std::string& id);
  // Ends `token`'s session `id`; false if there is none.
  bool close(const std::string& id, const std::string& token);

  std::size_t size() const;
  std::size_t count(const std::string& token) const;

 private:
  void expire(Clock::time_point now);  // with mu_ held

  Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Session> sessions_;
};

std::shared_ptr<SessionStore> make_session_store(const McpConfig& config);

// 32 lower-case hex digits from the OS's random source.
std::string new_session_id();

}  // namespace pvs::service::mcp
