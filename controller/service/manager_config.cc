// ServiceConfig -> ManagerConfig (Proxmox, network, SSH, agent, limits).
#include "server.h"

namespace pvs::service {

Result<ManagerConfig> manager_config(const ServiceConfig& c) {
  ManagerConfig m;
  m.proxmox.base_url = c.proxmox_url;
  m.proxmox.token_id = c.proxmox_token_id;
  m.proxmox.token_secret = c.proxmox_token_secret;
  m.proxmox.ca_file = c.proxmox_ca_file;
  m.proxmox.fingerprint = c.proxmox_fingerprint;
  m.proxmox.insecure_skip_verify = c.proxmox_insecure_skip_verify;
  m.proxmox.request_timeout = std::chrono::seconds(c.proxmox_timeout_seconds);
  m.node = c.proxmox_node;
  m.template_vmid = c.template_vmid;
  m.pool = c.pool;
  m.storage = c.storage;
  m.full_clone = c.full_clone;
  m.warm_pool = c.warm_pool;
  m.vmid_min = c.vmid_min;
  m.vmid_max = c.vmid_max;

  auto cidr = Cidr::parse(c.network_cidr);
  if (!cidr) return fail(cidr.error());
  m.sandbox_cidr = *cidr;
  auto gw = Ipv4Address::parse(c.network_gateway);
  if (!gw) return fail(gw.error());
  m.gateway = *gw;
  m.bridge = c.network_bridge;
  for (const auto& r : c.network_reserved) {
    auto rc = Cidr::parse(r);
    if (!rc) return fail(rc.error());
    m.reserved.push_back(*rc);
  }
  m.dhcp = c.network_dhcp;
  m.firewall = c.network_firewall;

  m.ssh.user = c.ssh_user;
  m.ssh.port = c.ssh_port;
  m.ssh.private_key_file = c.ssh_private_key_file;
  m.ssh.passphrase = c.ssh_passphrase;
  m.ssh.host_key_policy = c.ssh_host_key_policy == "pinned"        ? HostKeyPolicy::kPinned
                          : c.ssh_host_key_policy == "known_hosts" ? HostKeyPolicy::kKnownHosts
                          : c.ssh_host_key_policy == "tofu"        ? HostKeyPolicy::kTrustOnFirstUse
                                                                   : HostKeyPolicy::kInsecure;
  m.ssh.host_key_fingerprint = c.ssh_host_key_fingerprint;
  m.ssh.known_hosts_file = c.ssh_known_hosts_file;
  m.ssh.connect_timeout = std::chrono::seconds(c.ssh_connect_timeout_seconds);
  m.ssh_ready_timeout = std::chrono::seconds(c.ssh_ready_timeout_seconds);
  m.wait_for_ssh = c.ssh_wait_for_ready;

  m.agent.socket_path = c.agent_socket;
  m.agent.timeout = std::chrono::seconds(c.agent_timeout_seconds);
  m.internet_lease = std::chrono::seconds(c.internet_lease_seconds);

  m.max_sandboxes = c.max_sandboxes;
  m.default_ttl = std::chrono::seconds(c.default_ttl_seconds);
  m.max_ttl = std::chrono::seconds(c.max_ttl_seconds);
  m.max_cpus = c.max_cpus;
  m.max_memory_mb = c.max_memory_mb;
  m.max_disk_gb = c.max_disk_gb;
  m.reconcile_interval = std::chrono::seconds(c.reconcile_interval_seconds);
  return m;
}

}  // namespace pvs::service
