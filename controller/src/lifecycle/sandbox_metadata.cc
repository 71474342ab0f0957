#include "pvesandbox/sandbox_metadata.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <cctype>
#include <sstream>

#include "pvesandbox/common/text.h"
#include "pvesandbox/volumes.h"

namespace pvs {
namespace {

constexpr std::string_view kMarker = "pve-sandbox:v1 ";
constexpr std::string_view kHeader = "Managed by pve-sandbox; do not edit the next line.";

bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '/' ||
         c == '-';
}

Result<SandboxMetadata::Phase> parse_phase(const std::string& text) {
  for (auto phase : {SandboxMetadata::Phase::kCreating, SandboxMetadata::Phase::kReady,
                     SandboxMetadata::Phase::kDestroying, SandboxMetadata::Phase::kPooled,
                     SandboxMetadata::Phase::kPaused}) {
    if (text == to_string(phase)) return phase;
  }
  return fail(ErrorCode::kInvalidArgument, "unknown phase " + pvs::quoted(text));
}

Poco::JSON::Object encode_allowlist(const EgressList& list, const std::string& name) {
  Poco::JSON::Object o;
  Poco::JSON::Array names, ports;
  for (const auto& n : list.names) names.add(n);
  for (auto p : list.ports) ports.add(static_cast<int>(p));
  o.set("names", names);
  o.set("ports", ports);
  if (!name.empty()) o.set("list", name);
  return o;
}

// "egress": its list (validated) and name, into m.
Status decode_allowlist(const Poco::JSON::Object::Ptr& o, SandboxMetadata& m) {
  if (!o) return fail(ErrorCode::kInvalidArgument, "egress is not an object");
  auto names = o->getArray("names");
  auto ports = o->getArray("ports");
  if (!names || !ports) return fail(ErrorCode::kInvalidArgument, "egress without names or ports");
  EgressList list;
  for (const auto& n : *names) list.names.push_back(n.convert<std::string>());
  for (const auto& p : *ports) {
    int port = p.convert<int>();
    if (port < 1 || port > 65535) return fail(ErrorCode::kInvalidArgument, "bad egress port");
    list.ports.push_back(static_cast<std::uint16_t>(port));
  }
  normalize_egress_list(list);
  if (auto ok = validate_stored_egress_list(list); !ok) return ok;
  m.allowlist = std::move(list);
  if (o->has("list")) {
    m.allowlist_name = o->getValue<std::string>("list");
    if (!valid_egress_list_name(m.allowlist_name))
      return fail(ErrorCode::kInvalidArgument, "bad egress list name");
  }
  m.internet = false;
  return {};
}

}  // namespace

Status validate_labels(const std::map<std::string, std::string>& labels) {
  if (labels.size() > kMaxLabels) {
    return fail(ErrorCode::kInvalidArgument,
                "at most " + std::to_string(kMaxLabels) + " labels are allowed");
  }
  for (const auto& [key, value] : labels) {
    bool ok = !key.empty() && key.size() <= kMaxLabelKey && key[0] != '.' && key[0] != '_' &&
              key[0] != '/' && key[0] != '-';
    for (char c : key) ok = ok && is_key_char(c);
    if (!ok) {
      return fail(ErrorCode::kInvalidArgument,
                  "invalid label key " + pvs::quoted(key) +
                      ": 1-63 characters of a-z 0-9 . _ / -, starting with a letter or digit");
    }
    if (value.size() > kMaxLabelValue) {
      return fail(ErrorCode::kInvalidArgument, "label " + key + ": value longer than 128 bytes");
    }
    for (char c : value) {
      auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u >= 0x7f) {
        return fail(ErrorCode::kInvalidArgument,
                    "label " + key + ": value must be printable ASCII");
      }
    }
  }
  return {};
}

Status validate_client_labels(const std::map<std::string, std::string>& labels) {
  if (auto ok = validate_labels(labels); !ok) return ok;
  for (const auto& [key, value] : labels)
    if (key.starts_with(kReservedLabelPrefix))
      return fail(ErrorCode::kInvalidArgument,
                  "label key " + pvs::quoted(key) + " is reserved: keys under " +
                      std::string(kReservedLabelPrefix) + " are the controller's own");
  return {};
}

std::string_view to_string(SandboxMetadata::Phase phase) {
  switch (phase) {
    case SandboxMetadata::Phase::kCreating: return "creating";
    case SandboxMetadata::Phase::kReady: return "ready";
    case SandboxMetadata::Phase::kDestroying: return "destroying";
    case SandboxMetadata::Phase::kPooled: return "pooled";
    case SandboxMetadata::Phase::kPaused: return "paused";
  }
  return "unknown";
}

Egress egress_of(const SandboxMetadata& m) {
  if (m.allowlist) return Egress{Egress::Mode::kAllowlist, *m.allowlist, m.allowlist_name};
  return m.internet ? Egress::on() : Egress::off();
}

void set_egress(SandboxMetadata& m, const Egress& e) {
  m.internet = e.mode == Egress::Mode::kOn;
  m.allowlist.reset();
  m.allowlist_name.clear();
  if (e.allowlist()) {
    m.allowlist = e.list;
    m.allowlist_name = e.list_name;
  }
}

bool is_sha256_fingerprint(std::string_view fp) {
  constexpr std::string_view kPrefix = "SHA256:";
  if (fp.size() != kPrefix.size() + 43 || fp.substr(0, kPrefix.size()) != kPrefix) return false;
  for (char c : fp.substr(kPrefix.size()))
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/') return false;
  return true;
}

