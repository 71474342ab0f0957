// Fuzzes what E2B's template build calls (controller/service/e2b/templates) take from a client:
// the request and start bodies, the status query, the uploaded archive (gzip or not) and the
// mapping of steps onto a recipe, with the input as every COPY step's archive. Whatever the
// bytes, a parser returns a value or a 400/413/429 with a message; a mapped build is a recipe
// that parse_recipe accepts again (its canonical form is stable); archive entries are relative
// and never hold "..".
//
// Input: the first byte picks the target, the rest is its input.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "e2b/control_wire.h"
#include "e2b/templates/tar_reader.h"
#include "e2b/templates/template_wire.h"
#include "fuzz_check.h"

namespace {

using namespace pvs::service::e2b;
using pvs::fuzz::require;
using pvs::fuzz::valid_json;

template <typename R>
void check_error(const R& r) {
  if (r) return;
  require(!r.error().message.empty());
  require(r.error().status == 400 || r.error().status == 413);
  require(valid_json(e2b_error_body(r.error())));
}

void fuzz_archive(std::string_view input) {
  auto r = read_upload_tar(input, {16, 1 << 16});
  check_error(r);
  if (!r) return;
  for (const auto& e : *r) {
    require(!e.path.empty() && e.path[0] != '/');
    require(("/" + e.path + "/").find("/../") == std::string::npos);
    require(e.mode <= 07777);
  }
}

void fuzz_start(std::string_view input) {
  auto s = parse_build_start(input);
  check_error(s);
  if (!s) return;
  require(s->steps.size() <= kMaxBuildSteps);
  std::string archive(input);
  auto m = map_build("fuzz", *s, [&](const std::string&) { return archive; });
  check_error(m);
  if (!m) return;
  require(m->recipe.name == "fuzz");
  require(m->recipe.files.size() <= pvs::kMaxRecipeFiles);
  require(m->recipe.digest().size() == 64);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0: {
      auto r = parse_build_request(input);
      check_error(r);
      if (r) require(valid_json(build_request_reply(r->name, "b")));
      break;
    }
    case 1: fuzz_start(input); break;
    case 2: fuzz_archive(input); break;
    case 3: {
      auto eq = input.find('=');
      std::multimap<std::string, std::string> q;
      q.emplace(std::string(input.substr(0, eq)),
                eq == std::string_view::npos ? "" : std::string(input.substr(eq + 1)));
      auto r = parse_status_query(q);
      check_error(r);
      if (r) require(r->limit >= 1 && r->limit <= 100);
      break;
    }
  }
  return 0;
}
