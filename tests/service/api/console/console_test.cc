// The web console's static files (console.h): what is embedded, content types, the security
// headers, and that nothing but an embedded name is ever served. console_http_test.cc checks
// the same through the HTTP server.
#include "api/console/console.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace pvs::service {
namespace {

TEST(Console, EmbedsTheConsoleAndXterm) {
  std::set<std::string> names;
  for (const auto& a : console_assets()) {
    names.emplace(a.path);
    EXPECT_FALSE(a.body.empty()) << a.path;
    EXPECT_EQ(a.path.find(".."), std::string_view::npos) << a.path;
    EXPECT_NE(a.path.front(), '/') << a.path;
  }
  for (const char* want : {"index.html", "console.css", "js/main.js", "js/api.js", "js/terminal.js",
                           "js/audit.js", "vendor/xterm/xterm.js", "vendor/xterm/xterm.css",
                           "vendor/xterm/addon-fit.js", "vendor/xterm/LICENSE.txt"})
    EXPECT_TRUE(names.count(want)) << want;
  // Only what a browser loads: no package manifests, lock files or licenses without extension.
  for (const auto& n : names) {
    EXPECT_EQ(n.find("package"), std::string::npos) << n;
  }
}

TEST(Console, ContentTypesByExtension) {
  EXPECT_EQ(console_content_type("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(console_content_type("a/b.css"), "text/css; charset=utf-8");
  EXPECT_EQ(console_content_type("js/main.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(console_content_type("x.mjs"), "text/javascript; charset=utf-8");
  EXPECT_EQ(console_content_type("i.svg"), "image/svg+xml");
  EXPECT_EQ(console_content_type("i.png"), "image/png");
  EXPECT_EQ(console_content_type("LICENSE"), "application/octet-stream");
  EXPECT_EQ(console_content_type("dir.js/LICENSE"), "application/octet-stream");
  EXPECT_EQ(console_content_type("x.exe"), "application/octet-stream");
}

TEST(Console, LookupServesExactNamesOnly) {
  auto index = console_lookup("/ui/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.content_type, "text/html; charset=utf-8");
  EXPECT_NE(index.body.find("<title>pve-sandbox console</title>"), std::string_view::npos);
  EXPECT_EQ(console_lookup("/ui/index.html").body, index.body);
  auto js = console_lookup("/ui/js/main.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");

  auto redirect = console_lookup("/ui");
  EXPECT_EQ(redirect.status, 308);
  EXPECT_EQ(redirect.location, "/ui/");

  // Traversal and lookalikes reach nothing: names are looked up, never joined to a directory.
  for (const char* path : {"/ui/../etc/passwd",
                           "/ui/../../etc/passwd",
                           "/ui/js/../index.html",
                           "/ui/./index.html",
                           "/ui//index.html",
                           "/ui/js//main.js",
                           "/ui/js/",
                           "/ui/js",
                           "/ui/vendor/xterm/",
                           "/ui/..%2fetc%2fpasswd",
                           "/ui/%2e%2e/etc/passwd",
                           "/ui\\..\\etc\\passwd",
                           "/ui/js\\main.js",
                           "/ui/index.html/",
                           "/ui/index.html%00.js",
                           "/ui/vendor/xterm/package.json",
                           "/ui/vendor/xterm/LICENSE",
                           "/ui/INDEX.HTML",
                           "/ui/index.html?x",
                           "/uix/index.html",
                           "/v1/../ui/index.html",
                           "/etc/passwd",
                           ""}) {
    auto r = console_lookup(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_TRUE(r.body.empty()) << path;
  }
  EXPECT_EQ(console_lookup(std::string_view("/ui/index.html\0x", 16)).status, 404);
}

TEST(Console, PathsThatBelongToTheConsole) {
  EXPECT_TRUE(is_console_path("/ui"));
  EXPECT_TRUE(is_console_path("/ui/"));
  EXPECT_TRUE(is_console_path("/ui/../v1/sandboxes"));  // then a 404, never the API
  EXPECT_FALSE(is_console_path("/uix"));
  EXPECT_FALSE(is_console_path("/v1/sandboxes"));
  EXPECT_FALSE(is_console_path("/metrics"));
}

TEST(Console, StrictSecurityHeaders) {
  std::string csp;
  std::set<std::string> names;
  for (const auto& [k, v] : console_headers()) {
    names.emplace(k);
    if (k == "Content-Security-Policy") csp = v;
  }
  for (const char* want : {"default-src 'self'", "script-src 'self'", "style-src 'self'",
                           "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"})
    EXPECT_NE(csp.find(want), std::string::npos) << want;
  EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;  // no unsafe-inline / unsafe-eval
  EXPECT_EQ(csp.find('*'), std::string::npos) << csp;
  for (const char* want : {"X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy"})
    EXPECT_TRUE(names.count(want)) << want;
}

// The console's own files keep to the CSP and to escaping: no inline scripts or styles in the
// page, no innerHTML / outerHTML / insertAdjacentHTML / document.write / eval in its scripts.
TEST(Console, NoInlineCodeAndNoHtmlSinks) {
  auto index = std::string(console_lookup("/ui/").body);
  EXPECT_EQ(index.find("<style"), std::string::npos);
  EXPECT_EQ(index.find("style="), std::string::npos);
  EXPECT_FALSE(std::regex_search(index, std::regex(R"(<[^>]*\son[a-z]+\s*=)", std::regex::icase)))
      << "an inline event handler";
  std::size_t pos = 0;
  while ((pos = index.find("<script", pos)) != std::string::npos) {
    auto end = index.find('>', pos);
    EXPECT_NE(index.substr(pos, end - pos).find("src="), std::string::npos) << "inline script";
    EXPECT_EQ(index.compare(end + 1, 9, "</script>"), 0) << "a script with a body";
    pos = end;
  }
  for (const auto& a : console_assets()) {
    if (a.path.rfind("js/", 0) != 0) continue;
    for (const char* sink : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write",
                             "eval(", "new Function"})
      EXPECT_EQ(a.body.find(sink), std::string_view::npos) << a.path << ": " << sink;
  }
}

}  // namespace
}  // namespace pvs::service
