#include "e2b/control_wire.h"

#include "core/observability/audit.h"
#include "http/json.h"

namespace pvs::service::e2b {
namespace {

void write_common(JsonWriter& w, const SandboxView& s) {
  w.key("templateID")
      .value(s.template_id)
      .key("sandboxID")
      .value(s.id)
      .key("clientID")
      .value(s.client_id);
}

void write_times_and_size(JsonWriter& w, const SandboxView& s) {
  w.key("startedAt")
      .value(format_rfc3339_ms(s.started_at * 1000))
      .key("endAt")
      .value(format_rfc3339_ms(s.end_at * 1000))
      .key("cpuCount")
      .value(s.cpus)
      .key("memoryMB")
      .value(s.memory_mb)
      .key("diskSizeMB")
      .value(s.disk_mb)
      .key("metadata")
      .value(s.metadata)
      .key("state")
      .value(s.paused ? "paused" : "running")
      .key("envdVersion")
      .value(kEnvdVersion)
      .key("lifecycle")
      .begin_object()
      .key("autoResume")
      .value(s.auto_resume)
      .key("onTimeout")
      .value(s.pause_on_timeout ? "pause" : "kill")
      .end_object();
}

void write_mounts(JsonWriter& w, const SandboxView& s) {
  w.key("volumeMounts").begin_array();
  for (const auto& [name, path] : s.volume_mounts)
    w.begin_object().key("name").value(name).key("path").value(path).end_object();
  w.end_array();
}

}  // namespace

std::string e2b_error_body(const ApiError& error) {
  JsonWriter w;
  w.begin_object().key("code").value(error.status).key("message").value(error.message).end_object();
  return w.take();
}

std::string sandbox_reply(const SandboxView& s) {
  JsonWriter w;
  w.begin_object();
  write_common(w, s);
  w.key("envdVersion")
      .value(kEnvdVersion)
      .key("envdAccessToken")
      .value(s.access_token)
      .key("trafficAccessToken");
  if (s.traffic_token.empty())
    w.null();
  else
    w.value(s.traffic_token);
  w.key("domain");
  if (s.domain)
    w.value(*s.domain);
  else
    w.null();
  w.end_object();
  return w.take();
}

std::string detail_reply(const SandboxView& s) {
  JsonWriter w;
  w.begin_object();
  write_common(w, s);
  write_times_and_size(w, s);
  w.key("envdAccessToken").value(s.access_token).key("allowInternetAccess");
  if (s.allow_internet)
    w.value(*s.allow_internet);
  else
    w.null();
  w.key("domain");
  if (s.domain)
    w.value(*s.domain);
  else
    w.null();
  if (!s.allow_out.empty()) {
    w.key("network").begin_object().key("allowOut").begin_array();
    for (const auto& n : s.allow_out) w.value(n);
    w.end_array().key("denyOut").begin_array().value("0.0.0.0/0").end_array().end_object();
  }
  write_mounts(w, s);
  w.end_object();
  return w.take();
}

std::string list_reply(const std::vector<SandboxView>& sandboxes) {
  JsonWriter w;
  w.begin_array();
  for (const auto& s : sandboxes) {
    w.begin_object();
    write_common(w, s);
    write_times_and_size(w, s);
    write_mounts(w, s);
    w.end_object();
  }
  w.end_array();
  return w.take();
}

std::string metrics_reply(const std::vector<MetricView>& metrics) {
  JsonWriter w;
  w.begin_array();
  for (const auto& m : metrics) {
    w.begin_object()
        .key("timestamp")
        .value(format_rfc3339_ms(m.timestamp * 1000))
        .key("timestampUnix")
        .value(m.timestamp)
        .key("cpuCount")
        .value(m.cpus)
        .key("cpuUsedPct")
        .value(m.cpu_used_pct)
        .key("memUsed")
        .value(m.mem_used)
        .key("memTotal")
        .value(m.mem_total)
        .key("memCache")
        .value(m.mem_cache)
        .key("diskUsed")
        .value(m.disk_used)
        .key("diskTotal")
        .value(m.disk_total)
        .end_object();
  }
  w.end_array();
  return w.take();
}

}  // namespace pvs::service::e2b
