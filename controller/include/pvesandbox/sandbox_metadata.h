// What the controller writes into a sandbox container's description, so that it can rebuild
// its whole state from Proxmox after a restart (Proxmox is the source of truth).
//
// The description is a human line and a marker line holding compact JSON:
//
//   Managed by pve-sandbox; do not edit the next line.
//   pve-sandbox:v1 {"id":"sb-4f2a9c1e","vmid":120,"created":1795360000,...}
//
// decode_description() finds the marker anywhere in the text, so an operator's note above it
// does not break recovery. Proxmox limits descriptions to 8192 bytes; the label limits below
// keep the encoding well inside that.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"
#include "pvesandbox/egress.h"

namespace pvs {

inline constexpr std::size_t kMaxLabels = 16;
inline constexpr std::size_t kMaxLabelKey = 63;
inline constexpr std::size_t kMaxLabelValue = 128;

// Label keys: 1-63 of [a-z0-9._/-], starting with a letter or digit. Values: 0-128 printable
// ASCII bytes. At most kMaxLabels labels.
Status validate_labels(const std::map<std::string, std::string>& labels);

// Label keys under this prefix are the controller's own (the template a sandbox was made from,
// a pool member's profile, a build's recipe): written by the controller, never by a client.
inline constexpr std::string_view kReservedLabelPrefix = "pve-sandbox/";
// validate_labels, and no key under kReservedLabelPrefix: the labels a create may ask for
// (kInvalidArgument naming the key). Every create of the library and the API takes this.
Status validate_client_labels(const std::map<std::string, std::string>& labels);

// What the end of a sandbox's TTL does (E2B's `lifecycle`). By default the sandbox is
// destroyed. With `pause` it is paused instead (the filesystem mode), and a resume gives it `ttl`
// seconds again, counted from the resume (E2B: "a fresh timeout equal to the original one").
// `auto_resume` (only with `pause`): a data-plane call (exec, files, terminals, ports) on it while
// it is paused resumes it first instead of failing.
struct OnExpiry {
  bool pause = false;
  bool auto_resume = false;
  std::int64_t ttl = 0;  // seconds: the TTL it was created with

  bool operator==(const OnExpiry&) const = default;
};

// A volume mounted into a sandbox (volumes.h): which one, where, and whether read-only.
// "volumes":[{"id":"vol-..","path":"/mnt/data","ro":true}] in the JSON, only when there are some.
struct VolumeMount {
  std::string volume;  // the volume's id, "vol-" and 12 hex digits
  std::string path;    // absolute and normalized (check_mount_path in volumes.h)
  bool read_only = false;

  bool operator==(const VolumeMount&) const = default;
};

struct SandboxMetadata {
  // Where a sandbox is in its life. A sandbox found in "creating" or "destroying" after a
  // restart was interrupted and is destroyed by recovery. "pooled" is a stopped clone in the
  // warm pool (ManagerConfig::warm_pool), not yet anybody's sandbox: recovery keeps it.
  // "paused" is a sandbox whose container was stopped with its disk kept (Sandbox::pause):
  // recovery adopts it as it adopts a "ready" one, and it stays paused until resumed.
  enum class Phase { kCreating, kReady, kDestroying, kPooled, kPaused };

  std::string id;  // the sandbox's public id
  int vmid = 0;
  Phase phase = Phase::kCreating;
  std::int64_t created_at = 0;  // unix seconds
  std::int64_t expires_at = 0;  // unix seconds; 0: no TTL (paused: the paused TTL's end)
  // Paused: the seconds of TTL the sandbox had left when it was paused, which a resume gives it
  // back unless it asks for another TTL (0: it had no TTL). "ttl_left" in the JSON, only then.
  std::int64_t ttl_left = 0;
  bool internet = false;  // internet wanted (the agent's set follows this)
  // An egress allowlist wanted (then `internet` is false): "egress":{"names":[...],
  // "ports":[...],"list":"..."} in the JSON; absent for off and on.
  std::optional<EgressList> allowlist;
  std::string allowlist_name;  // the named list it came from, if any
  std::optional<Ipv4Address> address;
  std::string owner;  // the API token name that created it
  // The sandbox's own SSH host key, "SHA256:<43 base64 chars>", learnt at create (see
  // ManagerConfig::per_sandbox_host_keys); every later session pins it. Empty for sandboxes
  // created before it was recorded: they fall back to the configured host key policy.
  std::string host_key;
  std::map<std::string, std::string> labels;
  // "on_expiry":{"pause":true,"auto_resume":..,"ttl":..} in the JSON, only with pause.
  OnExpiry on_expiry;
  std::vector<VolumeMount> volumes;  // mp0, mp1, ... of its container, in this order

  bool operator==(const SandboxMetadata&) const = default;
};

std::string_view to_string(SandboxMetadata::Phase phase);

// The egress the metadata records, and recording one.
Egress egress_of(const SandboxMetadata& metadata);
void set_egress(SandboxMetadata& metadata, const Egress& egress);

// True for an OpenSSH SHA-256 fingerprint: "SHA256:" and 43 unpadded base64 characters.
bool is_sha256_fingerprint(std::string_view fingerprint);

// The full description text for a container.
std::string encode_description(const SandboxMetadata& metadata);
// kNotFound if the text carries no marker (not ours); kInvalidArgument if the marker line is
// damaged (ours, but unreadable: recovery treats it as an orphan).
Result<SandboxMetadata> decode_description(std::string_view description);

}  // namespace pvs
