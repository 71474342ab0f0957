// Allocators for the two scarce, numbered resources of a sandbox: its Proxmox VMID and its
// IPv4 address.
//
//   pvs::VmidPool vmids(9100, 9999);
//   auto vmid = vmids.acquire();          // lowest free; Proxmox may still say "already exists":
//   vmids.mark_used(*vmid);               //   then keep it marked and acquire another
//
//   auto pool = pvs::AddressPool::create(cidr, gateway);
//   auto ip = (*pool)->acquire();
//   pool->quarantine(*ip);                // revoke failed: never hand it out again ...
//   pool->release(*ip);                   // ... until the agent confirmed it is gone
//
// Both are thread-safe. State lives in memory only: after a restart the Manager rebuilds it
// from Proxmox (mark_used for every live sandbox) before it allocates anything.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "pvesandbox/common/error.h"
#include "pvesandbox/common/ipv4.h"

namespace pvs {

// A contiguous range [first, last] of numbers, each free, used or quarantined.
class IdPool {
 public:
  enum class State : std::uint8_t { kFree, kUsed, kQuarantined };

  // first <= last; at most 2^24 numbers (a /8 of addresses).
  IdPool(std::uint32_t first, std::uint32_t last);

  // The lowest free number, now used; kUnavailable when none is free.
  Result<std::uint32_t> acquire();
  // Marks a number used whatever its state (recovery, or the outside world says it is taken).
  // Numbers outside the range are ignored: they are not ours to manage.
  void mark_used(std::uint32_t id);
  // Frees a used number. A quarantined number stays quarantined: only release_quarantined()
  // frees it.
  void release(std::uint32_t id);
  // Never hand this number out until release_quarantined().
  void quarantine(std::uint32_t id);
  void release_quarantined(std::uint32_t id);

  State state(std::uint32_t id) const;
  std::size_t used() const;
  std::size_t quarantined() const;
  std::uint32_t first() const { return first_; }
  std::uint32_t last() const { return last_; }

 private:
  bool in_range(std::uint32_t id) const { return id >= first_ && id <= last_; }

  const std::uint32_t first_;
  const std::uint32_t last_;
  mutable std::mutex mu_;
  std::vector<State> states_;
  std::size_t used_ = 0;
  std::size_t quarantined_ = 0;
  std::size_t hint_ = 0;  // no free number below this index
};

// VMIDs for sandboxes, from a configured range (Proxmox VMIDs are 100-999999999).
class VmidPool : public IdPool {
 public:
  using IdPool::IdPool;
};

// Host addresses of the sandbox network: never the network, broadcast or gateway address, nor
// any address in `reserved` (e.g. a DHCP range the host's dnsmasq hands out).
class AddressPool {
 public:
  static Result<std::unique_ptr<AddressPool>> create(const Cidr& cidr, Ipv4Address gateway,
                                                     const std::vector<Cidr>& reserved = {});

  Result<Ipv4Address> acquire();
  void mark_used(Ipv4Address address) { ids_.mark_used(address.to_uint()); }
  void release(Ipv4Address address) { ids_.release(address.to_uint()); }
  void quarantine(Ipv4Address address) { ids_.quarantine(address.to_uint()); }
  void release_quarantined(Ipv4Address address) { ids_.release_quarantined(address.to_uint()); }
  IdPool::State state(Ipv4Address address) const { return ids_.state(address.to_uint()); }
  // Addresses handed out or marked used (network, broadcast, gateway and reserved excluded).
  std::size_t used() const { return ids_.used() - unusable_; }
  // Addresses acquire() could still hand out.
  std::size_t free() const {
    return std::size_t{ids_.last() - ids_.first()} + 1 - ids_.used() - ids_.quarantined();
  }

  const Cidr& cidr() const { return cidr_; }
  Ipv4Address gateway() const { return gateway_; }

 private:
  AddressPool(const Cidr& cidr, Ipv4Address gateway);
  Cidr cidr_;
  Ipv4Address gateway_;
  IdPool ids_;  // over the whole block; unusable addresses are permanently used
  std::size_t unusable_ = 0;
};

}  // namespace pvs
