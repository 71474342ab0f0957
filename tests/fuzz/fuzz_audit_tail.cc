// Fuzzes the audit tail reader (controller/service/api/audit/audit_tail.h) against a forward
// reference: the first bytes pick the block size, the limit, the longest line and a filter, the
// rest is the log. Whatever the bytes, reading backwards in blocks must give exactly the last
// `limit` matching complete lines (newline-terminated, not longer than the bound, JSON objects)
// that a plain forward split gives.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "api/audit/audit_tail.h"
#include "fuzz_check.h"

namespace {

using namespace pvs::service;

using pvs::fuzz::require;

std::vector<std::string> reference(const std::string& log, const AuditTailOptions& o) {
  std::vector<std::string> all;
  std::size_t start = 0;
  for (std::size_t nl; (nl = log.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = log.substr(start, nl - start);
    if (!line.empty() && line.size() <= o.max_line_bytes && audit_line_matches(line, o))
      all.push_back(std::move(line));
  }
  if (all.size() > o.limit) all.erase(all.begin(), all.end() - static_cast<long>(o.limit));
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  static int fd = memfd_create("audit", MFD_CLOEXEC);
  require(fd >= 0);
  AuditTailOptions o;
  o.block_bytes = 1 + data[0] % 64;
  o.limit = 1 + data[1] % 8;
  o.max_line_bytes = 8 + data[2] % 120;
  if (data[3] & 1) o.action = "a";
  if (data[3] & 2) o.sandbox = "s";
  std::string log(reinterpret_cast<const char*>(data) + 4, size - 4);
  require(ftruncate(fd, 0) == 0);
  require(pwrite(fd, log.data(), log.size(), 0) == static_cast<ssize_t>(log.size()));
  auto tail = read_audit_tail("/proc/self/fd/" + std::to_string(fd), o);
  require(tail.has_value());
  require(!tail->truncated);
  require(tail->records == reference(log, o));
  return 0;
}
