// Where E2B's volume content plane (docs/e2b.md "Volumes") finds a volume's files: in a
// sandbox that mounts it. The owner's sandbox that holds the volume, when it runs; else a helper
// sandbox made for it (the volume at /volume, label volume-helper=<id>, 10 minutes TTL),
// destroyed once idle for a minute, or at once when a create asks for the volume (release()),
// since one sandbox at a time holds a volume.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "http/auth.h"
#include "http/requests.h"
#include "pvesandbox/manager.h"

namespace pvs::service::e2b {

inline constexpr const char* kVolumeHelperLabel = "volume-helper";
inline constexpr const char* kVolumeHelperPath = "/volume";

class VolumeHelpers {
 public:
  struct Deps {
    std::function<std::vector<VolumeInfo>(const Principal&)> volumes;  // the caller's
    std::function<std::shared_ptr<Sandbox>(const Principal&, const std::string&)> sandbox_for;
    // A helper's create, judged and limited as the caller's creates are (throws ApiError).
    std::function<std::shared_ptr<Sandbox>(const Principal&, const CreateRequest&)> create;
    std::function<void(Sandbox&)> destroy;
    std::chrono::milliseconds idle{std::chrono::seconds(60)};
  };
  struct Place {
    std::shared_ptr<Sandbox> sandbox;
    std::string root;  // where the volume is mounted in it
  };

  explicit VolumeHelpers(Deps deps);
  ~VolumeHelpers();  // stops the reaper; helpers left end with their TTL
  VolumeHelpers(const VolumeHelpers&) = delete;
  VolumeHelpers& operator=(const VolumeHelpers&) = delete;

  // The sandbox with `volume_id` (one of `who`'s volumes: ApiError 404 otherwise) mounted.
  // ApiError 409 while another of `who`'s sandboxes that is not running holds it.
  Place open(const Principal& who, const std::string& volume_id);
  // Destroys the helpers of these volumes (a create is about to mount them).
  void release(const std::vector<std::string>& volume_ids);

 private:
  struct Helper {
    std::shared_ptr<Sandbox> sandbox;  // null while it is being made
    std::chrono::steady_clock::time_point used;
  };
  void reap_loop();
  std::shared_ptr<Sandbox> make_helper(const Principal& who, const std::string& volume_id);

  Deps d_;
  std::mutex mu_;
  std::condition_variable cv_;             // a helper made or dropped, or stop
  std::map<std::string, Helper> helpers_;  // by volume id
  bool stop_ = false;
  std::thread reaper_;
};

}  // namespace pvs::service::e2b
