// The usage samples' JSON (usage_view.h).
#include "api/sandboxes/usage_view.h"

#include "http/json.h"

namespace pvs::service {

std::string usage_json(const std::vector<UsageSample>& samples) {
  JsonWriter w;
  w.begin_object().key("samples").begin_array();
  for (const auto& s : samples) {
    w.begin_object()
        .key("time")
        .value(s.time)
        .key("cpu")
        .value(s.cpu)
        .key("cpus")
        .value(s.cpus)
        .key("mem")
        .value(s.mem)
        .key("maxmem")
        .value(s.maxmem)
        .key("disk")
        .value(s.disk)
        .key("maxdisk")
        .value(s.maxdisk)
        .key("live")
        .value(s.live)
        .end_object();
  }
  w.end_array().end_object();
  return w.take();
}

}  // namespace pvs::service
