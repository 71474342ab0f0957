#include "api/audit/audit_tail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <Poco/JSON/Parser.h>

#include "http/json.h"
#include "pvesandbox/common/unique_fd.h"

namespace pvs::service {
namespace {

// The field's string value, or "" when it is absent or not a string.
std::string string_field(const Poco::JSON::Object& o, const std::string& key) {
  if (!o.has(key)) return {};
  Poco::Dynamic::Var v = o.get(key);
  return v.isString() ? v.extract<std::string>() : std::string();
}

// Collects complete lines met while reading backwards, newest first.
class TailCollector {
 public:
  explicit TailCollector(const AuditTailOptions& o) : o_(o) {}

  // A block [start, start + size) of the file; lines end with '\n'. Returns false when done.
  bool feed(const char* data, std::size_t size) {
    std::size_t end = size;  // bytes [i+1, end) continue `pending_` on its left
    for (std::size_t i = size; i-- > 0;) {
      if (data[i] != '\n') continue;
      prepend(data + i + 1, end - i - 1);
      if (!line_done()) return false;
      end = i;
    }
    prepend(data, end);
    return true;
  }
  // The file's first line (when the scan reached its start).
  void finish() { line_done(); }
  bool full() const { return stopped_; }
  bool truncated() const { return truncated_; }
  std::vector<std::string> take() {
    std::reverse(records_.begin(), records_.end());
    return std::move(records_);
  }

 private:
  void prepend(const char* data, std::size_t n) {
    if (oversize_ || n == 0) return;
    if (pending_.size() + n > o_.max_line_bytes) {
      oversize_ = true;
      pending_.clear();
      return;
    }
    pending_.insert(0, data, n);
  }
  // The bytes gathered since the last newline form a line (unless they are the unterminated
  // end of the file). Returns false once the answer is complete.
  bool line_done() {
    bool keep = seen_newline_ && !oversize_ && !pending_.empty();
    seen_newline_ = true;
    oversize_ = false;
    if (keep && audit_line_matches(pending_, o_)) {
      if (bytes_ + pending_.size() > o_.max_reply_bytes) {
        truncated_ = stopped_ = true;
        return false;
      }
      bytes_ += pending_.size();
      records_.push_back(std::move(pending_));
      if (records_.size() >= o_.limit) stopped_ = true;
    }
    pending_.clear();
    return !stopped_;
  }

  const AuditTailOptions& o_;
  std::string pending_;
  bool seen_newline_ = false;  // false: the bytes so far are a write in progress
  bool oversize_ = false;
  bool stopped_ = false;
  bool truncated_ = false;
  std::size_t bytes_ = 0;
  std::vector<std::string> records_;
};

}  // namespace

bool audit_line_matches(const std::string& line, const AuditTailOptions& o) {
  // Cheap first: a filter's value must appear in the line as a JSON string.
  for (const std::string* want : {&o.action, &o.sandbox}) {
    if (want->empty()) continue;
    std::string needle;
    append_json_string(needle, *want);
    if (line.find(needle) == std::string::npos) return false;
  }
  try {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var v = parser.parse(line);
    if (v.type() != typeid(Poco::JSON::Object::Ptr)) return false;
    auto obj = v.extract<Poco::JSON::Object::Ptr>();
    if (!o.action.empty() && string_field(*obj, "action") != o.action) return false;
    if (!o.sandbox.empty() && string_field(*obj, "sandbox") != o.sandbox) return false;
    return true;
  } catch (const Poco::Exception&) {
    return false;
  } catch (const std::exception&) {
    return false;
  }
}

Result<AuditTail> read_audit_tail(const std::string& path, const AuditTailOptions& options) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return fail(ErrorCode::kNotFound, "audit log " + path + ": no such file");
    return fail(errno_error("audit log " + path, errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(errno_error("audit log " + path, errno));
  AuditTail out;
  if (options.limit == 0) return out;
  TailCollector collector(options);
  std::string block(std::max<std::size_t>(options.block_bytes, 1), '\0');
  auto pos = static_cast<std::uint64_t>(st.st_size);  // appends after the stat are not read
  while (pos > 0) {
    if (out.scanned_bytes >= options.max_scan_bytes) {
      out.truncated = true;
      break;
    }
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(pos, block.size()));
    pos -= n;
    std::size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd.get(), block.data() + got, n - got, static_cast<off_t>(pos + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return fail(errno_error("audit log " + path, errno));
      if (r == 0) break;  // truncated meanwhile (logrotate's copytruncate)
      got += static_cast<std::size_t>(r);
    }
    if (got < n) {
      out.truncated = true;
      break;
    }
    out.scanned_bytes += n;
    if (!collector.feed(block.data(), n)) break;
  }
  if (pos == 0 && !out.truncated && !collector.full()) collector.finish();
  out.truncated = out.truncated || collector.truncated();
  out.records = collector.take();
  return out;
}

}  // namespace pvs::service
