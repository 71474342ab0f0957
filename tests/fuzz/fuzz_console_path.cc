// Fuzzes the web console's static lookup (controller/service/api/console/console.h) with request
// paths as the server sees them: raw and percent-decoded as Poco::URI decodes them. Whatever the
// bytes, the answer is a 200 whose bytes are exactly one embedded file, the 308 of "/ui", or a 404
// with nothing; a 200 only ever answers a path that is "/ui/" plus an embedded name (or
// "/ui/" itself for index.html), so no path can reach anything else.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <Poco/Exception.h>
#include <Poco/URI.h>

#include "api/console/console.h"
#include "fuzz_check.h"

namespace {

using namespace pvs::service;

using pvs::fuzz::require;

void check(std::string_view path) {
  ConsoleReply r = console_lookup(path);
  require(r.status == 200 || r.status == 308 || r.status == 404);
  if (r.status == 308) {
    require(path == "/ui" && r.location == "/ui/");
    return;
  }
  if (r.status == 404) {
    require(r.body.empty());
    return;
  }
  require(path.rfind("/ui/", 0) == 0);
  std::string_view name = path.substr(4);
  if (name.empty()) name = "index.html";
  bool found = false;
  for (const auto& a : console_assets()) {
    if (a.path == name) {
      require(a.body.data() == r.body.data() && a.body.size() == r.body.size());
      found = true;
    }
  }
  require(found);
  require(name.find("..") == std::string_view::npos && name.find("//") == std::string_view::npos);
  require(r.content_type == console_content_type(name));
  require(is_console_path(path));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  check(input);
  check("/ui/" + input);
  try {
    check(Poco::URI(input).getPath());
    check(Poco::URI("/ui/" + input).getPath());
  } catch (const Poco::Exception&) {
    // a malformed URI is a 400 before any lookup
  }
  return 0;
}
