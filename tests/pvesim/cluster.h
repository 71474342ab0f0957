// pvesim's cluster model: the nodes behind the one API endpoint, their online state, what
// they report (/nodes, /cluster/resources), their storages, and the clone `target` rules.
#pragma once

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pvesandbox/common/error.h"
#include "schema.h"
#include "sim.h"

namespace pvesim {

inline constexpr const char* kLocalStorage = "local-lvm";    // lvmthin, one per node
inline constexpr const char* kSharedStorage = "shared-rbd";  // rbd, shared by every node
// pveproxy's answer for a node it cannot reach: AnyEvent::HTTP's status 595 with "$!" as the
// reason, forwarded as is (no body).
inline constexpr int kUnreachableStatus = 595;
inline constexpr const char* kUnreachable = "No route to host";

// What runs on a node, for its mem and cpu figures.
struct NodeLoad {
  std::uint64_t mem = 0;  // bytes: the sum of its running CTs' `memory`
  int running = 0;        // running CTs
};

// Where a clone lands: `node`, or `error` (pve-container's message) if it may not.
struct CloneTarget {
  std::string node;
  std::string error;
};

// The nodes of `options`: options.nodes, or the one node made of node/templates/netns.
std::vector<NodeOptions> cluster_nodes(const Options& options);
// Node names (format and uniqueness), template VMIDs (unique cluster-wide), shared templates'
// nodes.
pvs::Status validate_cluster(const Options& options);
// The storages (by id) the volumes of a CT config are on: rootfs and mp<N>.
std::vector<std::string> volume_storages(const std::map<std::string, std::string>& config);
// The 500 pveproxy answers for a node not in the cluster (PVE::Cluster::remote_node_ip falls
// back to a DNS lookup of the name).
std::string unknown_node_message(const std::string& node);

// Not thread-safe: the simulator's state lock guards it.
class Cluster {
 public:
  explicit Cluster(const Options& options);

  const std::vector<NodeOptions>& nodes() const { return nodes_; }
  const std::string& first_node() const { return nodes_.front().name; }
  bool has(const std::string& node) const;
  bool offline(const std::string& node) const { return offline_.count(node) > 0; }
  bool set_offline(const std::string& node, bool offline);  // false: no such node
  bool has_shared_storage() const { return shared_storage_; }
  bool storage_shared(const std::string& storage) const;

  // The node entry of /nodes and /cluster/resources (PVE::API2Tools::extract_node_stats).
  Poco::JSON::Object::Ptr node_entry(const std::string& node, const NodeLoad& load) const;
  // /cluster/resources?type=storage: every storage of every node.
  void add_storage_resources(Poco::JSON::Array& out) const;
  // GET /nodes/{node}/storage with its filters (storage, content, target).
  Poco::JSON::Array::Ptr node_storage(const std::string& node, const ParamMap& params) const;
  // POST /nodes/{node}/lxc/{vmid}/clone with `target` (empty: none): where the clone lands.
  // `storages` are the source volumes' storages, `storage` the request's storage parameter.
  CloneTarget clone_target(const std::string& node, const std::string& target,
                           const std::vector<std::string>& storages,
                           const std::string& storage) const;

 private:
  const NodeOptions* find(const std::string& node) const;

  std::vector<NodeOptions> nodes_;
  std::set<std::string> offline_;
  bool shared_storage_ = false;
  std::chrono::steady_clock::time_point booted_;
};

}  // namespace pvesim
