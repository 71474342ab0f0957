#include "api/files/real_path.h"

#include "http/api_error.h"

namespace pvs::service {
namespace {

std::string join(const std::string& dir, const std::string& rest) {
  if (rest.empty()) return dir;
  return (dir == "/" ? "" : dir) + "/" + rest;
}

}  // namespace

std::string real_write_path(Sandbox& sandbox, const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos || slash + 1 == path.size())
    throw bad_request("path: must name a file");
  std::string base = path.substr(slash + 1);
  std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  std::string missing;  // components below the nearest existing ancestor
  for (;;) {
    auto real = sandbox.realpath(dir);
    if (real && !real->empty() && real->front() == '/') return join(join(*real, missing), base);
    // Not there (or nothing resolved): the nearest existing ancestor decides.
    if (real && dir == "/") throw bad_request("path: the sandbox did not resolve /");
    // A directory that is not there yet (create_parents makes it) does not resolve: the
    // nearest ancestor that does decides. OpenSSH reports such a directory not only as "no such
    // file" but also as a plain failure; only "/" failing is an error.
    if (!real && dir == "/") throw from_error(real.error());
    auto up = dir.find_last_of('/');
    missing = join(dir.substr(up + 1), missing);
    dir = up == 0 ? "/" : dir.substr(0, up);
  }
}

std::string real_file_path(Sandbox& sandbox, const std::string& path) {
  auto real = sandbox.realpath(path);
  if (!real) throw from_error(real.error());
  return *real;
}

}  // namespace pvs::service
