#include "core/observability/audit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <memory>

#include "core/json/json_writer.h"

namespace pvs::service {

std::string format_rfc3339_ms(std::int64_t unix_ms) {
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_ms % 1000));
  return buf;
}

Result<std::unique_ptr<AuditLog>> AuditLog::open(const std::string& path, bool fsync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return fail(errno_error("audit log " + path, errno));
  return std::unique_ptr<AuditLog>(new AuditLog(path, fsync, UniqueFd(fd)));
}

std::string AuditLog::format(const AuditRecord& r, std::int64_t unix_ms) {
  JsonWriter w;
  w.begin_object();
  w.key("time").value(format_rfc3339_ms(unix_ms));
  w.key("request_id").value(r.request_id);
  w.key("token").value(r.token);
  w.key("remote").value(r.remote);
  w.key("action").value(r.action);
  w.key("sandbox").value(r.sandbox);
  w.key("params").raw(r.params_json.empty() ? "{}" : r.params_json);
  if (!r.policy_json.empty()) w.key("policy").raw(r.policy_json);
  w.key("result").value(r.error_code.empty() ? "ok" : "error");
  w.key("status").value(r.status);
  if (!r.error_code.empty()) {
    w.key("error").begin_object();
    w.key("code").value(r.error_code).key("message").value(r.error_message);
    w.end_object();
  }
  w.key("duration_ms").value(r.duration_ms);
  w.end_object();
  return w.take() + "\n";
}

Status AuditLog::append(const AuditRecord& record) {
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  std::string line = format(record, now);
  std::lock_guard lock(mu_);
  std::size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::write(fd_.get(), line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno_error("audit log " + path_, errno));
    }
    done += static_cast<std::size_t>(n);
  }
  if (fsync_ && ::fdatasync(fd_.get()) != 0) {
    return fail(errno_error("audit log fdatasync " + path_, errno));
  }
  return {};
}

Status AuditLog::reopen() {
  int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return fail(errno_error("audit log " + path_, errno));
  std::lock_guard lock(mu_);
  fd_.reset(fd);
  return {};
}

}  // namespace pvs::service
