#include "resolver_config.h"

#include <fstream>
#include <sstream>

#include "pvesandbox/common/io.h"
#include "pvesandbox/common/yaml_reader.h"

namespace pvs::resolver {

Result<ResolverConfig> parse_config(std::string_view text, std::string_view source) {
  auto doc = yaml::Document::parse(text, source);
  if (!doc) return fail(doc.error());
  ResolverConfig c;
  yaml::Map m = doc->root();
  std::string listen, cidr;
  std::vector<std::string> upstreams;
  m.string("listen", &listen, yaml::Need::kRequired);
  m.integer("port", &c.port, 1, 65535);
  m.string("sandbox_cidr", &cidr, yaml::Need::kRequired);
  m.string_list("upstreams", &upstreams);
  m.string("agent_socket", &c.agent_socket);
  m.integer("upstream_timeout_ms", &c.upstream_timeout_ms, 10, 60'000);
  std::uint32_t workers = 0;  // before #32: threads; one event loop now, the key is ignored
  m.integer("workers", &workers, 1, 64);
  m.integer("agent_connections", &c.agent_connections, 1, 64);
  m.integer("max_inflight", &c.max_inflight, 1, 100'000);
  m.integer("max_inflight_per_source", &c.max_inflight_per_source, 1, 100'000);
  m.integer("max_queued_per_source", &c.max_queued_per_source, 0, 100'000);
  m.integer("max_tcp_clients", &c.max_tcp_clients, 1, 100'000);
  m.integer("max_tcp_per_source", &c.max_tcp_per_source, 1, 100'000);
  m.integer("max_answer_ttl", &c.max_answer_ttl, 0, 604'800);
  m.integer("queries_per_second", &c.queries_per_second, 0, 1'000'000);
  m.one_of("log_level", &c.log_level, {"debug", "info", "warn", "error"});
  m.boolean("egress_log", &c.egress_log);
  m.integer("egress_log_window_ms", &c.egress_log_window_ms, 100, 3'600'000);
  m.integer("egress_log_max_names", &c.egress_log_max_names, 1, 1024);
  m.integer("egress_log_max_sources", &c.egress_log_max_sources, 1, 65536);
  if (m.ok()) {
    if (auto a = Ipv4Address::parse(listen); a) {
      c.listen = *a;
    } else {
      m.fail("listen", a.error().message);
    }
  }
  if (m.ok()) {
    if (auto n = Cidr::parse(cidr); n) {
      c.sandbox_cidr = *n;
    } else {
      m.fail("sandbox_cidr", n.error().message);
    }
  }
  // A per-source cap above its total is an error when written, and follows the total when the
  // default is in effect (a small max_tcp_clients from before #32 stays valid).
  if (m.ok() && c.max_inflight_per_source > c.max_inflight) {
    if (m.has("max_inflight_per_source")) {
      m.fail("max_inflight_per_source", "must not exceed max_inflight");
    }
    c.max_inflight_per_source = c.max_inflight;
  }
  if (m.ok() && c.max_tcp_per_source > c.max_tcp_clients) {
    if (m.has("max_tcp_per_source")) {
      m.fail("max_tcp_per_source", "must not exceed max_tcp_clients");
    }
    c.max_tcp_per_source = c.max_tcp_clients;
  }
  if (m.ok() && upstreams.empty()) m.fail("upstreams", "at least one upstream resolver is needed");
  for (const auto& u : upstreams) {
    if (!m.ok()) break;
    auto colon = u.find(':');
    auto a = Ipv4Address::parse(std::string_view(u).substr(0, colon));
    if (!a) {
      m.fail("upstreams", a.error().message);
      break;
    }
    long port = 53;
    if (colon != std::string::npos) {
      std::string p = u.substr(colon + 1);
      char* end = nullptr;
      port = p.empty() ? 0 : std::strtol(p.c_str(), &end, 10);
      if (p.empty() || *end != '\0' || port < 1 || port > 65535) {
        m.fail("upstreams", "invalid port in " + yaml::quoted_value(u));
        break;
      }
    }
    c.upstreams.emplace_back(*a, static_cast<std::uint16_t>(port));
  }
  if (auto st = m.finish(); !st) return fail(st.error());
  return c;
}

Result<ResolverConfig> load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(errno_error(path, errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

}  // namespace pvs::resolver
