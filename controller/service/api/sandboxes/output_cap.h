// Output caps that count what is sent, not what was read: JSON escaping can turn one byte of
// output into six ("\u0001"), so 16 MiB of control bytes would become ~96 MiB of reply.
//
//   std::size_t kept = append_json_string_capped(out, result.out, 16 << 20);
//   bool truncated = kept < result.out.size();
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pvs::service {

// Appends `text` to `out` as a JSON string literal (as append_json_string does: escapes, invalid
// UTF-8 as U+FFFD) of at most `max_encoded` bytes including its quotes, cut at a character
// boundary. Returns how many bytes of `text` it encoded (text.size() when nothing was cut).
std::size_t append_json_string_capped(std::string& out, std::string_view text,
                                      std::size_t max_encoded);

// What a capped exec stream kept (ExecResult::out / err: the first cap/2 and the last
// cap - cap/2 bytes when the command wrote `total` > cap), with a line where the middle was
// left out: "\n[... 123456 bytes left out ...]\n". Unchanged when nothing was left out.
std::string mark_omitted(std::string_view kept, std::uint64_t total, std::size_t cap);

}  // namespace pvs::service
