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

namespace {

using Impl = Simulator::Impl;
using Call = Impl::Call;
using Reply = Impl::Reply;
using Route = Reply (*)(Impl&, Call&);

// Handlers of more than a line; the one-line ones are in the table below.
Reply version(Impl&, Call&) {
  Object::Ptr o = new Object;
  o->set("version", "9.1.3");
  o->set("release", "9.1");
  o->set("repoid", "5c9e4ea7");
  return {o};
}

Reply node_list(Impl& s, Call&) {
  Array::Ptr a = new Array;
  auto loads = s.node_loads();
  for (const auto& node : s.cluster->nodes()) {
    auto n = s.cluster->node_entry(node.name, loads[node.name]);
    n->set("ssl_fingerprint", s.fingerprint);  // one endpoint, one certificate
    a->add(n);
  }
  return {a};
}

Reply next_id(Impl& s, Call& c) {
  if (c.params.count("vmid")) {
    int vmid = s.vmid_param(c);
    if (s.cts.count(vmid)) throw fail400("vmid", "VM " + std::to_string(vmid) + " already exists");
    return {std::to_string(vmid)};
  }
  for (int id = 100; id < 1000000; ++id) {
    if (s.cts.count(id)) continue;
    if (s.options.nextid_as_number) return {id};
    return {std::to_string(id)};  // a string on the wire, as real servers send it
  }
  throw fail500("unable to get any free VMID in range [100, 1000000]");
}

Reply ct_list(Impl& s, Call& c) {
  Array::Ptr a = new Array;
  for (const auto& [vmid, ct] : s.cts)
    if (ct.node == s.node_of(c)) a->add(s.vmstatus(ct));
  return {a};
}

Reply ct_config(Impl& s, Call& c) {
  Container& ct = s.need(c, s.vmid_param(c));
  bool current = c.params.count("current") && s.param(c, "current") == "1";
  auto o = s.render_config(current ? ct.config : s.with_pending(ct));
  o->set("digest", s.digest_of(ct));
  return {o};
}

Reply ct_status(Impl& s, Call& c) {
  auto o = s.vmstatus(s.need(c, s.vmid_param(c)));
  Object::Ptr ha = new Object;
  ha->set("managed", 0);
  o->set("ha", ha);
  return {o};
}

Reply task_stop(Impl& s, Call& c) {
  Task& t = s.need_task(c);
  if (t.running) {
    t.killed = true;
    t.log.push_back("received interrupt");
    s.finish_task(t, "unexpected status");
  }
  return {Var()};
}

Reply pool_get(Impl& s, Call& c) {
  auto o = s.pool_list(c)->getObject(0);
  o->remove("poolid");
  return {o};
}

Reply pool_create(Impl& s, Call& c) {
  std::string id = s.param(c, "poolid");
  if (!std::isalpha(static_cast<unsigned char>(id[0])))
    throw fail400("poolid", "invalid format - pool ID must start with a letter");
  if (s.pools.count(id)) throw fail500("pool '" + id + "' already exists");
  s.pools[id].comment = s.param(c, "comment");
  return {Var()};
}

Reply pool_delete(Impl& s, Call& c) {
  std::string id = s.param(c, "poolid");
  auto it = s.pools.find(id);
  if (it == s.pools.end()) throw fail500("pool '" + id + "' does not exist");
  if (!it->second.members.empty())
    throw fail500("pool '" + id + "' is not empty (contains VM " +
                  std::to_string(*it->second.members.begin()) + ")");
  s.pools.erase(it);
  return {Var()};
}

Reply firewall_set(Impl& s, Call& c) {
  Container& ct = s.need(c, s.vmid_param(c));
  for (const auto& name : split_list(s.param(c, "delete"))) ct.firewall.erase(name);
  for (const auto& [k, v] : c.params)
    if (k != "node" && k != "vmid" && k != "delete" && k != "digest") ct.firewall[k] = v;
  return {Var()};
}

// The route table: "METHOD /path" as the API schema writes the path -> its handler.
const std::map<std::string, Route>& routes() {
  static const std::map<std::string, Route> table{
      {"GET /version", version},
      {"GET /nodes", node_list},
      {"GET /cluster/nextid", next_id},
      {"GET /cluster/resources",
       [](Impl& s, Call& c) -> Reply { return {s.resources(s.param(c, "type"))}; }},
      {"GET /nodes/{node}/lxc", ct_list},
      {"GET /nodes/{node}/storage",
       [](Impl& s, Call& c) -> Reply { return {s.cluster->node_storage(s.node_of(c), c.params)}; }},
      {"POST /nodes/{node}/lxc/{vmid}/clone",
       [](Impl& s, Call& c) -> Reply { return {s.clone(c)}; }},
      {"GET /nodes/{node}/lxc/{vmid}/config", ct_config},
      {"PUT /nodes/{node}/lxc/{vmid}/config",
       [](Impl& s, Call& c) -> Reply {
         s.update_config(c);
         return {Var()};
       }},
      {"PUT /nodes/{node}/lxc/{vmid}/resize",
       [](Impl& s, Call& c) -> Reply { return {s.resize(c)}; }},
      // The worker's UPID is not returned (pve-container returns null).
      {"POST /nodes/{node}/lxc/{vmid}/template",
       [](Impl& s, Call& c) -> Reply {
         s.make_template(c);
         return {Var()};
       }},
      {"POST /nodes/{node}/lxc/{vmid}/status/start",
       [](Impl& s, Call& c) -> Reply { return {s.start(c)}; }},
      {"POST /nodes/{node}/lxc/{vmid}/status/stop",
       [](Impl& s, Call& c) -> Reply { return {s.stop_like(c)}; }},
      {"POST /nodes/{node}/lxc/{vmid}/status/shutdown",
       [](Impl& s, Call& c) -> Reply { return {s.stop_like(c)}; }},
      {"POST /nodes/{node}/lxc/{vmid}/status/reboot",
       [](Impl& s, Call& c) -> Reply { return {s.stop_like(c)}; }},
      {"GET /nodes/{node}/lxc/{vmid}/status/current", ct_status},
      {"GET /nodes/{node}/lxc/{vmid}/rrddata",
       [](Impl& s, Call& c) -> Reply {
         return {s.rrddata(s.need(c, s.vmid_param(c)), s.param(c, "timeframe"))};
       }},
      {"GET /nodes/{node}/lxc/{vmid}/interfaces",
       [](Impl& s, Call& c) -> Reply { return {s.interfaces(s.need(c, s.vmid_param(c)))}; }},
      {"DELETE /nodes/{node}/lxc/{vmid}", [](Impl& s, Call& c) -> Reply { return {s.destroy(c)}; }},
      {"GET /nodes/{node}/lxc/{vmid}/snapshot",
       [](Impl& s, Call& c) -> Reply { return {s.snapshot_list(s.need(c, s.vmid_param(c)))}; }},
      {"POST /nodes/{node}/lxc/{vmid}/snapshot",
       [](Impl& s, Call& c) -> Reply { return {s.snapshot_create(c)}; }},
      {"DELETE /nodes/{node}/lxc/{vmid}/snapshot/{snapname}",
       [](Impl& s, Call& c) -> Reply { return {s.snapshot_delete(c)}; }},
      {"POST /nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback",
       [](Impl& s, Call& c) -> Reply { return {s.snapshot_rollback(c)}; }},
      {"GET /nodes/{node}/tasks", [](Impl& s, Call& c) -> Reply { return s.task_list(c); }},
      {"GET /nodes/{node}/tasks/{upid}/status",
       [](Impl& s, Call& c) -> Reply { return {s.task_status(c)}; }},
      {"GET /nodes/{node}/tasks/{upid}/log",
       [](Impl& s, Call& c) -> Reply { return s.task_log(c); }},
      {"DELETE /nodes/{node}/tasks/{upid}", task_stop},
      {"GET /pools", [](Impl& s, Call& c) -> Reply { return {s.pool_list(c)}; }},
      {"GET /pools/{poolid}", pool_get},
      {"POST /pools", pool_create},
      {"PUT /pools",
       [](Impl& s, Call& c) -> Reply {
         s.pool_update(c);
         return {Var()};
       }},
      {"PUT /pools/{poolid}",
       [](Impl& s, Call& c) -> Reply {
         s.pool_update(c);
         return {Var()};
       }},
      {"DELETE /pools", pool_delete},
      {"GET /nodes/{node}/lxc/{vmid}/firewall/options",
       [](Impl& s, Call& c) -> Reply {
         return {s.render_firewall(s.need(c, s.vmid_param(c)).firewall)};
       }},
      {"PUT /nodes/{node}/lxc/{vmid}/firewall/options", firewall_set},
      {"GET /nodes/{node}/lxc/{vmid}/firewall/rules",
       [](Impl& s, Call& c) -> Reply {
         s.need(c, s.vmid_param(c));
         return {Var(Array::Ptr(new Array))};
       }},
      {"POST /nodes/{node}/lxc/{vmid}/firewall/rules",
       [](Impl& s, Call& c) -> Reply {
         s.need(c, s.vmid_param(c));
         return {Var()};
       }},
  };
  return table;
}

}  // namespace

Simulator::Impl::Reply Simulator::Impl::dispatch(Call& c) {
  check_node(c);
  if (c.method == "GET") reap_dead();
  auto route = routes().find(c.method + " " + c.endpoint->path);
  if (route == routes().end())
    throw ApiFail{501, "Method '" + c.method + " " + c.path + "' not implemented", {}};
  return route->second(*this, c);
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
