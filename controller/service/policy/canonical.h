// The canonical form of a guarded call: every field its handler acts on, as JSON with sorted
// keys. An approval's digest is the SHA-256 of it (policy/gate.h), and a person sees it whole
// (GET /v1/approvals/{id}: "request"), so what was approved is exactly what runs, once.
//
//   PolicyRequest asked;
//   asked.canonical = canonical_exec(*req);   // {"command":...,"cwd":...,"env":[...],...}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/terminals/terminal_requests.h"
#include "http/requests.h"
#include "pvesandbox/egress.h"

namespace pvs::service {

// {"command","cwd","env":[[name,value],...],"stdin","timeout_seconds"}
std::string canonical_exec(const ExecRequest& r);
// {"allow":[...],"list":"...","mode":"allowlist","ports":[...]} (ports: the effective ones)
std::string canonical_egress(const Egress& e);
// {"cpus","disk_gb","hostname","internet":<egress>,"labels","memory_mb","node",
//  "node_selector","profile","ttl_seconds"}
std::string canonical_create(const CreateRequest& r, const Egress& egress);
// {"internet":<egress>}
std::string canonical_internet(const Egress& e);
// {"content_sha256":"<hex>","mode":"0644","path"}
std::string canonical_write(const std::string& path, std::uint32_t mode,
                            const std::string& content_sha256);
// {"new_string","old_string","path","replace_all"}
std::string canonical_edit(const EditRequest& r);
// A terminal's open: command, cwd, env (names and values), cols and rows.
std::string canonical_terminal_open(const TerminalCreateRequest& r);

// `text` whole if it has at most `max` bytes, else its first `max` bytes (not splitting a
// UTF-8 sequence) and "…(cut, N bytes more)".
std::string cut_for_display(std::string_view text, std::size_t max);

// The SHA-256 of an RFC 9530 Content-Digest header ("sha-256=:<base64>:", possibly among other
// algorithms) as lower-case hex; nullopt without a well-formed sha-256 member.
std::optional<std::string> content_digest_sha256(std::string_view header);

}  // namespace pvs::service
