#include "api/console/console.h"

#include <array>

namespace pvs::service {

namespace {

constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
    {".html", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".json", "application/json"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"},
};

// No inline script or style anywhere (scripts and stylesheets are files from /ui/), nothing
// from other origins, no framing, no plugins, no <base>, no form posts.
constexpr std::string_view kCsp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kHeaders = {{
    {"Content-Security-Policy", kCsp},
    {"X-Content-Type-Options", "nosniff"},
    {"X-Frame-Options", "DENY"},
    {"Referrer-Policy", "no-referrer"},
    // A window that opens the console keeps no handle on it. It costs a browsing context
    // group switch (about 30 ms of first paint, tests/bench/console), worth paying.
    {"Cross-Origin-Opener-Policy", "same-origin"},
    {"Cross-Origin-Resource-Policy", "same-origin"},
    {"Cache-Control", "no-cache"},
}};

}  // namespace

std::string_view console_content_type(std::string_view name) {
  auto slash = name.rfind('/');
  auto dot = name.rfind('.');
  if (dot == std::string_view::npos || (slash != std::string_view::npos && dot < slash))
    return "application/octet-stream";
  std::string_view ext = name.substr(dot);
  for (const auto& [e, type] : kTypes)
    if (e == ext) return type;
  return "application/octet-stream";
}

bool is_console_path(std::string_view path) {
  return path == "/ui" || path.rfind("/ui/", 0) == 0;
}

ConsoleReply console_lookup(std::string_view path) {
  ConsoleReply r;
  if (path == "/ui") {
    r.status = 308;
    r.location = "/ui/";
    return r;
  }
  if (path.rfind("/ui/", 0) != 0) return r;
  std::string_view name = path.substr(4);
  if (name.empty()) name = "index.html";
  for (const auto& asset : console_assets()) {
    if (asset.path == name) {
      r.status = 200;
      r.content_type = console_content_type(name);
      r.body = asset.body;
      return r;
    }
  }
  return r;
}

std::span<const std::pair<std::string_view, std::string_view>> console_headers() {
  return kHeaders;
}

}  // namespace pvs::service
