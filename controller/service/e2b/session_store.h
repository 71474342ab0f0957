// E2B sessions kept across controller restarts (`e2b.sessions_file`, docs/e2b.md "Sessions
// across restarts"): one JSON file, {"version": 1, "volume_key": "<base64>", "sessions":
// [{"id", "access_token", "traffic_token", "template_id", "owner", "mask_host", "env_vars":
// {...}}]}, mode 0600 (it holds the sandboxes' access tokens and the key volume tokens are
// sealed with). A writer thread replaces it whole (a temporary file
// renamed over it) after changes, so a create never waits for the disk and a burst of creates
// is one write.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "e2b/sessions.h"
#include "pvesandbox/common/error.h"

namespace pvs::service::e2b {

struct SessionFile {
  std::vector<SessionRecord> sessions;
  std::string volume_key;  // raw bytes; "" when the file has none
};

class SessionStore {
 public:
  // `snapshot` gives what to write; it is called on the writer thread.
  SessionStore(std::string path, std::function<SessionFile()> snapshot);
  ~SessionStore();  // writes what changed, then stops the writer
  SessionStore(const SessionStore&) = delete;
  SessionStore& operator=(const SessionStore&) = delete;

  // The file's contents: empty when it does not exist; kInvalidArgument naming the file and
  // what is wrong with it (a record without an id or token, not JSON, another version).
  Result<SessionFile> load() const;
  // Something changed: the writer writes the snapshot soon. Returns at once.
  void changed();
  // Waits until every change before this call is written.
  void flush();

  // The file's text for `file`, and the contents of a text (exposed for tests and fuzzing).
  static std::string encode(const SessionFile& file);
  static Result<SessionFile> decode(std::string_view text);

 private:
  void run(std::stop_token stop);

  const std::string path_;
  const std::function<SessionFile()> snapshot_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  std::uint64_t asked_ = 0;    // changes reported
  std::uint64_t written_ = 0;  // changes the file holds
  bool failing_ = false;       // the last write failed (the writer's own)
  std::jthread writer_;        // last: stops first
};

}  // namespace pvs::service::e2b
