// pvesim's handlers: their helpers, the route table (dispatch), the cluster listings, firewall
// options and pools.
#include "sim_impl.h"

namespace pvesim {

int Simulator::Impl::vmid_param(const Call& c, const char* name) {
  return std::stoi(c.params.at(name));
}

bool Simulator::Impl::flag(const Call& c, const std::string& name) {
  auto it = c.params.find(name);
  return it != c.params.end() && it->second == "1";
}

std::string Simulator::Impl::param(const Call& c, const std::string& name,
                                   const std::string& fallback) {
  auto it = c.params.find(name);
  return it == c.params.end() ? fallback : it->second;
}

void Simulator::Impl::check_node(const Call& c) {
  auto it = c.params.find("node");
  if (it != c.params.end() && !cluster->has(it->second))
    throw fail500(unknown_node_message(it->second));
}

std::string Simulator::Impl::node_of(const Call& c) {
  return c.params.at("node");
}

Container& Simulator::Impl::need(const Call& c, int vmid) {
  Container* ct = find_on(node_of(c), vmid);
  if (!ct) throw fail500(conf_missing(node_of(c), vmid));
  return *ct;
}

void Simulator::Impl::check_unlocked(const Container& ct) {
  std::string lock = lock_of(ct);
  if (!lock.empty()) throw fail500("CT is locked (" + lock + ")");
}

// Running CTs whose init died (the lxc backend) are stopped now, as pvestatd finds them.
void Simulator::Impl::reap_dead() {
  for (auto& [vmid, ct] : cts) {
    if (!ct.running || backend->alive(vmid)) continue;
    backend->stop(vmid);  // frees what the dead container left (its bridge port)
    ct.running = false;
    release_lease(ct);
  }
}

Simulator::Impl::Reply Simulator::Impl::dispatch(Call& c) {
  const std::string key = c.method + " " + c.endpoint->path;
  check_node(c);
  if (c.method == "GET") reap_dead();
  if (key == "GET /version") {
    Object::Ptr o = new Object;
    o->set("version", "9.1.3");
    o->set("release", "9.1");
    o->set("repoid", "5c9e4ea7");
    return {o};
  }
  if (key == "GET /nodes") {
    Array::Ptr a = new Array;
    auto loads = node_loads();
    for (const auto& node : cluster->nodes()) {
      auto n = cluster->node_entry(node.name, loads[node.name]);
      n->set("ssl_fingerprint", fingerprint);  // one endpoint, one certificate
      a->add(n);
    }
    return {a};
  }
  if (key == "GET /cluster/nextid") {
    if (c.params.count("vmid")) {
      int vmid = vmid_param(c);
      if (cts.count(vmid)) throw fail400("vmid", "VM " + std::to_string(vmid) + " already exists");
      return {std::to_string(vmid)};
    }
    for (int id = 100; id < 1000000; ++id) {
      if (cts.count(id)) continue;
      if (options.nextid_as_number) return {id};
      return {std::to_string(id)};  // a string on the wire, as real servers send it
    }
    throw fail500("unable to get any free VMID in range [100, 1000000]");
  }
  if (key == "GET /cluster/resources") return {resources(param(c, "type"))};
  if (key == "GET /nodes/{node}/lxc") {
    Array::Ptr a = new Array;
    for (const auto& [vmid, ct] : cts)
      if (ct.node == node_of(c)) a->add(vmstatus(ct));
    return {a};
  }
  if (key == "GET /nodes/{node}/storage") return {cluster->node_storage(node_of(c), c.params)};
  if (key == "POST /nodes/{node}/lxc/{vmid}/clone") return {clone(c)};
  if (key == "GET /nodes/{node}/lxc/{vmid}/config") {
    Container& ct = need(c, vmid_param(c));
    bool current = c.params.count("current") && param(c, "current") == "1";
    auto o = render_config(current ? ct.config : with_pending(ct));
    o->set("digest", digest_of(ct));
    return {o};
  }
  if (key == "PUT /nodes/{node}/lxc/{vmid}/config") {
    update_config(c);
    return {Var()};
  }
  if (key == "PUT /nodes/{node}/lxc/{vmid}/resize") return {resize(c)};
  if (key == "POST /nodes/{node}/lxc/{vmid}/template") {
    make_template(c);
    return {Var()};  // the worker's UPID is not returned (pve-container returns null)
  }
  if (key == "POST /nodes/{node}/lxc/{vmid}/status/start") return {start(c)};
  if (key == "POST /nodes/{node}/lxc/{vmid}/status/stop" ||
      key == "POST /nodes/{node}/lxc/{vmid}/status/shutdown" ||
      key == "POST /nodes/{node}/lxc/{vmid}/status/reboot")
    return {stop_like(c)};
  if (key == "GET /nodes/{node}/lxc/{vmid}/status/current") {
    Container& ct = need(c, vmid_param(c));
    auto o = vmstatus(ct);
    Object::Ptr ha = new Object;
    ha->set("managed", 0);
    o->set("ha", ha);
    return {o};
  }
  if (key == "GET /nodes/{node}/lxc/{vmid}/rrddata")
    return {rrddata(need(c, vmid_param(c)), param(c, "timeframe"))};
  if (key == "GET /nodes/{node}/lxc/{vmid}/interfaces") return {interfaces(need(c, vmid_param(c)))};
  if (key == "DELETE /nodes/{node}/lxc/{vmid}") return {destroy(c)};
  if (key == "GET /nodes/{node}/lxc/{vmid}/snapshot")
    return {snapshot_list(need(c, vmid_param(c)))};
  if (key == "POST /nodes/{node}/lxc/{vmid}/snapshot") return {snapshot_create(c)};
  if (key == "DELETE /nodes/{node}/lxc/{vmid}/snapshot/{snapname}") return {snapshot_delete(c)};
  if (key == "POST /nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback")
    return {snapshot_rollback(c)};
  if (key == "GET /nodes/{node}/tasks") return task_list(c);
  if (key == "GET /nodes/{node}/tasks/{upid}/status") return {task_status(c)};
  if (key == "GET /nodes/{node}/tasks/{upid}/log") return task_log(c);
  if (key == "DELETE /nodes/{node}/tasks/{upid}") {
    Task& t = need_task(c);
    if (t.running) {
      t.killed = true;
      t.log.push_back("received interrupt");
      finish_task(t, "unexpected status");
    }
    return {Var()};
  }
  if (key == "GET /pools") return {pool_list(c)};
  if (key == "GET /pools/{poolid}") {
    auto list = pool_list(c);
    auto o = list->getObject(0);
    o->remove("poolid");
    return {o};
  }
  if (key == "POST /pools") {
    std::string id = param(c, "poolid");
    if (!std::isalpha(static_cast<unsigned char>(id[0])))
      throw fail400("poolid", "invalid format - pool ID must start with a letter");
    if (pools.count(id)) throw fail500("pool '" + id + "' already exists");
    pools[id].comment = param(c, "comment");
    return {Var()};
  }
  if (key == "PUT /pools" || key == "PUT /pools/{poolid}") {
    pool_update(c);
    return {Var()};
  }
  if (key == "DELETE /pools") {
    std::string id = param(c, "poolid");
    auto it = pools.find(id);
    if (it == pools.end()) throw fail500("pool '" + id + "' does not exist");
    if (!it->second.members.empty())
      throw fail500("pool '" + id + "' is not empty (contains VM " +
                    std::to_string(*it->second.members.begin()) + ")");
    pools.erase(it);
    return {Var()};
  }
  if (key == "GET /nodes/{node}/lxc/{vmid}/firewall/options") {
    Container& ct = need(c, vmid_param(c));
    return {render_firewall(ct.firewall)};
  }
  if (key == "PUT /nodes/{node}/lxc/{vmid}/firewall/options") {
    Container& ct = need(c, vmid_param(c));
    for (const auto& name : split_list(param(c, "delete"))) ct.firewall.erase(name);
    for (const auto& [k, v] : c.params)
      if (k != "node" && k != "vmid" && k != "delete" && k != "digest") ct.firewall[k] = v;
    return {Var()};
  }
  if (key == "GET /nodes/{node}/lxc/{vmid}/firewall/rules") {
    need(c, vmid_param(c));
    return {Var(Array::Ptr(new Array))};
  }
  if (key == "POST /nodes/{node}/lxc/{vmid}/firewall/rules") {
    need(c, vmid_param(c));
    return {Var()};
  }
  throw ApiFail{501, "Method '" + c.method + " " + c.path + "' not implemented", {}};
}

Object::Ptr Simulator::Impl::render_firewall(const std::map<std::string, std::string>& fw) {
  Object::Ptr o = new Object;
  for (const auto& [k, v] : fw) {
    if (v == "0" || v == "1")
      o->set(k, std::stoi(v));
    else
      o->set(k, v);
  }
  return o;
}

Array::Ptr Simulator::Impl::resources(const std::string& type) {
  Array::Ptr a = new Array;
  auto now = Clock::now();
  if (type.empty() || type == "vm") {
    for (auto& [vmid, ct] : cts) {
      Object::Ptr o = vmstatus(ct);
      o->set("id", "lxc/" + std::to_string(vmid));
      o->set("node", ct.node);
      bool fresh = now - ct.created < std::chrono::milliseconds(options.rrd_delay_ms);
      if (cluster->offline(ct.node)) o->set("status", "unknown");  // no fresh RRD data
      if (fresh) {  // pvestatd has not written RRD data yet
        o->set("status", "unknown");
        o->remove("name");
      }
      std::string pool = pool_of(vmid);
      if (!pool.empty()) o->set("pool", pool);
      o->set("template", config_int(ct, "template", 0));
      a->add(o);
    }
  }
  if (type.empty() || type == "node") {
    auto loads = node_loads();
    for (const auto& node : cluster->nodes())
      a->add(cluster->node_entry(node.name, loads[node.name]));
  }
  if (type.empty() || type == "storage") cluster->add_storage_resources(*a);
  return a;
}

// Per node: the memory (config `memory`, MiB) of its running CTs, and how many run.
std::map<std::string, NodeLoad> Simulator::Impl::node_loads() {
  std::map<std::string, NodeLoad> out;
  for (const auto& [vmid, ct] : cts) {
    if (!ct.running) continue;
    out[ct.node].mem += static_cast<uint64_t>(config_int(ct, "memory", 512)) << 20;
    ++out[ct.node].running;
  }
  return out;
}

Array::Ptr Simulator::Impl::pool_list(const Call& c) {
  Array::Ptr a = new Array;
  std::string only = param(c, "poolid");
  if (!only.empty() && !pools.count(only)) throw fail500("pool '" + only + "' does not exist");
  for (const auto& [id, pool] : pools) {
    if (!only.empty() && id != only) continue;
    Object::Ptr o = new Object;
    o->set("poolid", id);
    if (!pool.comment.empty()) o->set("comment", pool.comment);
    if (!only.empty()) {
      Array::Ptr members = new Array;
      for (int vmid : pool.members) {
        Container* ct = find(vmid);
        if (!ct) continue;
        auto m = vmstatus(*ct);
        m->set("id", "lxc/" + std::to_string(vmid));
        m->set("node", ct->node);
        members->add(m);
      }
      o->set("members", members);
    }
    a->add(o);
  }
  return a;
}

void Simulator::Impl::pool_update(const Call& c) {
  std::string id = param(c, "poolid");
  auto it = pools.find(id);
  if (it == pools.end()) throw fail500("pool '" + id + "' does not exist");
  if (c.params.count("comment")) it->second.comment = param(c, "comment");
  bool remove = flag(c, "delete"), allow_move = flag(c, "allow-move");
  for (const auto& text : split_list(param(c, "vms"))) {
    int vmid = std::stoi(text);
    if (!find(vmid)) throw fail500("no such VMID '" + text + "'");
    if (remove) {
      if (!it->second.members.count(vmid)) throw fail500("VM " + text + " is not a pool member");
      it->second.members.erase(vmid);
      continue;
    }
    if (it->second.members.count(vmid)) throw fail500("VM " + text + " is already a pool member");
    std::string other = pool_of(vmid);
    if (!other.empty()) {
      if (!allow_move)
        throw fail500("VM " + text + " belongs already to pool '" + other +
                      "' and 'allow-move' is not set");
      pools[other].members.erase(vmid);
    }
    it->second.members.insert(vmid);
  }
}

}  // namespace pvesim
