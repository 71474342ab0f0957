// The typed Proxmox API calls: paths, parameters and answer decoding.
#include <cctype>
#include <chrono>
#include <optional>
#include <thread>

#include "proxmox/decode.h"
#include "proxmox/internal.h"
#include "pvesandbox/proxmox_client.h"

namespace pvs::pve {

namespace {

using Poco::Dynamic::Var;

std::string ct_path(std::string_view node, int vmid, std::string_view rest = "") {
  return "/nodes/" + url_encode(node) + "/lxc/" + std::to_string(vmid) + std::string(rest);
}

Result<std::string> upid_of(Result<Var> data) {
  if (!data) return tl::unexpected(data.error());
  return decode::upid(*data);
}

// The data of a call, decoded by `decoder` (one of decode.h's).
template <typename Decoder>
auto decoded(Result<Var> data, Decoder decoder) -> decltype(decoder(*data)) {
  if (!data) return tl::unexpected(data.error());
  return decoder(*data);
}

Status void_of(Result<Var> data) {
  if (!data) return tl::unexpected(data.error());
  return {};
}

// Container keys the controller never changes: they widen what a container may do to the host
// (feature flags, hook scripts, device and bind mounts, raw lxc keys) or cannot change at all
// (unprivileged). Proxmox refuses most of them to a token but lets it toggle `nesting`; the
// client refuses them all, so no caller of update_config() can (docs/setup-and-hardening.md),
// but for one kind of mpN: a storage volume (volume_mount_point), never deleted or reverted.
bool numbered(std::string_view key, std::string_view prefix) {
  return key.size() > prefix.size() && key.starts_with(prefix) &&
         key.find_first_not_of("0123456789", prefix.size()) == std::string_view::npos;
}

bool refused_key(std::string_view key) {
  return key == "features" || key == "hookscript" || key == "unprivileged" ||
         key.starts_with("lxc") || numbered(key, "mp") || numbered(key, "dev");
}

// A mount point the controller may write (a volume, docs/api.md "Volumes"): a storage volume
// ("STORAGE:SIZE" allocates one, "STORAGE:NAME" names one; never a host path: bind and device
// mounts stay refused) with only the options mp=, backup= and ro=.
bool volume_mount_point(std::string_view value) {
  auto storage_end = value.find(':');
  if (storage_end == 0 || storage_end == std::string_view::npos) return false;
  for (char c : value.substr(0, storage_end))
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  auto first = value.substr(0, value.find(','));
  if (first.size() == storage_end + 1 || first[storage_end + 1] == '/') return false;
  bool has_mp = false;
  for (auto rest = value.substr(first.size()); !rest.empty();) {
    rest.remove_prefix(1);  // the ','
    auto option = rest.substr(0, rest.find(','));
    rest.remove_prefix(option.size());
    if (option.starts_with("mp=/"))
      has_mp = true;
    else if (option != "backup=0" && option != "backup=1" && option != "ro=1" && option != "ro=0")
      return false;
  }
  return has_mp;
}

std::optional<Error> refuse_config_keys(const Params& changes) {
  for (const auto& [key, value] : changes) {
    std::vector<std::string_view> keys{key};
    if (key == "delete" || key == "revert") {
      keys.clear();
      std::string_view rest = value;
      while (!rest.empty()) {
        auto cut = rest.find_first_of(",; ");
        keys.push_back(rest.substr(0, cut));
        rest = cut == std::string_view::npos ? "" : rest.substr(cut + 1);
      }
    }
    for (auto k : keys) {
      if (!refused_key(k)) continue;
      if (numbered(k, "mp") && keys.size() == 1 && k == key && volume_mount_point(value)) continue;
      Error error = make_error(ErrorKind::kInvalidParameters, 0,
                               "refused by the client: the controller never changes '" +
                                   std::string(k) + "' of a container");
      error.proxmox->param_errors[key] = error.message;
      return error;
    }
  }
  return std::nullopt;
}

std::string join_vmids(const std::vector<int>& vmids) {
  std::string out;
  for (int id : vmids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}
}  // namespace

#define PVS_REQ(method, path, ...) ClientAccess::request(*this, method, path, __VA_ARGS__)

Result<int> Client::next_id(std::optional<int> vmid) {
  Params params;
  if (vmid) params.emplace_back("vmid", std::to_string(*vmid));
  return decoded(PVS_REQ("GET", "/cluster/nextid", params, nullptr), decode::next_id);
}

Result<std::vector<ClusterResource>> Client::resources(std::string_view type) {
  Params params;
  if (!type.empty()) params.emplace_back("type", std::string(type));
  return decoded(PVS_REQ("GET", "/cluster/resources", params, nullptr), decode::resources);
}

Result<std::vector<ContainerStatus>> Client::list_containers(std::string_view node) {
  return decoded(PVS_REQ("GET", "/nodes/" + url_encode(node) + "/lxc", {}, nullptr),
                 decode::containers);
}

Result<std::string> Client::clone(std::string_view node, const CloneRequest& request) {
  Params params{{"newid", std::to_string(request.new_vmid)}};
  if (!request.hostname.empty()) params.emplace_back("hostname", request.hostname);
  if (!request.description.empty()) params.emplace_back("description", request.description);
  if (!request.pool.empty()) params.emplace_back("pool", request.pool);
  if (!request.storage.empty()) params.emplace_back("storage", request.storage);
  if (!request.snapname.empty()) params.emplace_back("snapname", request.snapname);
  if (!request.target.empty()) params.emplace_back("target", request.target);
  if (request.full) params.emplace_back("full", *request.full ? "1" : "0");
  return upid_of(PVS_REQ("POST", ct_path(node, request.source_vmid, "/clone"), params, nullptr));
}

Result<Config> Client::config(std::string_view node, int vmid, bool current) {
  Params params;
  if (current) params.emplace_back("current", "1");
  return decoded(PVS_REQ("GET", ct_path(node, vmid, "/config"), params, nullptr), decode::config);
}

Status Client::update_config(std::string_view node, int vmid, const Params& changes) {
  if (auto refused = refuse_config_keys(changes)) return tl::unexpected(std::move(*refused));
  return void_of(PVS_REQ("PUT", ct_path(node, vmid, "/config"), changes, nullptr));
}

Result<std::string> Client::resize(std::string_view node, int vmid, std::string_view disk,
                                   std::string_view size) {
  Params params{{"disk", std::string(disk)}, {"size", std::string(size)}};
  return upid_of(PVS_REQ("PUT", ct_path(node, vmid, "/resize"), params, nullptr));
}

Result<std::string> Client::start(std::string_view node, int vmid) {
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/status/start"), {}, nullptr));
}

Result<std::string> Client::stop(std::string_view node, int vmid) {
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/status/stop"), {}, nullptr));
}

Result<std::string> Client::shutdown(std::string_view node, int vmid, int timeout_seconds,
                                     bool force_stop) {
  Params params{{"timeout", std::to_string(timeout_seconds)}};
  if (force_stop) params.emplace_back("forceStop", "1");
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/status/shutdown"), params, nullptr));
}

Result<ContainerStatus> Client::status(std::string_view node, int vmid) {
  return decoded(PVS_REQ("GET", ct_path(node, vmid, "/status/current"), {}, nullptr),
                 decode::status);
}

Result<std::vector<RrdPoint>> Client::rrddata(std::string_view node, int vmid,
                                              std::string_view timeframe) {
  Params params{{"timeframe", std::string(timeframe)}, {"cf", "AVERAGE"}};
  return decoded(PVS_REQ("GET", ct_path(node, vmid, "/rrddata"), params, nullptr), decode::rrddata);
}

Result<std::optional<std::vector<Interface>>> Client::interfaces(std::string_view node, int vmid) {
  return decoded(PVS_REQ("GET", ct_path(node, vmid, "/interfaces"), {}, nullptr),
                 decode::interfaces);
}

Result<std::string> Client::destroy(std::string_view node, int vmid,
                                    const DestroyOptions& options) {
  Params params;
  if (options.purge) params.emplace_back("purge", "1");
  if (options.force) params.emplace_back("force", "1");
  if (options.destroy_unreferenced_disks)
    params.emplace_back("destroy-unreferenced-disks",
                        *options.destroy_unreferenced_disks ? "1" : "0");
  return upid_of(PVS_REQ("DELETE", ct_path(node, vmid), params, nullptr));
}

Result<std::vector<Snapshot>> Client::snapshots(std::string_view node, int vmid) {
  return decoded(PVS_REQ("GET", ct_path(node, vmid, "/snapshot"), {}, nullptr), decode::snapshots);
}

Result<std::string> Client::create_snapshot(std::string_view node, int vmid, std::string_view name,
                                            std::string_view description) {
  Params params{{"snapname", std::string(name)}};
  if (!description.empty()) params.emplace_back("description", std::string(description));
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/snapshot"), params, nullptr));
}

Result<std::string> Client::rollback_snapshot(std::string_view node, int vmid,
                                              std::string_view name, bool start_after) {
  Params params;
  if (start_after) params.emplace_back("start", "1");
  return upid_of(PVS_REQ("POST", ct_path(node, vmid, "/snapshot/" + url_encode(name) + "/rollback"),
                         params, nullptr));
}

Result<std::string> Client::delete_snapshot(std::string_view node, int vmid, std::string_view name,
                                            bool force) {
  Params params;
  if (force) params.emplace_back("force", "1");
  return upid_of(
      PVS_REQ("DELETE", ct_path(node, vmid, "/snapshot/" + url_encode(name)), params, nullptr));
}

Result<Config> Client::firewall_options(std::string_view node, int vmid) {
  return decoded(PVS_REQ("GET", ct_path(node, vmid, "/firewall/options"), {}, nullptr),
                 decode::config);
}

Status Client::set_firewall_options(std::string_view node, int vmid, const Params& changes) {
  return void_of(PVS_REQ("PUT", ct_path(node, vmid, "/firewall/options"), changes, nullptr));
}

Result<std::vector<Pool>> Client::pools() {
  return decoded(PVS_REQ("GET", "/pools", {}, nullptr), decode::pools);
}

Result<Pool> Client::pool(std::string_view poolid) {
  return decoded(PVS_REQ("GET", "/pools", Params{{"poolid", std::string(poolid)}}, nullptr),
                 decode::one_pool);
}

Status Client::create_pool(std::string_view poolid, std::string_view comment) {
  Params params{{"poolid", std::string(poolid)}};
  if (!comment.empty()) params.emplace_back("comment", std::string(comment));
  return void_of(PVS_REQ("POST", "/pools", params, nullptr));
}

Status Client::add_to_pool(std::string_view poolid, const std::vector<int>& vmids,
                           bool allow_move) {
  Params params{{"poolid", std::string(poolid)}, {"vms", join_vmids(vmids)}};
  if (allow_move) params.emplace_back("allow-move", "1");
  return void_of(PVS_REQ("PUT", "/pools", params, nullptr));
}

Status Client::remove_from_pool(std::string_view poolid, const std::vector<int>& vmids) {
  Params params{{"poolid", std::string(poolid)}, {"vms", join_vmids(vmids)}, {"delete", "1"}};
  return void_of(PVS_REQ("PUT", "/pools", params, nullptr));
}

Status Client::delete_pool(std::string_view poolid) {
  return void_of(PVS_REQ("DELETE", "/pools", Params{{"poolid", std::string(poolid)}}, nullptr));
}

namespace {
Result<std::string> task_base(std::string_view upid) {
  auto parsed = Upid::parse(upid);
  if (!parsed) {
    Error error = make_error(ErrorKind::kInvalidParameters, 0, "unable to parse worker upid");
    error.proxmox->param_errors["upid"] = "unable to parse worker upid";
    return tl::unexpected(std::move(error));
  }
  return "/nodes/" + url_encode(parsed->node) + "/tasks/" + url_encode(upid);
}
}  // namespace

Result<TaskStatus> Client::task_status(std::string_view upid) {
  auto base = task_base(upid);
  if (!base) return tl::unexpected(base.error());
  return decoded(PVS_REQ("GET", *base + "/status", {}, nullptr), decode::task_status);
}

Result<std::vector<TaskLogLine>> Client::task_log(std::string_view upid, int start, int limit,
                                                  int* total) {
  auto base = task_base(upid);
  if (!base) return tl::unexpected(base.error());
  Params params{{"start", std::to_string(start)}, {"limit", std::to_string(limit)}};
  return decoded(PVS_REQ("GET", *base + "/log", params, total), decode::task_log);
}

Status Client::stop_task(std::string_view upid) {
  auto base = task_base(upid);
  if (!base) return tl::unexpected(base.error());
  return void_of(PVS_REQ("DELETE", *base, {}, nullptr));
}

Result<TaskStatus> Client::wait_task(std::string_view upid, const WaitOptions& options) {
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  auto interval = options.poll_initial;
  while (true) {
    auto status = task_status(upid);
    if (!status) return status;
    if (!status->running()) {
      if (status->succeeded()) return status;
      Error error = make_error(ErrorKind::kTaskFailed, 0, status->exitstatus);
      error.proxmox->upid = std::string(upid);
      int total = 0;
      int want = std::max(options.log_lines, 1);
      auto head = task_log(upid, 0, want, &total);
      if (head && total > static_cast<int>(head->size()))
        head = task_log(upid, total - want, want, nullptr);
      if (head)
        for (auto& line : *head) error.proxmox->task_log.push_back(std::move(line.t));
      return tl::unexpected(std::move(error));
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      Error error = make_error(ErrorKind::kTimeout, 0, "task still running at the deadline");
      error.proxmox->upid = std::string(upid);
      return tl::unexpected(std::move(error));
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(interval, deadline - now));
    interval = std::min(options.poll_max, interval * 2);
  }
}

#undef PVS_REQ

}  // namespace pvs::pve
