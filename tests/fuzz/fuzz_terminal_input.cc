// Fuzzes the terminal routes' input: the input items of POST .../input (JSON, key names), and
// key names alone, and the same bytes typed as raw input (TypedLine, what terminal.input judges).
// Whatever the bytes, the parser returns items within the limits or a 4xx ApiError; every
// accepted key name encodes to bytes in a live screen too; typed lines stay within their limit
// and typing in two parts ends where typing at once does.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "http/terminal_requests.h"
#include "policy/typed_line.h"

namespace {

using pvs::fuzz::require;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pvs;
  using namespace pvs::service;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  constexpr std::uint64_t kMax = 4096;
  auto items = parse_terminal_input(text, kMax);
  if (items) {
    require(items->size() <= kMaxInputItems);
    TerminalScreen screen(80, 24, 0);
    std::uint64_t bytes = 0;
    for (const auto& item : *items) {
      if (item.kind == InputItem::Kind::kText) {
        bytes += item.value.size();
        continue;
      }
      auto k = screen.key(item.value);
      require(k.has_value());
      bytes += k->size();
    }
    require(bytes <= kMax);
  } else {
    require(items.error().status == 400 || items.error().status == 413);
    require(!items.error().message.empty());
  }
  // The same bytes as one key name.
  auto key = encode_key(text.substr(0, 64));
  if (!key) require(key.error().code == ErrorCode::kInvalidArgument);
  // Typed as raw bytes: at once, and split in two calls.
  TypedLine once, twice;
  auto all = once.after(text);
  for (const auto& line : all.lines) require(line.size() <= TypedLine::kMaxLine);
  require(all.rest.size() <= TypedLine::kMaxLine && all.escape_seq.size() <= 65);
  auto first = twice.after(text.substr(0, size / 2));
  std::vector<std::string> lines = first.lines;
  twice.commit(std::move(first));
  auto second = twice.after(text.substr(size / 2));
  lines.insert(lines.end(), second.lines.begin(), second.lines.end());
  require(lines == all.lines && second.rest == all.rest);
  return 0;
}
