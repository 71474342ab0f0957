#include "pvesandbox/version.h"

namespace pvs {

std::string_view version() {
  return PVS_VERSION;
}

}  // namespace pvs
