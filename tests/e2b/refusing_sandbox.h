// A Sandbox for the data plane's tests that refuses every operation ("not in this test"): a
// test derives from it and overrides only what its processes use (exec, open_pty, ...).
#pragma once

#include <mutex>
#include <thread>
#include <vector>

#include "pvesandbox/manager.h"

namespace pvs::service::e2b {

class RefusingSandbox : public pvs::Sandbox {
 public:
  explicit RefusingSandbox(std::string id = "sb-000000000001", std::string owner = "",
                           std::string node = "")
      : Sandbox(std::move(id)), owner_(std::move(owner)), node_(std::move(node)) {}
  SandboxInfo info() const override {
    SandboxInfo i;
    i.owner = owner_;
    i.node = node_;
    return i;
  }
  Result<ExecResult> exec(std::string, ExecOptions) override { return no(); }
  // exec (a test's own, blocking) on a thread of its own; joined when the sandbox goes.
  void exec_then(std::string command, ExecOptions options, ExecDone done) override {
    std::lock_guard lock(runners_mu_);
    runners_.emplace_back(
        [this, command = std::move(command), options = std::move(options),
         done = std::move(done)]() mutable { done(exec(std::move(command), std::move(options))); });
  }
  Result<std::unique_ptr<PtyChannel>> open_pty(PtyOptions) override { return no(); }
  Result<std::unique_ptr<TcpTunnel>> open_tunnel(TunnelOptions) override { return no(); }
  Result<std::unique_ptr<PortStream>> open_route(RouteOptions) override { return no(); }
  Status write_file(const std::string&, std::string_view, std::uint32_t) override { return no(); }
  Result<std::string> read_file(const std::string&, std::uint64_t) override { return no(); }
  Status upload(const std::string&, std::istream&, const UploadOptions&,
                std::optional<std::uint64_t>) override {
    return no();
  }
  Result<std::uint64_t> download(const std::string&, std::ostream&,
                                 const DownloadOptions&) override {
    return no();
  }
  Result<DirListing> list_dir(const std::string&, const ListOptions&) override { return no(); }
  Result<SftpAttributes> stat(const std::string&) override { return no(); }
  Result<std::string> realpath(const std::string&) override { return no(); }
  Status set_egress(const Egress&) override { return no(); }
  Result<EgressLog> egress_log() override { return no(); }
  Result<pve::ContainerStatus> status() override { return no(); }
  Result<std::vector<UsageSample>> usage(std::int64_t, std::int64_t) override { return no(); }
  bool is_connected() const override { return true; }
  Status snapshot(const std::string&, const std::string&) override { return no(); }
  Result<std::vector<SnapshotInfo>> snapshots() override { return no(); }
  Status rollback(const std::string&) override { return no(); }
  Status delete_snapshot(const std::string&) override { return no(); }
  Status extend_ttl(std::chrono::seconds) override { return no(); }
  Status pause(PauseMode) override { return no(); }
  Status resume(std::chrono::seconds) override { return no(); }
  Status destroy() override { return no(); }

 protected:
  static tl::unexpected<Error> no() { return fail(ErrorCode::kInternal, "not in this test"); }

 private:
  std::string owner_, node_;
  std::mutex runners_mu_;
  std::vector<std::jthread> runners_;  // GUARDED_BY(runners_mu_)
};

}  // namespace pvs::service::e2b
