// pvesim's tasks: their start, the scheduler that ends them (with the config flock and the
// injected failures), and the task API (status, log, list).
#include <ctime>

#include "sim_impl.h"

namespace pvesim {

int Simulator::Impl::task_ms(const std::string& type) {
  auto it = options.task_ms.find(type);
  return it == options.task_ms.end() ? options.default_task_ms : it->second;
}

// Starts a task (state lock held). `finish` runs at the end, under the lock, and returns
// "" for OK or the error message.
std::string Simulator::Impl::start_task(const std::string& type, const std::string& id,
                                        const std::string& user, const std::string& node,
                                        std::function<std::string()> finish,
                                        std::function<std::string()> pre,
                                        std::function<std::string()> work) {
  Task t;
  t.node = node;  // the node in the request's path
  t.type = type;
  t.id = id;
  t.user = user;
  t.pid = next_pid++;
  t.pstart = 0x2A5F1C0 + t.pid;
  t.starttime = std::time(nullptr);
  t.upid = "UPID:" + t.node + ":" + hex_upper(t.pid, 8) + ":" + hex_upper(t.pstart, 8) + ":" +
           hex_upper(static_cast<uint64_t>(t.starttime), 8) + ":" + type + ":" + id + ":" + user +
           ":";
  t.finish = std::move(finish);
  t.pre = std::move(pre);
  t.work = std::move(work);
  std::string upid = t.upid;
  tasks[upid] = std::move(t);
  task_order.push_back(upid);
  {
    std::lock_guard lock(sched_mutex);
    due.emplace(Clock::now() + std::chrono::milliseconds(task_ms(type)), upid);
  }
  sched_cv.notify_all();
  return upid;
}

void Simulator::Impl::run_scheduler() {
  std::unique_lock lock(sched_mutex);
  while (!stopping) {
    if (due.empty()) {
      sched_cv.wait(lock);
      continue;
    }
    auto when = due.begin()->first;
    if (Clock::now() < when) {
      sched_cv.wait_until(lock, when);
      continue;
    }
    std::string upid = due.begin()->second;
    due.erase(due.begin());
    lock.unlock();
    complete_task(upid);
    lock.lock();
  }
}

bool Simulator::Impl::takes_flock(const std::string& type) {
  return type != "vzclone";  // a clone locks the template (lock=disk) and the new CT
}

void Simulator::Impl::complete_task(const std::string& upid) {
  std::function<std::string()> work;
  std::string warnings;
  std::string flock_id;
  {
    std::lock_guard lock(mutex);
    auto it = tasks.find(upid);
    if (it == tasks.end() || !it->second.running) return;
    Task& t = it->second;
    if (held_types.count(t.type)) {  // a test's gate: look again shortly
      {
        std::lock_guard sched(sched_mutex);
        due.emplace(Clock::now() + std::chrono::milliseconds(5), upid);
      }
      sched_cv.notify_all();
      return;
    }
    if (takes_flock(t.type) && flocked.count(t.id)) {
      // lock_config waits 10 s for the flock, then the task dies.
      auto now = Clock::now();
      if (t.flock_wait_since == Clock::time_point{}) t.flock_wait_since = now;
      if (now - t.flock_wait_since >= std::chrono::seconds(10)) {
        finish_task(t,
                    "can't lock file '/run/lock/lxc/pve-config-" + t.id + ".lock' - got timeout");
        return;
      }
      {
        std::lock_guard sched(sched_mutex);
        due.emplace(now + std::chrono::milliseconds(10), upid);
      }
      sched_cv.notify_all();
      return;
    }
    auto fail = options.fail_tasks.find(t.type);
    if (fail != options.fail_tasks.end() && !is_warnings(fail->second)) {
      std::string error = fail->second;
      // A failing clone still has to clean up after itself.
      if (t.type == "vzclone" && t.finish) {
        t.finish();
        error = "clone failed: " + fail->second;
      }
      finish_task(t, error);
      return;
    }
    if (fail != options.fail_tasks.end()) warnings = fail->second;
    if (t.pre) {
      std::string error = t.pre();
      if (!error.empty()) {
        finish_task(t, error);
        return;
      }
    }
    work = t.work;
    if (work && takes_flock(t.type)) {
      flocked.insert(t.id);
      flock_id = t.id;
    }
  }
  std::string error = work ? work() : "";
  std::lock_guard lock(mutex);
  if (!flock_id.empty()) flocked.erase(flock_id);
  auto it = tasks.find(upid);
  if (it == tasks.end() || !it->second.running) return;  // killed meanwhile
  Task& t = it->second;
  if (error.empty() && t.finish) error = t.finish();
  if (error.empty() && !warnings.empty()) {  // success with warnings
    t.log.push_back("WARN: simulated warning");
    error = warnings;
  }
  finish_task(t, error);
}

bool Simulator::Impl::is_warnings(const std::string& text) {
  return text.rfind("WARNINGS: ", 0) == 0;
}

void Simulator::Impl::finish_task(Task& t, const std::string& error) {
  t.running = false;
  t.endtime = std::time(nullptr);
  if (error.empty()) {
    t.exitstatus = "OK";
    t.log.push_back("TASK OK");
  } else if (is_warnings(error)) {
    t.exitstatus = error;
    t.log.push_back("TASK " + error);
  } else {
    t.exitstatus = error;
    t.log.push_back("TASK ERROR: " + error);
  }
}

Task& Simulator::Impl::need_task(const Call& c) {
  std::string upid = param(c, "upid");
  auto it = tasks.find(upid);
  if (it == tasks.end() || it->second.node != node_of(c)) {  // its log is on its node
    static const char* kRe = "UPID:";
    if (upid.rfind(kRe, 0) != 0 || upid.back() != ':')
      throw fail400("upid", "unable to parse worker upid '" + upid + "'");
    throw fail400("upid", "no such task");
  }
  return it->second;
}

Object::Ptr Simulator::Impl::task_object(const Task& t) {
  Object::Ptr o = new Object;
  o->set("upid", t.upid);
  o->set("node", t.node);
  o->set("pid", t.pid);
  o->set("pstart", static_cast<Poco::Int64>(t.pstart));
  o->set("starttime", static_cast<Poco::Int64>(t.starttime));
  o->set("type", t.type);
  o->set("id", t.id);
  auto bang = t.user.find('!');
  o->set("user", t.user.substr(0, bang));
  if (bang != std::string::npos) o->set("tokenid", t.user.substr(bang + 1));
  return o;
}

Object::Ptr Simulator::Impl::task_status(const Call& c) {
  Task& t = need_task(c);
  auto o = task_object(t);
  o->set("status", t.running ? "running" : "stopped");
  if (!t.running) o->set("exitstatus", t.exitstatus);
  return o;
}

Simulator::Impl::Reply Simulator::Impl::task_log(const Call& c) {
  Task& t = need_task(c);
  int start = std::stoi(param(c, "start", "0")), limit = std::stoi(param(c, "limit", "50"));
  Array::Ptr a = new Array;
  int total = static_cast<int>(t.log.size());
  for (int i = start; i < total && i < start + limit; ++i) {
    Object::Ptr o = new Object;
    o->set("n", i + 1);
    o->set("t", t.log[static_cast<std::size_t>(i)]);
    a->add(o);
  }
  return {a, total};
}

Simulator::Impl::Reply Simulator::Impl::task_list(const Call& c) {
  std::string source = param(c, "source", "archive");
  std::string vmid = param(c, "vmid"), typefilter = param(c, "typefilter");
  int start = std::stoi(param(c, "start", "0")), limit = std::stoi(param(c, "limit", "50"));
  Array::Ptr a = new Array;
  int index = 0, total = 0;
  for (auto it = task_order.rbegin(); it != task_order.rend(); ++it) {
    const Task& t = tasks[*it];
    if (t.node != node_of(c)) continue;
    if (source == "archive" && t.running) continue;
    if (source == "active" && !t.running) continue;
    if (!vmid.empty() && t.id != vmid) continue;
    if (!typefilter.empty() && t.type != typefilter) continue;
    ++total;
    if (index++ < start || static_cast<int>(a->size()) >= limit) continue;
    auto o = task_object(t);
    if (!t.running) {
      o->set("status", t.exitstatus);
      o->set("endtime", static_cast<Poco::Int64>(t.endtime));
    }
    a->add(o);
  }
  return {a, total};
}

}  // namespace pvesim
