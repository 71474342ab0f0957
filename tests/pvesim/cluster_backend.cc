// The backend of a cluster: each CT goes to the backend of the node it lives on.
#include <mutex>

#include "backend.h"

namespace pvesim {

namespace {

class ClusterBackend : public Backend {
 public:
  explicit ClusterBackend(std::vector<std::pair<std::string, std::unique_ptr<Backend>>> nodes)
      : nodes_(std::move(nodes)) {}

  ~ClusterBackend() override { cleanup(); }

  void place(int vmid, const std::string& node) override {
    std::lock_guard lock(mutex_);
    node_of_[vmid] = node;
  }

  std::string start(int vmid, const std::map<std::string, std::string>& config,
                    const std::string& ipv4) override {
    return of(vmid).start(vmid, config, ipv4);
  }
  void stop(int vmid) override { of(vmid).stop(vmid); }
  void destroy(int vmid) override {
    of(vmid).destroy(vmid);
    std::lock_guard lock(mutex_);
    node_of_.erase(vmid);
  }
  std::vector<LiveInterface> interfaces(int vmid) override { return of(vmid).interfaces(vmid); }
  std::string set_cpu_units(int vmid, long long units) override {
    return of(vmid).set_cpu_units(vmid, units);
  }

  void cleanup() override {
    // The first node's backend owns the host key the others copy: it goes last.
    for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it)
      if (it->second) it->second->cleanup();
  }

  std::string host_key_fingerprint() const override {
    return nodes_.empty() ? "" : nodes_.front().second->host_key_fingerprint();
  }
  std::string host_key_file() const override {
    return nodes_.empty() ? "" : nodes_.front().second->host_key_file();
  }

 private:
  Backend& of(int vmid) {
    std::string node;
    {
      std::lock_guard lock(mutex_);
      auto it = node_of_.find(vmid);
      if (it != node_of_.end()) node = it->second;
    }
    for (auto& [name, backend] : nodes_)
      if (name == node) return *backend;
    return *nodes_.front().second;
  }

  std::vector<std::pair<std::string, std::unique_ptr<Backend>>> nodes_;
  std::mutex mutex_;
  std::map<int, std::string> node_of_;
};

}  // namespace

std::unique_ptr<Backend> make_cluster_backend(
    std::vector<std::pair<std::string, std::unique_ptr<Backend>>> nodes) {
  return std::make_unique<ClusterBackend>(std::move(nodes));
}

}  // namespace pvesim
