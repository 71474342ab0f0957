// Decoding of Proxmox VE answers, apart from the transport: the JSON envelope of one HTTP
// answer, and the "data" of each endpoint the client uses. Every function takes any bytes or
// any JSON value (a Proxmox reply is input like any other: a proxy, a newer server or a broken
// one may send anything) and answers a value or a kProtocol error; none throws. Fuzzed by
// tests/fuzz/fuzz_proxmox_reply.cc.
#pragma once

#include <Poco/Dynamic/Var.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvesandbox/proxmox_client.h"

namespace pvs::pve::decode {

using Poco::Dynamic::Var;

// One HTTP answer: a 2xx must be an object with "data" (that value is returned, and "total"
// into *total when asked); anything else becomes the Error it describes (reason phrase or
// "message", per-parameter "errors", classified into an ErrorKind).
Result<Var> envelope(int http_status, std::string_view reason, std::string_view body, int* total);

// The data of each endpoint.
Result<int> next_id(const Var& data);
Result<std::vector<ClusterResource>> resources(const Var& data);
Result<std::vector<ContainerStatus>> containers(const Var& data);
Result<ContainerStatus> status(const Var& data);
Result<std::vector<RrdPoint>> rrddata(const Var& data);  // oldest first
Result<Config> config(const Var& data);  // an object of scalars (config, firewall options)
Result<std::optional<std::vector<Interface>>> interfaces(const Var& data);  // null: stopped
Result<std::vector<Snapshot>> snapshots(const Var& data);
Result<std::vector<Pool>> pools(const Var& data);
Result<Pool> one_pool(const Var& data);
Result<TaskStatus> task_status(const Var& data);
Result<std::vector<TaskLogLine>> task_log(const Var& data);
Result<std::string> upid(const Var& data);  // a task-starting call's answer

// JSON text of a value ("null" for an empty one).
std::string json_text(const Var& value);

}  // namespace pvs::pve::decode
