// The web console (/ui/): static files compiled into the controller (controller/console/,
// embedded by embed_console.cmake), looked up by exact name, served with a strict
// Content-Security-Policy. docs/console.md describes the views and the security model.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace pvs::service {

// One embedded file: its path below /ui/ ("index.html", "js/main.js") and its bytes.
struct ConsoleAsset {
  std::string_view path;
  std::string_view body;
};
// Every file of controller/console/ (generated at build time).
std::span<const ConsoleAsset> console_assets();

// The Content-Type of a file name by its extension (application/octet-stream when unknown).
std::string_view console_content_type(std::string_view name);

// What a GET of `path` (the request's path, percent-decoded) answers: 200 with a file, 308 to
// "/ui/" for "/ui", or 404. Only names in console_assets() are served: a path is never joined
// to a directory, so "..", "//", backslashes or encoded separators reach nothing.
struct ConsoleReply {
  int status = 404;
  std::string_view content_type;
  std::string_view body;
  std::string location;  // for 308
};
ConsoleReply console_lookup(std::string_view path);

// Headers on every /ui/ reply (CSP, nosniff, framing, referrer, caching).
std::span<const std::pair<std::string_view, std::string_view>> console_headers();

// Whether a request path belongs to the console: "/ui" or below "/ui/".
bool is_console_path(std::string_view path);

}  // namespace pvs::service
