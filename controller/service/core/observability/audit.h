// The audit log: one JSON object per line for every mutating API call, appended with a single
// write(2) (and optionally fdatasync) before the reply is sent.
//
//   {"time":"2026-11-22T15:04:05.123Z","request_id":"...","token":"ci","remote":"127.0.0.1",
//    "action":"sandbox.create","sandbox":"sb-4f2a9c1e0b7d","params":{...},"result":"ok",
//    "status":201,"duration_ms":812}
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::service {

struct AuditRecord {
  std::string request_id;
  std::string token;   // the token's name, never the token
  std::string remote;  // client address
  std::string action;  // "sandbox.create", "sandbox.exec", ...
  std::string sandbox;
  std::string params_json = "{}";  // an object, already free of secrets (no stdin, no env values)
  std::string policy_json;         // the policy's decision (an object), if a rule was asked
  int status = 0;                  // HTTP status of the reply
  std::string error_code;          // empty on success
  std::string error_message;
  std::int64_t duration_ms = 0;
};

class AuditLog {
 public:
  // Opens (creates, mode 0640) `path` for appending.
  static Result<std::unique_ptr<AuditLog>> open(const std::string& path, bool fsync);

  // Appends one line; the record is on disk (in the page cache, or on the device with fsync)
  // when this returns.
  Status append(const AuditRecord& record);
  // Reopens the file (after logrotate moved it).
  Status reopen();

  static std::string format(const AuditRecord& record, std::int64_t unix_ms);

 private:
  AuditLog(std::string path, bool fsync, UniqueFd fd)
      : path_(std::move(path)), fsync_(fsync), fd_(std::move(fd)) {}
  std::string path_;
  bool fsync_;
  std::mutex mu_;
  UniqueFd fd_;
};

// "2026-11-22T15:04:05.123Z"
std::string format_rfc3339_ms(std::int64_t unix_ms);

}  // namespace pvs::service
