// The end of the audit log, for GET /v1/audit: the last records, read backwards from the end
// of the file in blocks, so a large log costs what the answer needs, never the whole file.
//
//   AuditTailOptions o;
//   o.limit = 100;
//   o.action = "sandbox.create";          // optional filters, exact matches
//   auto tail = read_audit_tail("/var/log/pve-sandbox-controller/audit.log", o);
//   // tail->records: the lines (JSON objects), oldest first, newest last
//
// Memory is bounded: one block, one line (at most max_line_bytes; longer lines are skipped)
// and the answer (at most max_reply_bytes). A last line without its newline is a write in
// progress and is left out; lines that are not JSON objects are skipped. The scan stops after
// max_scan_bytes (then `truncated`), so a filter that matches nothing in a huge log stays cheap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"

namespace pvs::service {

struct AuditTailOptions {
  std::size_t limit = 100;
  std::string action;   // only records with this "action" ("" = any)
  std::string sandbox;  // only records with this "sandbox" ("" = any)
  std::size_t block_bytes = 64 * 1024;
  std::size_t max_line_bytes = 256 * 1024;
  std::size_t max_reply_bytes = 8 * 1024 * 1024;
  std::uint64_t max_scan_bytes = 256ull * 1024 * 1024;
};

struct AuditTail {
  std::vector<std::string> records;  // JSON objects, oldest first (newest last)
  // The scan stopped (max_scan_bytes, max_reply_bytes, or the file was truncated meanwhile by
  // logrotate's copytruncate) before the file's start with fewer than `limit` records.
  bool truncated = false;
  std::uint64_t scanned_bytes = 0;
};

// Errors: kNotFound when the file does not exist, kIo when it cannot be opened or read.
Result<AuditTail> read_audit_tail(const std::string& path, const AuditTailOptions& options);

// Whether one line is a JSON object passing the filters (exported for tests and fuzzing).
bool audit_line_matches(const std::string& line, const AuditTailOptions& options);

}  // namespace pvs::service
