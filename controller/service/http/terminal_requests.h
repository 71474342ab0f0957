// The terminal routes' request bodies, parsed and validated (routes_terminals.cc uses them;
// fuzz_terminal_input fuzzes the input items).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/config.h"
#include "http/api_error.h"
#include "pvesandbox/terminal.h"

namespace pvs::service {

inline constexpr std::size_t kMaxInputItems = 1024;
inline constexpr std::size_t kMaxWaitPattern = 1024;

// POST /v1/sandboxes/{id}/terminals: {"command", "cols", "rows", "env", "cwd"}, all optional.
struct TerminalCreateRequest {
  std::string command;  // empty: the login shell
  int cols = 80;
  int rows = 24;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
};

// POST .../wait: {"pattern", "quiet_ms", "timeout_ms", "scrollback"}.
struct TerminalWaitRequest {
  std::string pattern;              // empty: none
  std::optional<std::regex> regex;  // compiled pattern
  int quiet_ms = 0;
  int timeout_ms = 10000;  // capped at terminals.max_wait_seconds
  int scrollback = 0;
};

ApiResult<TerminalCreateRequest> parse_terminal_create(std::string_view body);
// {"cols": n, "rows": n}
ApiResult<std::pair<int, int>> parse_terminal_resize(std::string_view body);
// {"input": [{"text": "ls"}, {"key": "Enter"}, ...]}: every key name checked (400 naming an
// unknown one), the text and the encoded keys together at most max_input_bytes (413).
ApiResult<std::vector<InputItem>> parse_terminal_input(std::string_view body,
                                                       std::uint64_t max_input_bytes);
ApiResult<TerminalWaitRequest> parse_terminal_wait(std::string_view body, int max_wait_seconds);
// The `scrollback` query parameter of GET .../screen: decimal 0..100000; empty: 0.
ApiResult<int> parse_scrollback(std::string_view text);

}  // namespace pvs::service
