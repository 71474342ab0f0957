// pvesim: Simulator (sim.h): its start, its end and its knobs. Its Impl (sim_impl.h) is
// defined in sim_*.cc, one concern each.
#include "sim.h"

#include <unistd.h>

#include <Poco/Net/Context.h>
#include <Poco/Net/HTTPRequestHandler.h>
#include <Poco/Net/HTTPRequestHandlerFactory.h>
#include <Poco/Net/HTTPServer.h>
#include <Poco/Net/HTTPServerParams.h>
#include <Poco/Net/HTTPServerRequest.h>
#include <Poco/Net/HTTPServerResponse.h>
#include <Poco/Net/SSLManager.h>
#include <Poco/Net/SecureServerSocket.h>

#include <mutex>

#include "pvesandbox/common/ipv4.h"
#include "sim_impl.h"

#ifndef PVESIM_SCHEMA_FILE
#define PVESIM_SCHEMA_FILE "pve-schema.json"
#endif

namespace pvesim {

void Simulator::Impl::shutdown() {
  closing = true;
  if (server) {
    server->stopAll(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let dispatched ones enter
    for (int i = 0; i < 2000 && active.load() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    server.reset();
  }
  {
    std::lock_guard lock(sched_mutex);
    stopping = true;
  }
  sched_cv.notify_all();
  for (auto& thread : schedulers)
    if (thread.joinable()) thread.join();
  schedulers.clear();
  if (backend) {
    std::lock_guard lock(mutex);
    for (auto& [vmid, ct] : cts)
      if (ct.running) backend->stop(vmid);
    backend->cleanup();
    backend.reset();
  }
  if (!tmpdir.empty()) {
    ::unlink(key_file.c_str());
    ::unlink(cert_path.c_str());
    ::rmdir(tmpdir.c_str());
    tmpdir.clear();
  }
}

void Simulator::Impl::add_template(int vmid, const std::string& node, const std::string& storage) {
  Container ct;
  ct.vmid = vmid;
  ct.node = node;
  ct.created = Clock::now() - std::chrono::hours(1);
  ct.config = {
      {"arch", "amd64"},
      {"cores", "1"},
      {"description", "pve-sandbox template"},
      {"features", "nesting=1"},
      {"hostname", "sandbox-template"},
      {"memory", "512"},
      {"net0", "name=eth0,bridge=vmbr1,firewall=1,hwaddr=" + random_mac() + ",ip=dhcp,type=veth"},
      {"ostype", "debian"},
      {"rootfs",
       storage + ":base-" + std::to_string(vmid) + "-disk-0,size=" + options.template_disk},
      {"swap", "512"},
      {"tags", "pve-sandbox-template"},
      {"template", "1"},
      {"unprivileged", "1"},
  };
  cts[vmid] = std::move(ct);
  backend->place(vmid, node);
}

void Simulator::Impl::add_templates() {
  for (const auto& node : cluster->nodes())
    for (int vmid : node.templates) add_template(vmid, node.name, kLocalStorage);
  for (const auto& shared : options.shared_templates)
    add_template(shared.vmid, shared.node.empty() ? cluster->first_node() : shared.node,
                 kSharedStorage);
}

namespace {

class Handler : public Poco::Net::HTTPRequestHandler {
 public:
  explicit Handler(Simulator::Impl* impl) : impl_(impl) {}
  void handleRequest(Poco::Net::HTTPServerRequest& req,
                     Poco::Net::HTTPServerResponse& resp) override {
    impl_->handle(req, resp);
  }

 private:
  Simulator::Impl* impl_;
};

class Factory : public Poco::Net::HTTPRequestHandlerFactory {
 public:
  explicit Factory(Simulator::Impl* impl) : impl_(impl) {}
  Poco::Net::HTTPRequestHandler* createRequestHandler(
      const Poco::Net::HTTPServerRequest&) override {
    return new Handler(impl_);
  }

 private:
  Simulator::Impl* impl_;
};

std::once_flag g_ssl_init;

}  // namespace

Simulator::Simulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Simulator::~Simulator() {
  impl_->shutdown();
}

pvs::Result<std::unique_ptr<Simulator>> Simulator::start(Options options) {
  std::call_once(g_ssl_init, [] { Poco::Net::initializeSSL(); });
  auto impl = std::make_unique<Impl>();
  if (options.schema_file.empty()) options.schema_file = PVESIM_SCHEMA_FILE;
  auto schema = Schema::load(options.schema_file);
  if (!schema) return pvs::fail(schema.error());
  impl->schema = std::move(*schema);
  impl->options = options;
  if (auto cidr = pvs::Cidr::parse(options.dhcp_cidr); !cidr)
    return pvs::fail(pvs::ErrorCode::kInvalidArgument, "bad --dhcp-cidr " + options.dhcp_cidr);
  if (auto valid = validate_cluster(options); !valid) return pvs::fail(valid.error());
  impl->cluster = std::make_unique<Cluster>(options);
  auto backend = make_backend(options);
  if (!backend) return pvs::fail(backend.error());
  impl->backend = std::move(*backend);
  std::vector<std::string> storages{kLocalStorage};
  if (impl->cluster->has_shared_storage()) storages.push_back(kSharedStorage);
  impl->volumes = std::make_unique<Volumes>(impl->backend.get(), storages,
                                            std::vector<std::string>{kSharedStorage});
  if (auto made = impl->make_certificate(); !made) return pvs::fail(made.error());
  impl->add_templates();
  for (const auto& pool : options.pools) impl->pools[pool] = {};
  for (const auto& [vmid, lock] : options.locks) {
    if (!impl->cts.count(vmid))
      return pvs::fail(pvs::ErrorCode::kInvalidArgument,
                       "--lock: no CT " + std::to_string(vmid) + " at start");
    impl->cts[vmid].config["lock"] = lock;
  }
  try {
    Poco::Net::Context::Ptr context =
        new Poco::Net::Context(Poco::Net::Context::TLS_SERVER_USE, impl->key_file, impl->cert_path,
                               "", Poco::Net::Context::VERIFY_NONE);
    Poco::Net::SecureServerSocket socket(Poco::Net::SocketAddress(options.listen, options.port), 64,
                                         context);
    impl->port = socket.address().port();
    auto params = new Poco::Net::HTTPServerParams;
    params->setMaxThreads(160);
    params->setMaxQueued(512);
    params->setKeepAlive(true);
    params->setMaxKeepAliveRequests(0);
    params->setKeepAliveTimeout(Poco::Timespan(30, 0));
    impl->server = std::make_unique<Poco::Net::HTTPServer>(new Factory(impl.get()), socket, params);
    impl->server->start();
  } catch (const Poco::Exception& ex) {
    return pvs::fail(pvs::ErrorCode::kUnavailable, "pvesim cannot listen: " + ex.displayText());
  }
  for (int i = 0; i < 4; ++i)
    impl->schedulers.emplace_back([p = impl.get()] { p->run_scheduler(); });
  return std::unique_ptr<Simulator>(new Simulator(std::move(impl)));
}

int Simulator::port() const {
  return impl_->port;
}
std::string Simulator::fingerprint() const {
  return impl_->fingerprint;
}
std::string Simulator::ssh_host_key_fingerprint() const {
  return impl_->backend ? impl_->backend->host_key_fingerprint() : "";
}

std::string Simulator::ssh_host_key_file() const {
  return impl_->backend ? impl_->backend->host_key_file() : "";
}
std::string Simulator::lxc_run_dir() const {
  return impl_->backend ? impl_->backend->run_dir() : "";
}
std::string Simulator::cert_file() const {
  return impl_->cert_path;
}

uint64_t Simulator::count(const std::string& method, const std::string& path_template) const {
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->counts.find(method + " " + path_template);
  return it == impl_->counts.end() ? 0 : it->second;
}

uint64_t Simulator::schema_rejections() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->schema_rejections;
}

uint64_t Simulator::total_requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->request_total;
}

void Simulator::reset_counts() {
  std::lock_guard lock(impl_->mutex);
  impl_->counts.clear();
  impl_->request_total = 0;
}

void Simulator::set_faults(std::vector<FaultRule> rules) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.faults = std::move(rules);
}

