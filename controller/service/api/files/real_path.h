// The path a write really goes to: the sandbox resolves symbolic links (SFTP realpath) before
// the policy judges a path, and the write goes to exactly the path judged (#32, finding 7).
//
//   std::string real = real_write_path(*sandbox, *path);   // "/etc/x" for "/tmp/link/x"
//   asked.path = real;  ...  sandbox->upload(real, ...);
#pragma once

#include <string>

#include "pvesandbox/manager.h"

namespace pvs::service {

// `path` (absolute, canonical: validate_path) with its parent directory resolved by the
// sandbox; a parent that does not exist yet is resolved from its nearest existing ancestor.
// The last component is kept as is (an upload replaces a link there, never writes through it).
// Throws an ApiError when the sandbox cannot resolve it.
std::string real_write_path(Sandbox& sandbox, const std::string& path);
// An existing file's path with every link resolved (files/edit reads and writes the target).
std::string real_file_path(Sandbox& sandbox, const std::string& path);

}  // namespace pvs::service
