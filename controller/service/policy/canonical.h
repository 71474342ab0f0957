// The canonical form of a guarded call: every field its handler acts on, as JSON with sorted
// keys. An approval's digest is the SHA-256 of it (policy/gate.h), and a person sees it whole
// (GET /v1/approvals/{id}: "request"), so what was approved is exactly what runs, once.
//
//   PolicyRequest asked;
//   asked.canonical = canonical_exec(*req);   // {"command":...,"cwd":...,"env":[...],...}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "http/requests.h"
#include "http/terminal_requests.h"
#include "pvesandbox/egress.h"

namespace pvs::service {

// {"command","cwd","env":[[name,value],...],"stdin","timeout_seconds"}
std::string canonical_exec(const ExecRequest& r);
// {"allow":[...],"list":"...","mode":"allowlist","ports":[...]} (ports: the effective ones)
std::string canonical_egress(const Egress& e);
// {"cpus","disk_gb","hostname","internet":<egress>,"labels","memory_mb","node",
//  "node_selector","profile","ttl_seconds"}
std::string canonical_create(const CreateRequest& r, const Egress& egress);
// A fork (REST POST /v1/sandboxes/{id}/fork, E2B's fork): `count` creates of `r` from the
// files of sandbox `source`. {"count","create":<canonical_create>,"fork_of"}
std::string canonical_fork(const CreateRequest& r, const Egress& egress, const std::string& source,
                           int count);
// {"internet":<egress>}
std::string canonical_internet(const Egress& e);
// {"content_sha256":"<hex>","mode":"0644","path"}
std::string canonical_write(const std::string& path, std::uint32_t mode,
                            const std::string& content_sha256);
// {"new_string","old_string","path","replace_all"}
std::string canonical_edit(const EditRequest& r);
// A terminal's open: command, cwd, env (names and values), cols and rows.
std::string canonical_terminal_open(const TerminalCreateRequest& r);
// E2B's create (POST /e2b/v2/sandboxes): REST's create (above), the templateID asked for and
// the envVars every command of the sandbox gets (names and values, sorted by name).
// {"create":<canonical_create>,"env_vars":[[name,value],...],"template_id"}
std::string canonical_e2b_create(const CreateRequest& r, const Egress& egress,
                                 const std::string& template_id,
                                 const std::map<std::string, std::string>& env_vars);

// What identifies the file or directory a move lands: its type ("file", "dir", "symlink",
// "other"), permission bits, size, mtime and, for a regular file read whole, the SHA-256 of
// its content ("" when not read: a directory, or a file over the bound the caller reads).
struct FileIdentity {
  std::string kind;
  std::uint32_t mode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime = 0;
  std::string content_sha256;
};
// A move (E2B's Move): both ends as the sandbox resolves them and what lands at the
// destination. {"destination","source","source_file":{"content_sha256","kind","mode","mtime",
// "size"}}
std::string canonical_move(const std::string& source, const std::string& destination,
                           const FileIdentity& landing);

// `text` whole if it has at most `max` bytes, else its first `max` bytes (not splitting a
// UTF-8 sequence) and "…(cut, N bytes more)".
std::string cut_for_display(std::string_view text, std::size_t max);

// The SHA-256 of an RFC 9530 Content-Digest header ("sha-256=:<base64>:", possibly among other
// algorithms) as lower-case hex; nullopt without a well-formed sha-256 member.
std::optional<std::string> content_digest_sha256(std::string_view header);

}  // namespace pvs::service