void Simulator::set_fail_task(const std::string& type, const std::string& message) {
  std::lock_guard lock(impl_->mutex);
  if (message.empty())
    impl_->options.fail_tasks.erase(type);
  else
    impl_->options.fail_tasks[type] = message;
}

void Simulator::set_latency_ms(int ms) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.latency_ms = ms;
}

void Simulator::set_interfaces_delay_ms(int ms) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.interfaces_delay_ms = ms;
}

void Simulator::set_rrd_delay_ms(int ms) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.rrd_delay_ms = ms;
}

void Simulator::set_rrd_step_seconds(int seconds) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.rrd_step_seconds = seconds;
}

void Simulator::set_task_ms(const std::string& type, int ms) {
  std::lock_guard lock(impl_->mutex);
  impl_->options.task_ms[type] = ms;
}

void Simulator::hold_tasks(const std::string& type, bool held) {
  std::lock_guard lock(impl_->mutex);
  if (held)
    impl_->held_types.insert(type);
  else
    impl_->held_types.erase(type);
}

std::vector<std::string> Simulator::running_tasks(const std::string& type) const {
  std::lock_guard lock(impl_->mutex);
  std::vector<std::string> out;
  for (const auto& [upid, t] : impl_->tasks)
    if (t.running && t.type == type) out.push_back(t.id);
  return out;
}

pvs::Status Simulator::set_node_offline(const std::string& node, bool offline) {
  std::lock_guard guard(impl_->mutex);
  if (!impl_->cluster->set_offline(node, offline))
    return pvs::fail(pvs::ErrorCode::kNotFound, "no node " + node + " in the cluster");
  return {};
}

pvs::Status Simulator::set_lock(int vmid, const std::string& lock) {
  std::lock_guard guard(impl_->mutex);
  auto* ct = impl_->find(vmid);
  if (!ct) return pvs::fail(pvs::ErrorCode::kNotFound, "no CT " + std::to_string(vmid));
  if (lock.empty())
    ct->config.erase("lock");
  else
    ct->config["lock"] = lock;
  return {};
}

}  // namespace pvesim
