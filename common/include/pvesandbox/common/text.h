// Small helpers for handling untrusted text.
#pragma once

#include <string>
#include <string_view>

namespace pvs {

// Quotes untrusted text for an error or log message: printable ASCII as is, every other byte
// (and `"`, `\`) as \xNN, cut after `max` bytes with "..." so that a 64 KiB line does not become
// a 64 KiB message.
std::string quoted(std::string_view text, std::size_t max = 64);

// `text` with ASCII A-Z lower-cased and every other byte kept (header names, host names).
std::string ascii_lower(std::string_view text);

// How terminal_safe writes what a terminal would act on instead of showing.
enum class TerminalText {
  kLine,   // one line: every control, \n and \t too, as a visible escape
  kLines,  // lines (a diff): \n and \t kept, every other control escaped
  kJson,   // a JSON document: the same characters as JSON \uXXXX escapes (still valid JSON)
};

// Untrusted UTF-8 text (an agent's command, a label, a server's message) made safe to print on
// a person's terminal: C0 controls, DEL, C1 controls and Unicode format characters (category
// Cf: bidi overrides and isolates, zero-width characters, the BOM, tag characters; and the line
// and paragraph separators U+2028/2029) become visible escapes: kLine/kLines write \x1b for C0
// and DEL (\n, \r, \t for those three), \u202e for the others; a byte that is not valid UTF-8
// is \xNN. Everything else, backslashes included, is kept as is.
std::string terminal_safe(std::string_view text, TerminalText how = TerminalText::kLine);

}  // namespace pvs