std::string encode_description(const SandboxMetadata& m) {
  Poco::JSON::Object o;
  o.set("id", m.id);
  o.set("vmid", m.vmid);
  o.set("phase", std::string(to_string(m.phase)));
  o.set("created", m.created_at);
  o.set("expires", m.expires_at);
  o.set("internet", m.internet);
  if (m.phase == SandboxMetadata::Phase::kPaused && m.ttl_left > 0) o.set("ttl_left", m.ttl_left);
  if (m.address) o.set("ip", m.address->to_string());
  if (!m.owner.empty()) o.set("owner", m.owner);
  if (!m.host_key.empty()) o.set("host_key", m.host_key);
  if (m.allowlist) o.set("egress", encode_allowlist(*m.allowlist, m.allowlist_name));
  if (m.on_expiry.pause) {
    Poco::JSON::Object e;
    e.set("pause", true);
    if (m.on_expiry.auto_resume) e.set("auto_resume", true);
    e.set("ttl", m.on_expiry.ttl);
    o.set("on_expiry", e);
  }
  if (!m.volumes.empty()) {
    Poco::JSON::Array volumes;
    for (const auto& v : m.volumes) {
      Poco::JSON::Object e;
      e.set("id", v.volume);
      e.set("path", v.path);
      if (v.read_only) e.set("ro", true);
      volumes.add(e);
    }
    o.set("volumes", volumes);
  }
  if (!m.labels.empty()) {
    Poco::JSON::Object labels;
    for (const auto& [k, v] : m.labels) labels.set(k, v);
    o.set("labels", labels);
  }
  std::ostringstream out;
  out << kHeader << '\n' << kMarker;
  o.stringify(out);  // compact, one line: no pretty-printing indent
  return out.str();
}

Result<SandboxMetadata> decode_description(std::string_view description) {
  // The marker must start a line.
  std::size_t pos = 0;
  std::string_view line;
  for (;;) {
    auto found = description.find(kMarker, pos);
    if (found == std::string_view::npos) {
      return fail(ErrorCode::kNotFound, "no pve-sandbox metadata in the description");
    }
    if (found == 0 || description[found - 1] == '\n') {
      auto end = description.find('\n', found);
      line = description.substr(found + kMarker.size(),
                                end == std::string_view::npos ? end : end - found - kMarker.size());
      break;
    }
    pos = found + 1;
  }
  auto damaged = [](const std::string& why) {
    return fail(ErrorCode::kInvalidArgument, "damaged pve-sandbox metadata: " + why);
  };
  try {
    Poco::JSON::Parser parser;
    auto root = parser.parse(std::string(line)).extract<Poco::JSON::Object::Ptr>();
    if (!root) return damaged("not an object");
    SandboxMetadata m;
    m.id = root->getValue<std::string>("id");
    m.vmid = root->getValue<int>("vmid");
    auto phase = parse_phase(root->getValue<std::string>("phase"));
    if (!phase) return damaged(phase.error().message);
    m.phase = *phase;
    m.created_at = root->getValue<std::int64_t>("created");
    m.expires_at = root->getValue<std::int64_t>("expires");
    m.internet = root->getValue<bool>("internet");
    if (root->has("ttl_left")) {
      m.ttl_left = root->getValue<std::int64_t>("ttl_left");
      if (m.ttl_left < 0 || m.phase != SandboxMetadata::Phase::kPaused)
        return damaged("ttl_left on a sandbox that is not paused, or negative");
    }
    if (root->has("ip")) {
      auto ip = Ipv4Address::parse(root->getValue<std::string>("ip"));
      if (!ip) return damaged(ip.error().message);
      m.address = *ip;
    }
    if (root->has("owner")) m.owner = root->getValue<std::string>("owner");
    if (root->has("host_key")) {
      m.host_key = root->getValue<std::string>("host_key");
      if (!is_sha256_fingerprint(m.host_key))
        return damaged("host_key is not a SHA256 fingerprint");
    }
    if (root->has("egress")) {
      if (auto ok = decode_allowlist(root->getObject("egress"), m); !ok)
        return damaged(ok.error().message);
    }
    if (root->has("labels")) {
      auto labels = root->getObject("labels");
      if (!labels) return damaged("labels is not an object");
      for (const auto& [k, v] : *labels) m.labels[k] = v.convert<std::string>();
      if (auto ok = validate_labels(m.labels); !ok) return damaged(ok.error().message);
    }
    if (root->has("on_expiry")) {
      auto e = root->getObject("on_expiry");
      if (!e) return damaged("on_expiry is not an object");
      m.on_expiry.pause = e->optValue<bool>("pause", false);
      m.on_expiry.auto_resume = e->optValue<bool>("auto_resume", false);
      m.on_expiry.ttl = e->optValue<std::int64_t>("ttl", 0);
      if (!m.on_expiry.pause || m.on_expiry.ttl < 0)
        return damaged("on_expiry without pause, or a negative ttl");
    }
    if (root->has("volumes")) {
      auto volumes = root->getArray("volumes");
      if (!volumes) return damaged("volumes is not an array");
      for (std::size_t i = 0; i < volumes->size(); ++i) {
        auto e = volumes->getObject(static_cast<unsigned>(i));
        if (!e) return damaged("a volume is not an object");
        VolumeMount v{e->getValue<std::string>("id"), e->getValue<std::string>("path"),
                      e->optValue<bool>("ro", false)};
        if (!valid_volume_id(v.volume) || !check_mount_path(v.path))
          return damaged("a volume's id or path is not valid");
        m.volumes.push_back(std::move(v));
      }
    }
    if (m.id.empty() || m.vmid < 100) return damaged("missing id or vmid");
    return m;
  } catch (const Poco::Exception& e) {
    return damaged(e.displayText());
  } catch (const std::exception& e) {
    return damaged(e.what());
  }
}

}  // namespace pvs
