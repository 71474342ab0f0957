// The edit of POST /v1/sandboxes/{id}/files/edit and the MCP tool edit_file, as pure functions:
// replace an exact string that must occur once (or every occurrence with replace_all), and a
// short unified diff of what changed. Nothing here does I/O; the handler reads the file, calls
// apply_edit and writes the result back atomically.
//
//   auto r = apply_edit(content, {.old_string = "x = 1", .new_string = "x = 2"});
//   if (!r) return r.error().message;          // "old_string not found in the file", ...
//   write(r->content); show(unified_diff(path, content, *r));
//
// Line endings: when the file uses CRLF and old_string (with "\n" line ends) is not found as
// given, it is matched with "\r\n" line ends and new_string is written with them too, so an edit
// made from a view without '\r' keeps the file's line endings.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace pvs::service {

// The largest file an edit (or the MCP read_file tool) reads whole.
inline constexpr std::size_t kMaxEditFileBytes = 10 << 20;

struct EditSpec {
  std::string old_string;
  std::string new_string;
  bool replace_all = false;
};

struct EditError {
  enum class Kind {
    kEmptyOld,   // old_string is empty
    kSame,       // old_string == new_string
    kBinary,     // the file holds NUL bytes
    kNotFound,   // old_string occurs nowhere
    kAmbiguous,  // more than once, without replace_all
  };
  Kind kind = Kind::kNotFound;
  std::size_t occurrences = 0;
  std::string message;  // for people and models: says what to do next
};

struct EditResult {
  std::string content;               // the new file
  std::size_t replaced = 0;          // occurrences replaced
  std::vector<std::size_t> offsets;  // where each old occurrence started (old content)
  std::size_t old_length = 0;        // of the matched text (CRLF-adjusted)
  std::string new_text;              // what replaced each (CRLF-adjusted)
  bool crlf = false;                 // matched by turning "\n" into "\r\n"
};

// True when `content` looks binary (a NUL byte anywhere).
bool looks_binary(std::string_view content);

tl::expected<EditResult, EditError> apply_edit(std::string_view content, const EditSpec& spec);

struct DiffOptions {
  std::size_t context = 3;           // unchanged lines around each change
  std::size_t max_bytes = 4096;      // the diff is cut beyond this ("... diff cut")
  std::size_t max_line_bytes = 240;  // longer lines are shortened
};

// A unified diff ("--- path", "+++ path", "@@ -a,b +c,d @@" hunks) of an applied edit: the old
// and new lines of each change with `context` lines around them; overlapping hunks merge.
// Lines are shown without their '\r'.
std::string unified_diff(std::string_view path, std::string_view old_content,
                         const EditResult& edit, const DiffOptions& options = {});

}  // namespace pvs::service
