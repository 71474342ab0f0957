#include "resolver_limits.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "pvesandbox/common/io.h"
#include "pvesandbox/common/yaml_reader.h"

namespace pvs::resolver {
namespace {

constexpr std::string_view kUnit = "pve-sandbox-resolver.service";

std::optional<std::uint64_t> number(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  std::uint64_t v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  return v;
}

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return "";
  auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace

Result<UnitLimits> read_unit_limits(const std::vector<std::string>& paths) {
  UnitLimits limits;
  for (const auto& path : paths) {
    std::ifstream in(path);
    if (!in) return fail(errno_error(path, errno));
    std::string line;
    while (std::getline(in, line)) {
      auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string key = trim(std::string_view(line).substr(0, eq));
      std::string value = trim(std::string_view(line).substr(eq + 1));
      if (key == "TasksMax") {
        // infinity, a percentage (of the kernel's limit) or empty: no fixed bound to check.
        limits.tasks_max = number(value);
      } else if (key == "LimitNOFILE") {
        limits.nofile = number(value.substr(0, value.find(':')));  // soft[:hard]
      }
    }
  }
  return limits;
}

std::vector<std::string> installed_unit_files() {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  for (const char* dir :
       {"/lib/systemd/system/", "/usr/lib/systemd/system/", "/etc/systemd/system/"}) {
    fs::path unit = fs::path(dir) / kUnit;
    if (fs::is_regular_file(unit, ec)) out.push_back(unit.string());
  }
  std::vector<std::string> dropins;
  for (const char* dir : {"/lib/systemd/system/", "/usr/lib/systemd/system/",
                          "/etc/systemd/system/", "/run/systemd/system/"}) {
    fs::path d = fs::path(dir) / (std::string(kUnit) + ".d");
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      if (e.path().extension() == ".conf") dropins.push_back(e.path().string());
    }
  }
  // systemd applies drop-ins in the order of their file names.
  std::sort(dropins.begin(), dropins.end(), [](const std::string& a, const std::string& b) {
    return fs::path(a).filename() < fs::path(b).filename();
  });
  out.insert(out.end(), dropins.begin(), dropins.end());
  return out;
}

Result<std::uint64_t> read_agent_max_clients(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(errno_error(path, errno));
  std::ostringstream text;
  text << in.rdbuf();
  auto doc = yaml::Document::parse(text.str(), path);
  if (!doc) return fail(doc.error());
  yaml::Map m = doc->root();
  std::uint64_t max_clients = 64;  // the agent's default (hostagent/src/config.h)
  m.integer("max_clients", &max_clients, 1, 10'000);
  if (!m.ok()) return fail(ErrorCode::kInvalidArgument, path + ": max_clients is not valid");
  return max_clients;
}

std::uint64_t fds_needed(const ResolverConfig& config) {
  // stdio, udp, tcp listener, the TCP clients, the agent connections, one udp and one tcp socket
  // per upstream (c-ares), and a margin for the libraries.
  return 3 + 2 + config.max_tcp_clients + config.agent_connections + 2 * config.upstreams.size() +
         16;
}

Status check_limits(const ResolverConfig& config, const UnitLimits& unit,
                    std::optional<std::uint64_t> agent_max_clients) {
  if (unit.tasks_max && *unit.tasks_max < kThreads) {
    return fail(ErrorCode::kInvalidArgument, "TasksMax=" + std::to_string(*unit.tasks_max) +
                                                 " is below the resolver's " +
                                                 std::to_string(kThreads) + " threads");
  }
  if (unit.nofile && fds_needed(config) > *unit.nofile) {
    return fail(ErrorCode::kInvalidArgument,
                "max_tcp_clients " + std::to_string(config.max_tcp_clients) + " needs " +
                    std::to_string(fds_needed(config)) +
                    " file descriptors, LimitNOFILE=" + std::to_string(*unit.nofile));
  }
  if (agent_max_clients && 2 * std::uint64_t{config.agent_connections} > *agent_max_clients) {
    return fail(ErrorCode::kInvalidArgument, "agent_connections " +
                                                 std::to_string(config.agent_connections) +
                                                 " is more than half of the agent's max_clients " +
                                                 std::to_string(*agent_max_clients));
  }
  return {};
}

}  // namespace pvs::resolver
