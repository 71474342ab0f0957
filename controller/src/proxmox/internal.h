// Internals shared by the Proxmox client's source files.
#pragma once

#include <Poco/Dynamic/Var.h>

#include <string>
#include <string_view>

#include "pvesandbox/proxmox_client.h"

namespace pvs::pve {

// The Proxmox detail of an error made by make_error (always there).
inline ProxmoxDetail& detail(Error& error) {
  if (!error.proxmox) error.proxmox = ProxmoxDetail{};
  return *error.proxmox;
}

// Percent-encodes everything but RFC 3986 unreserved characters: for path segments and for
// form/query values alike.
std::string url_encode(std::string_view in);

struct ClientAccess {
  // One API call with retries; returns the envelope's "data" (and "total" if asked).
  static Result<Poco::Dynamic::Var> request(Client& client, std::string_view method,
                                            std::string_view path, const Params& params,
                                            int* total);
};

}  // namespace pvs::pve
